"""A run's import-paths.json: sealed by the rlsup home that made it, used only if the seal holds or the user says."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import MutableMapping

from rlsup import atomic, paths

# The entries a worker found trusted, for the env processes it starts (and those its V-trace actors start):
# they append them to their own sys.path as the worker did, after what is installed, never on PYTHONPATH,
# where they would come before it and where Python would run a sitecustomize.py found in them.
HANDED_DOWN = "RLSUP_IMPORT_PATHS"
# Far above any real list (a few entries of a few hundred bytes): a larger file is not read at all.
LARGEST_FILE = 64 * 1024
SEAL_PURPOSE = b"rlsup import-paths.json v1\0"


def write_import_paths(run_dir: Path, entries: list[str]) -> None:
    """Record the sys.path entries the run's env modules were found in (none: no file) and who owns each,
    sealed with this home's key, so that only a worker, enjoy or export of this user's own rlsup uses them
    unasked, and only while each is owned as it was: a directory that vanished and was made again by
    someone else (in /tmp, say) is not the one the user imported from."""
    if entries:
        write_sealed(run_dir, list(entries), [owner_of(entry) for entry in entries])


def hand_on(parent_run: Path, run_dir: Path) -> None:
    """A fork made without a submit (a PBT member, made by the daemon) records its parent's entries, when this
    home sealed them, with the owners its parent's submit found: never who owns them now, which would vouch for
    a directory that changed hands since (its worker would then import another user's modules)."""
    record, _ = read_record(Path(parent_run) / paths.IMPORT_PATHS)
    if record is None or not isinstance(record.get("sys_path"), list) or not sealed_by_this_home(record):
        return
    entries, owners = record["sys_path"], record.get("owners")
    if isinstance(owners, list) and len(owners) == len(entries):  # what this home seals; anything else is no list
        write_sealed(run_dir, entries, owners)


def write_sealed(run_dir: Path, entries: list, owners: list) -> None:
    key = home_key(create=True)
    record = {"sys_path": entries, "owners": owners, "seal": seal(key, entries, owners) if key else None}
    atomic.write_json(Path(run_dir) / paths.IMPORT_PATHS, record)


def use_import_paths(run_dir: Path, *, trust: bool = False) -> tuple[list[str], str | None]:
    """Take the run directory and the cwd off sys.path, then append (after everything installed: they never
    shadow rlsup or a library) the entries of the run's import-paths.json that may be used: absolute
    directories or archives outside the run, of a file this home sealed, or of any file when the user trusts
    it. Returns the entries added, and one line on what was left out and how to use it, or None."""
    run_dir = Path(run_dir)
    sys.path[:] = [entry for entry in sys.path if not inside_run(entry, run_dir)]
    record, problem = read_record(run_dir / paths.IMPORT_PATHS)
    listed = record.get("sys_path") if record else None
    if not isinstance(listed, list):
        return [], problem and f"{problem}: its import paths are not used"
    sealed = sealed_by_this_home(record)
    owners = record["owners"] if sealed else [None] * len(listed)  # the seal vouches for their length

    def allowed(entry: object, owner: object) -> bool:
        return (usable_path_entry(entry) and not inside_run(entry, run_dir)
                and (trust or (sealed and owner_of(entry) == owner)))

    added = [entry for entry, owner in zip(listed, owners) if allowed(entry, owner)]
    for entry in added:
        if entry not in sys.path:
            sys.path.append(entry)
    if len(added) == len(listed):
        return added, None
    return added, left_out_line(run_dir, len(listed) - len(added), untrusted=not (sealed or trust))


def hand_down(run_dir: Path, entries: list[str]) -> None:
    """Tell this process's children (env processes, V-trace actors and theirs) which entries to append, and
    take the run directory off the PYTHONPATH they inherit, as it is off this process's sys.path."""
    os.environ[HANDED_DOWN] = json.dumps(entries)
    without_run(os.environ, run_dir)


def without_run(environment: MutableMapping[str, str], run_dir: Path) -> None:
    """Take the run directory (and paths inside it, and empty entries: the cwd) off environment's PYTHONPATH,
    where Python would run its sitecustomize.py and prefer its modules to those installed."""
    inherited = environment.get("PYTHONPATH")
    if inherited:
        kept = [entry for entry in inherited.split(os.pathsep) if not inside_run(entry, run_dir)]
        environment["PYTHONPATH"] = os.pathsep.join(kept)


def leave_run(run_dir: Path) -> bool:
    """Move this process's cwd from the run directory (or a path inside it) to this home: every process
    multiprocessing starts (V-trace actors, its resource tracker) runs `-c`, which puts the cwd first on its
    sys.path, before the standard library. True when it moved."""
    try:
        inside = inside_run(os.getcwd(), run_dir)
    except OSError:
        return False  # a cwd that is gone is no directory to import from
    if inside:
        os.chdir(paths.rlsup_home())
    return inside


def module_command(module: str) -> list[str]:
    """`python -m module` that puts neither its cwd nor a script's directory on sys.path: -P where Python has
    it (3.11); before, whoever starts it gives it a cwd that only this user writes."""
    return [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", module]


def take_handed_down() -> None:
    """In an env process: append the entries its worker handed down, as the worker itself did."""
    try:
        entries = json.loads(os.environ.get(HANDED_DOWN) or "[]")
    except ValueError:
        return
    for entry in entries if isinstance(entries, list) else []:
        if usable_path_entry(entry) and entry not in sys.path:
            sys.path.append(entry)


def left_out_line(run_dir: Path, count: int, *, untrusted: bool) -> str:
    entries = f"{count} entr{'y' if count == 1 else 'ies'}"
    if untrusted:
        return (f"{run_dir}/{paths.IMPORT_PATHS} was not written by this user's rlsup, so its {entries} "
                "(where the run's env modules were) are not imported from; if you trust whoever made the run, "
                "add --trust-imports (rlsup enjoy, export, fork, run --resume)")
    return (f"{run_dir}/{paths.IMPORT_PATHS}: {entries} left out (relative, missing, owned by another user "
            "than at submit, or inside the run directory, whose files are never imported)")


# ---------------------------------------------------------------------------------------------
# Reading the file and its seal


def read_record(path: Path) -> tuple[dict | None, str | None]:
    """The file's JSON object, or None and why: never through a link, never a FIFO or device, never past
    LARGEST_FILE; a missing file is no problem."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, None
    except OSError as error:
        return None, f"{path} cannot be opened ({error.strerror or error})"
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_size > LARGEST_FILE:
            return None, f"{path} is not a regular file of at most {LARGEST_FILE // 1024} KiB"
        data = handle.read(LARGEST_FILE + 1)
    try:
        record = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None, f"{path} is not JSON"
    return (record, None) if isinstance(record, dict) else (None, f"{path} does not hold a JSON object")


def sealed_by_this_home(record: dict) -> bool:
    key = home_key(create=False)
    found, owners = record.get("seal"), record.get("owners")
    return bool(key) and isinstance(found, str) and hmac.compare_digest(found, seal(key, record["sys_path"], owners))


def seal(key: bytes, entries: list, owners: list) -> str:
    message = SEAL_PURPOSE + json.dumps([entries, owners]).encode("utf-8", "surrogatepass")
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def home_key(*, create: bool) -> bytes | None:
    """This home's secret key, readable by its owner alone (else it is no proof and None): a run directory
    can be copied, a recorded user or host name written by anyone, but only this user can seal with it."""
    path = paths.home_path() / paths.IMPORT_KEY
    if create and not path.exists():
        paths.rlsup_home()
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                handle.write(secrets.token_hex(32))
        except FileExistsError:
            pass  # written meanwhile by another submit of this home: that one is the key
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        private = stat.S_ISREG(status.st_mode) and status.st_uid == os.getuid() and not status.st_mode & 0o077
        key = handle.read(256).strip()
    return key if private and len(key) >= 32 else None


# ---------------------------------------------------------------------------------------------
# Entries


def usable_path_entry(entry: object) -> bool:
    """An absolute path to a directory or a regular file (an archive) that exists. A relative one would resolve
    against whatever the cwd is; a FIFO or device would hang the import that opens it as an archive. An entry
    import cannot even stat (a NUL, a lone surrogate: a damaged or hand-edited file) would make every later
    import that reaches it raise instead of finding or not."""
    if not isinstance(entry, str) or not os.path.isabs(entry):
        return False
    try:
        mode = os.stat(os.fsencode(entry)).st_mode
    except (OSError, ValueError, UnicodeError):
        return False
    return stat.S_ISDIR(mode) or stat.S_ISREG(mode)


def owner_of(entry: object) -> int | None:
    try:
        return os.stat(os.fsencode(entry)).st_uid if isinstance(entry, str) else None
    except (OSError, ValueError, UnicodeError):
        return None


def inside_run(entry: object, run_dir: Path) -> bool:
    """The entry is the cwd ("" on sys.path) or, links resolved, the run directory or a path inside it."""
    if entry == "":
        return True
    try:
        real = os.path.realpath(os.fsencode(entry)) if isinstance(entry, str) else None
        run = os.path.realpath(os.fsencode(str(run_dir)))
    except (ValueError, UnicodeError):
        return False
    return real is not None and (real == run or real.startswith(run.rstrip(b"/") + b"/"))
