"""A checkpoint's state tree as files: tensors, arrays and bytes referenced from state.json, loaded without pickle."""
from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from numpy.lib import format as npy_format

from rlsup.checkpoint.checksums import safe_relative_path
from rlsup.checkpoint.manifest import STATE_FILE, CheckpointError

TENSORS_FILE = "tensors.pt"
ARRAYS_DIR = "arrays"
BLOBS_DIR = "blobs"

# How leaves that JSON cannot hold are referenced from state.json. User dicts may not use these keys,
# so a one-key dict holding one of them is always a reference.
TENSOR_KEY = "__tensor__"
ARRAY_KEY = "__array__"
BYTES_KEY = "__bytes__"
INT_KEYS = "__intkeys__"  # a dict with int keys (torch optimizers' "state"); JSON objects only have str keys
RESERVED_KEYS = (TENSOR_KEY, ARRAY_KEY, BYTES_KEY, INT_KEYS)

# A non-contiguous array is copied this many bytes at a time: far below 10% of a replay's size.
COPY_CHUNK_BYTES = 16 << 20


class Encoder:
    """Turns a state tree into JSON, collecting the leaves that JSON cannot hold.

    Tuples become lists: components must accept lists where they gave tuples. Dict keys must be all
    str or all int; anything else is refused rather than silently changed.
    """

    def __init__(self, state: dict):
        self.tensors: dict[str, torch.Tensor] = {}
        self.arrays: list[tuple[str, np.ndarray]] = []
        self.blobs: list[tuple[str, bytes]] = []
        self.used_names: set[str] = set()
        self.state_text = (json.dumps(self.encode(state), separators=(",", ":")) + "\n").encode()

    def directories(self) -> list[str]:
        """The subdirectories the files need, made before them."""
        return [name for name, items in ((ARRAYS_DIR, self.arrays), (BLOBS_DIR, self.blobs)) if items]

    def files(self) -> list[tuple[str, Callable[[Any], None]]]:
        """Every file of the tree in writing order, each with what writes it onto a handle that has write(buffer)
        and write_retained(buffer) (store.py's checksummed file); state.json comes last."""
        files = [(relative, lambda handle, array=array: write_array(handle, array))
                 for relative, array in self.arrays]
        files += [(relative, lambda handle, data=data: handle.write(data)) for relative, data in self.blobs]
        if self.tensors:
            files.append((TENSORS_FILE, lambda handle: torch.save(self.tensors, handle)))
        files.append((STATE_FILE, lambda handle: handle.write(self.state_text)))
        return files

    def bytes_needed(self) -> int:
        """About what the tree's files will take (torch's container adds a few kB)."""
        tensors = sum(tensor.numel() * tensor.element_size() for tensor in self.tensors.values())
        arrays = sum(array.nbytes for _, array in self.arrays)
        blobs = sum(len(data) for _, data in self.blobs)
        return tensors + arrays + blobs + len(self.state_text)

    def encode(self, value: Any, where: tuple = ()) -> Any:
        kind = type(value)
        if value is None or kind in (bool, int, float, str):
            return value
        if isinstance(value, dict):
            return self._encode_dict(value, where)
        if kind in (list, tuple) or isinstance(value, torch.Size):
            return [self.encode(item, where + (index,)) for index, item in enumerate(value)]
        if isinstance(value, torch.Tensor):
            return {TENSOR_KEY: self._add_tensor(value, where)}
        if isinstance(value, np.ndarray):
            return {ARRAY_KEY: self._add_array(value, where)}
        if kind in (bytes, bytearray):
            return {BYTES_KEY: self._add_blob(bytes(value), where)}
        if isinstance(value, np.generic):
            raise TypeError(f"state at {_describe(where)}: numpy scalar {value!r} ({kind.__name__}); "
                            "store a Python int/float/bool (.item()) or a 0-d array")
        raise TypeError(f"state at {_describe(where)}: cannot checkpoint a {kind.__module__}.{kind.__name__}; "
                        "leaves must be None, bool, int, float, str, list, tensor, ndarray or bytes")

    def _encode_dict(self, value: dict, where: tuple) -> dict:
        keys = list(value)
        if all(type(key) is str for key in keys):
            reserved = [key for key in keys if key in RESERVED_KEYS]
            if reserved:
                raise ValueError(f"state at {_describe(where)}: key {reserved[0]!r} is reserved "
                                 "by the checkpoint format")
            return {key: self.encode(item, where + (key,)) for key, item in value.items()}
        if all(type(key) is int for key in keys):
            return {INT_KEYS: {str(key): self.encode(item, where + (key,)) for key, item in value.items()}}
        kinds = sorted({type(key).__name__ for key in keys})
        raise TypeError(f"state at {_describe(where)}: dict keys must be all str or all int, "
                        f"found {', '.join(kinds)}")

    def _add_tensor(self, tensor: torch.Tensor, where: tuple) -> str:
        name = self._unique_name(where)
        tensor = tensor.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        # torch.save writes a view's whole storage: a slice of a big buffer would save all of it.
        if tensor.layout == torch.strided and _storage_is_larger(tensor):
            tensor = tensor.clone()
        self.tensors[name] = tensor
        return name

    def _add_array(self, array: np.ndarray, where: tuple) -> str:
        if array.dtype.hasobject:
            raise TypeError(f"state at {_describe(where)}: arrays of Python objects (dtype {array.dtype}) "
                            "would need pickle; convert them to a numeric dtype")
        relative = f"{ARRAYS_DIR}/{self._unique_name(where)}.npy"
        self.arrays.append((relative, array))
        return relative

    def _add_blob(self, data: bytes, where: tuple) -> str:
        relative = f"{BLOBS_DIR}/{self._unique_name(where)}.bin"
        self.blobs.append((relative, data))
        return relative

    def _unique_name(self, where: tuple) -> str:
        """A readable file-safe name from the leaf's path (replay.frames), made unique case-insensitively."""
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", ".".join(str(part) for part in where))[:120] or "root"
        if base.startswith("."):
            base = "_" + base
        name, number = base, 1
        while name.lower() in self.used_names:
            number += 1
            name = f"{base}-{number}"
        self.used_names.add(name.lower())
        return name


def _storage_is_larger(tensor: torch.Tensor) -> bool:
    return tensor.untyped_storage().nbytes() > tensor.numel() * tensor.element_size()


def _describe(where: tuple) -> str:
    return ".".join(str(part) for part in where) or "the root"


class _Decoder:
    """Turns state.json back into a tree, resolving references to tensors, arrays and blobs."""

    def __init__(self, directory: Path, files: dict, tensors: dict):
        self.directory = directory
        self.files = files
        self.tensors = tensors

    def decode(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.decode(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, inner), = value.items()
            if key in RESERVED_KEYS:
                return self._decode_reference(key, inner)
        return {key: self.decode(item) for key, item in value.items()}

    def _decode_reference(self, key: str, inner: Any) -> Any:
        if key == INT_KEYS:
            return {int(name): self.decode(item) for name, item in inner.items()}
        if key == TENSOR_KEY:
            if inner not in self.tensors:
                raise CheckpointError(f"checkpoint {self.directory}: tensor {inner!r} missing from {TENSORS_FILE}")
            return self.tensors[inner]
        path = self._listed_file(inner)
        if key == ARRAY_KEY:
            # A read-only memory map: a replay is copied once, into its owner's buffer, never twice.
            return np.load(path, mmap_mode="r", allow_pickle=False)
        return path.read_bytes()

    def _listed_file(self, relative: Any) -> Path:
        # Only files the manifest lists are read, so verification covered everything that is loaded.
        path = safe_relative_path(self.directory, relative)
        if path is None or relative not in self.files:
            raise CheckpointError(f"checkpoint {self.directory}: {relative!r} is not a file listed in its manifest")
        return path


def load_tree(directory: Path, files: dict) -> dict:
    """The state tree of a checkpoint directory whose manifest lists files; arrays as read-only memory maps.

    Nothing is unpickled: tensors load with weights_only=True, arrays with allow_pickle=False.
    """
    try:
        tree = json.loads((directory / STATE_FILE).read_text())
        tensors = _load_tensors(directory) if TENSORS_FILE in files else {}
        return _Decoder(directory, files, tensors).decode(tree)
    # UnpicklingError is what torch.load(weights_only=True) raises when it refuses an object. Its message advises
    # re-running with weights_only=False, which would run the file's code: never shown.
    except pickle.UnpicklingError:
        raise CheckpointError(f"checkpoint {directory} refused: {TENSORS_FILE} holds code (pickled objects other "
                              "than tensors), which rlsup never runs; nothing of it was loaded") from None
    except (OSError, ValueError, RuntimeError, AttributeError, TypeError) as error:
        raise CheckpointError(f"checkpoint {directory} cannot be loaded: {error}") from error


def _load_tensors(directory: Path) -> dict:
    tensors = torch.load(directory / TENSORS_FILE, weights_only=True, map_location="cpu")
    if not isinstance(tensors, dict):
        raise CheckpointError(f"checkpoint {directory}: {TENSORS_FILE} does not hold a dict of tensors")
    return tensors


# ---------------------------------------------------------------------------------------------
# Arrays as .npy files, written from their own memory


def _npy_header(array: np.ndarray) -> bytes:
    """A standard .npy header; the data is always written in C order."""
    header = {"descr": npy_format.dtype_to_descr(array.dtype), "fortran_order": False, "shape": array.shape}
    buffer = io.BytesIO()
    try:
        npy_format.write_array_header_1_0(buffer, header)
    except ValueError:  # header longer than version 1.0 allows (huge structured dtypes)
        buffer = io.BytesIO()
        npy_format.write_array_header_2_0(buffer, header)
    return buffer.getvalue()


def write_array(handle, array: np.ndarray) -> None:
    """Header, then the data straight from the array's memory; a non-contiguous array in row chunks."""
    handle.write(_npy_header(array))
    if array.flags.c_contiguous:
        handle.write_retained(array.reshape(-1).view(np.uint8))  # the array lives until the checkpoint is done
        return
    row_bytes = array.itemsize * int(np.prod(array.shape[1:], dtype=np.int64))
    rows = max(1, COPY_CHUNK_BYTES // max(row_bytes, 1))
    for start in range(0, array.shape[0], rows):
        handle.write(np.ascontiguousarray(array[start:start + rows]).reshape(-1).view(np.uint8))
