"""File checksums of checkpoints, and the one rule for which paths a manifest may name."""
from __future__ import annotations

import hashlib
import zlib
from pathlib import Path, PurePosixPath
from typing import BinaryIO

# crc32, not sha256, by measurement on the 2-core box this was built on (about 700 MB of arrays,
# written then fsynced): a plain write ran at 0.8-1.2 GB/s, crc32 alone at 2.9 GB/s, sha256 at 1.1 GB/s.
# With the hash on a helper thread overlapping the write and the final fsync, the checkpoint reached
# these fractions of the plain write's bytes/s: on a quiet machine sha256 0.68-0.79 and crc32
# 1.08-1.19; in four runs of bench/checkpoint_write.py beside other jobs, sha256 0.48-0.96 and crc32
# 0.69-1.06, crc32 ahead every time. sha256 misses the 0.8 budget of DESIGN section 9. The checksum
# guards against torn and bit-flipped files, not an adversary, so crc32 is enough; the fingerprint
# (sha256 of the parameters) is what compares runs.
CHECKSUM_ALGORITHM = "crc32"
SUPPORTED_CHECKSUMS = ("crc32", "sha256")

# Big enough that a read call costs little, small enough to stay far below any array's size.
READ_CHUNK_BYTES = 8 << 20


class Checksum:
    """An incremental checksum with one interface for crc32 and sha256."""

    def __init__(self, algorithm: str = CHECKSUM_ALGORITHM):
        if algorithm not in SUPPORTED_CHECKSUMS:
            raise ValueError(f"unsupported checksum algorithm {algorithm!r}")
        self.algorithm = algorithm
        self.crc = 0
        self.sha = hashlib.sha256() if algorithm == "sha256" else None

    def update(self, buffer) -> None:
        # Both release the GIL on large buffers, which is what lets a helper thread overlap the write.
        if self.sha is not None:
            self.sha.update(buffer)
        else:
            self.crc = zlib.crc32(buffer, self.crc)

    def hexdigest(self) -> str:
        return self.sha.hexdigest() if self.sha is not None else f"{self.crc:08x}"


def safe_relative_path(checkpoint_dir: Path, relative: object) -> Path | None:
    """checkpoint_dir / relative when relative stays inside the directory, else None."""
    if not isinstance(relative, str) or not relative:
        return None
    parts = PurePosixPath(relative).parts
    if PurePosixPath(relative).is_absolute() or any(part in ("", ".", "..") for part in parts):
        return None
    return Path(checkpoint_dir).joinpath(*parts)


def file_checksum(handle: BinaryIO, length: int, algorithm: str) -> str | None:
    """Checksum of a file's first length bytes read in chunks, so verifying a large replay never holds it in
    memory; None when the file holds more (it grew, or is not what the manifest recorded). Never reads past
    length + 1, so a file that would never end cannot hold verification for ever."""
    checksum = Checksum(algorithm)
    buffer = bytearray(min(READ_CHUNK_BYTES, length) or 1)
    view = memoryview(buffer)
    remaining = length
    while remaining:
        count = handle.readinto(view[:min(remaining, len(buffer))])
        if not count:
            break
        checksum.update(view[:count])
        remaining -= count
    return checksum.hexdigest() if not handle.read(1) else None
