"""Checkpoint store: round trips, safe loading, verification, rotation and same-step rewrites on real files."""
from __future__ import annotations

import json
import math
import os
import pickletools
import subprocess
import sys
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from rlsup.checkpoint import manifest as manifests
from rlsup.checkpoint.manifest import FORMAT_VERSION, CheckpointError, list_checkpoints, read_manifest, verify
from rlsup.checkpoint.choose import latest_verified, resolve
from rlsup.checkpoint.store import load_checkpoint
from checkpoint_testing import dot_entries, flip_last_byte, small_state, write
# ---------------------------------------------------------------------------------------------
# Round trips


def test_round_trip_preserves_every_kind_of_leaf(tmp_path):
    big = np.random.default_rng(1).integers(0, 256, size=(300, 84, 84), dtype=np.uint8)  # spans several pieces
    state = {
        "network": {"weight": torch.randn(4, 3, requires_grad=True), "steps": torch.tensor(7),
                    "half": torch.randn(5).half(), "mask": torch.tensor([True, False]),
                    "view": torch.arange(100.0)[10:20:3]},
        "replay": {"frames": big, "rewards": np.linspace(-1, 1, 7, dtype=np.float32),
                   "actions": np.arange(9, dtype=np.int64), "float64": np.array([math.pi, -0.0, np.inf]),
                   "flags": np.array([True, False, True]), "scalar": np.array(3.5), "empty": np.zeros((0, 3)),
                   "strided": np.arange(60, dtype=np.int32).reshape(6, 10)[:, ::3],
                   "fortran": np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))},
        "env": {"ale": b"\x00\x01raw emulator state\xff", "empty": b"", "mutable": bytearray(b"ab")},
        "lists": [1, [2, [3, None]], (4, 5), [torch.ones(2), np.ones(2)]],
        "scalars": {"none": None, "true": True, "false": False, "int": -3, "huge": 2 ** 80, "float": 0.1,
                    "nan": float("nan"), "inf": -math.inf, "text": "épisode ✓", "empty": {}},
        "by_index": {0: {"a": 1}, 7: [torch.zeros(1)]},
    }
    entry = write(tmp_path, state, 12)
    manifest, loaded = load_checkpoint(entry.path)

    assert manifest["step"] == 12 and manifest["format"] == FORMAT_VERSION
    for name, tensor in state["network"].items():
        assert torch.equal(loaded["network"][name], tensor.detach()), name
        assert loaded["network"][name].dtype == tensor.dtype
    for name, array in state["replay"].items():
        assert loaded["replay"][name].dtype == array.dtype, name
        np.testing.assert_array_equal(loaded["replay"][name], array)
    assert loaded["env"] == {"ale": state["env"]["ale"], "empty": b"", "mutable": b"ab"}
    assert loaded["lists"][:3] == [1, [2, [3, None]], [4, 5]]  # tuples come back as lists
    assert torch.equal(loaded["lists"][3][0], torch.ones(2)) and np.array_equal(loaded["lists"][3][1], np.ones(2))
    scalars = loaded["scalars"]
    assert math.isnan(scalars.pop("nan"))
    assert scalars == {key: value for key, value in state["scalars"].items() if key != "nan"}
    assert type(scalars["true"]) is bool and type(scalars["int"]) is int
    assert list(loaded["by_index"]) == [0, 7] and loaded["by_index"][0] == {"a": 1}


def test_loaded_arrays_are_read_only_memory_maps(tmp_path):
    entry = write(tmp_path, {"frames": np.arange(1000, dtype=np.uint8)}, 1)
    _, loaded = load_checkpoint(entry.path)
    assert isinstance(loaded["frames"], np.memmap)
    assert not loaded["frames"].flags.writeable


def tiny_training(seed: int):
    torch.manual_seed(seed)
    network = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    return network, torch.optim.Adam(network.parameters(), lr=1e-2)


def adam_step(network, optimizer, inputs) -> None:
    optimizer.zero_grad()
    network(inputs).pow(2).mean().backward()
    optimizer.step()


def test_adam_state_round_trip_gives_bit_identical_next_step(tmp_path):
    inputs = torch.randn(16, 4, generator=torch.Generator().manual_seed(3))
    network, optimizer = tiny_training(seed=0)
    for _ in range(3):
        adam_step(network, optimizer, inputs)
    entry = write(tmp_path, {"network": network.state_dict(), "optimizer": optimizer.state_dict()}, 3)

    _, loaded = load_checkpoint(entry.path)
    fresh_network, fresh_optimizer = tiny_training(seed=99)
    fresh_network.load_state_dict(loaded["network"])
    fresh_optimizer.load_state_dict(loaded["optimizer"])
    assert list(loaded["optimizer"]["state"]) == list(optimizer.state_dict()["state"])  # int keys come back
    adam_step(network, optimizer, inputs)
    adam_step(fresh_network, fresh_optimizer, inputs)
    for original, restored in zip(network.parameters(), fresh_network.parameters()):
        assert torch.equal(original, restored)


json_leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
json_trees = st.recursive(json_leaves, lambda children: st.lists(children, max_size=3)
                          | st.dictionaries(st.text(max_size=5).filter(lambda key: not key.startswith("__")), children,
                                            max_size=3)
                          | st.dictionaries(st.integers(-5, 5), children, min_size=1, max_size=3), max_leaves=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=json_trees)
def test_json_trees_round_trip_exactly(tmp_path, tree):
    entry = write(tmp_path, {"tree": tree}, 1)
    assert load_checkpoint(entry.path)[1] == {"tree": tree}


# ---------------------------------------------------------------------------------------------
# Refused at write time


@pytest.mark.parametrize("state, error, words", [
    ({"replay": np.array([object(), 1], dtype=object)}, TypeError, "replay: arrays of Python objects"),
    ({"table": {(1, 2): "pair"}}, TypeError, "table: dict keys must be all str or all int, found tuple"),
    ({"table": {1: "a", "b": 2}}, TypeError, "found int, str"),
    ({"table": {True: 1}}, TypeError, "found bool"),
    ({"value": np.float32(1.5)}, TypeError, "numpy scalar"),
    ({"value": {1, 2}}, TypeError, "cannot checkpoint a builtins.set"),
    ({"tricky": {"__tensor__": "x"}}, ValueError, "reserved"),
])
def test_unsupported_state_is_refused_before_touching_the_disk(tmp_path, state, error, words):
    with pytest.raises(error, match=words):
        write(tmp_path, state, 5)
    assert not (tmp_path / "checkpoints").exists() or os.listdir(tmp_path / "checkpoints") == []


def test_unknown_reason_is_refused(tmp_path):
    with pytest.raises(ValueError, match="reason"):
        write(tmp_path, {}, 1, reason="whim")


# ---------------------------------------------------------------------------------------------
# Nothing is ever unpickled


def global_references(pickle_bytes: bytes) -> set[str]:
    """Every class or function a pickle stream names (GLOBAL opcodes; STACK_GLOBAL takes the two strings before it)."""
    names, strings = set(), []
    for opcode, argument, _ in pickletools.genops(pickle_bytes):
        if opcode.name == "GLOBAL":
            names.add(argument.replace(" ", "."))
        elif opcode.name == "STACK_GLOBAL":
            names.add(".".join(strings[-2:]))
        elif "UNICODE" in opcode.name:
            strings.append(argument)
    return names


def test_files_load_without_running_code(tmp_path):
    state = {"network": {"weight": torch.randn(3)}, "replay": {"frames": np.ones((5, 4), np.uint8),
                                                              "rewards": np.zeros(5, np.float32)}}
    entry = write(tmp_path, state, 2)

    tensors = torch.load(entry.path / "tensors.pt", weights_only=True, map_location="cpu")
    assert torch.equal(tensors["network.weight"], state["network"]["weight"])
    with zipfile.ZipFile(entry.path / "tensors.pt") as archive:
        pickle_name = next(name for name in archive.namelist() if name.endswith("data.pkl"))
        referenced = global_references(archive.read(pickle_name))
    assert referenced and all(name.startswith(("torch.", "collections.OrderedDict")) for name in referenced)

    for array_file in (entry.path / "arrays").iterdir():
        with open(array_file, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(handle)
            header_end = handle.tell()
        assert not dtype.hasobject
        # The file is exactly a header and the raw bytes: there is no room for a pickle stream.
        assert array_file.stat().st_size == header_end + dtype.itemsize * math.prod(shape)
        np.load(array_file, allow_pickle=False)
    json.loads((entry.path / "state.json").read_text())


# ---------------------------------------------------------------------------------------------
# Verification and refusal


def test_flipped_byte_is_named_refused_and_skipped(tmp_path):
    first = write(tmp_path, small_state(1), 10)
    second = write(tmp_path, {"replay": {"frames": np.arange(5000, dtype=np.uint8)}}, 20)
    assert verify(second.path) is None

    flip_last_byte(second.path / "arrays" / "replay.frames.npy")

    assert verify(second.path) == "checksum mismatch in arrays/replay.frames.npy"
    with pytest.raises(CheckpointError, match="checksum mismatch in arrays/replay.frames.npy") as refused:
        load_checkpoint(second.path)
    assert str(second.path) in str(refused.value)
    assert latest_verified(tmp_path).path == first.path
    assert resolve(tmp_path, "latest").step == 10
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [10, 20]  # still listed, just not verified


def test_truncated_missing_and_unlisted_files_are_reported(tmp_path):
    entry = write(tmp_path, small_state(2), 1)
    with open(entry.path / "tensors.pt", "r+b") as handle:
        handle.truncate(10)
    assert verify(entry.path).startswith("tensors.pt: 10 bytes on disk, manifest says")
    (entry.path / "tensors.pt").unlink()
    assert verify(entry.path) == "tensors.pt: missing"
    with pytest.raises(CheckpointError, match="tensors.pt: missing"):
        load_checkpoint(entry.path)


def rewrite_manifest(checkpoint_dir: Path, **changes) -> None:
    """Change a manifest as a writer would have written it: its own checksum sealed over the change."""
    manifest = read_manifest(checkpoint_dir)
    manifest.update(changes)
    (checkpoint_dir / "manifest.json").write_text(json.dumps(manifests.sealed(manifest)))


def test_newer_format_is_refused_with_a_clear_message(tmp_path):
    entry = write(tmp_path, small_state(3), 1)
    rewrite_manifest(entry.path, format=FORMAT_VERSION + 1)
    expected = f"format {FORMAT_VERSION + 1} is newer than this rlsup ({FORMAT_VERSION}): upgrade rlsup"
    assert verify(entry.path).startswith(expected)
    for verify_files in (True, False):
        with pytest.raises(CheckpointError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            load_checkpoint(entry.path, verify=verify_files)
    assert latest_verified(tmp_path) is None


def test_manifest_cannot_point_outside_the_checkpoint(tmp_path):
    entry = write(tmp_path, small_state(4), 1)
    files = {**read_manifest(entry.path)["files"], "../../secret": {"bytes": 1, "checksum": "00000000"}}
    rewrite_manifest(entry.path, files=files)
    assert verify(entry.path) == "../../secret: path leaves the checkpoint directory"


# ---------------------------------------------------------------------------------------------
# Memory and layering


@pytest.mark.parametrize("contiguous", [True, False])
def test_writing_an_array_does_not_copy_it(tmp_path, contiguous):
    source = np.random.default_rng(0).integers(0, 256, size=(1024, 2 * 24 * 1024), dtype=np.uint8)  # 48 MiB
    array = source[:, : 24 * 1024] if not contiguous else source[:, : 24 * 1024].copy()  # 24 MiB either way
    assert array.flags.c_contiguous == contiguous
    tracemalloc.start()
    try:
        write(tmp_path, {"frames": array}, 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Contiguous: written from the array's own memory. Strided: copied one 16 MiB chunk at a time.
    limit = array.nbytes * 0.1 if contiguous else 17 << 20
    assert peak < limit, f"peak {peak} bytes while writing a {array.nbytes}-byte array"
    np.testing.assert_array_equal(load_checkpoint(tmp_path / "checkpoints" / "step-000000000001")[1]["frames"], array)


def test_manifest_and_choose_modules_import_neither_torch_nor_numpy():
    code = ("import sys, rlsup.checkpoint.manifest, rlsup.checkpoint.choose; "
            "print(sorted(name for name in ('torch', 'numpy') if name in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
    from rlsup.checkpoint import checksums

    assert checksums.CHECKSUM_ALGORITHM in checksums.SUPPORTED_CHECKSUMS


# ---------------------------------------------------------------------------------------------
# Never lose a run (issue 9): the manifest's own checksum, refusing to start over, a full disk


def test_every_single_byte_flip_of_a_manifest_is_refused_or_changes_nothing(tmp_path):
    older = write(tmp_path, small_state(1), 10)
    newest = write(tmp_path, small_state(2), 20)
    path = newest.path / "manifest.json"
    original = path.read_bytes()
    trusted = json.loads(original)
    passed_changed = []
    for position in range(len(original)):
        for mask in (0x01, 0x10):
            flipped = bytearray(original)
            flipped[position] ^= mask
            path.write_bytes(bytes(flipped))
            if verify(newest.path) is None:
                if json.loads(bytes(flipped)) != trusted:  # only a flip that alters nothing rlsup reads may pass
                    passed_changed.append((position, mask))
            else:
                assert latest_verified(tmp_path).path == older.path  # falls back, never crashes
    path.write_bytes(original)
    assert passed_changed == []
    assert verify(newest.path) is None


def test_a_renamed_manifest_key_falls_back_instead_of_crashing(tmp_path):
    older = write(tmp_path, small_state(1), 10)
    newest = write(tmp_path, small_state(2), 20)
    path = newest.path / "manifest.json"
    path.write_text(path.read_text().replace('"metrics_bytes"', '"metrics_bytez"'))
    assert "manifest.json" in verify(newest.path)
    assert latest_verified(tmp_path).path == older.path
    with pytest.raises(CheckpointError):
        load_checkpoint(newest.path, verify=False)  # even unverified, a broken manifest is not trusted


def test_a_manifest_without_its_own_checksum_is_refused(tmp_path):
    entry = write(tmp_path, small_state(1), 10)
    manifest = read_manifest(entry.path)
    del manifest["manifest_checksum"]
    (entry.path / "manifest.json").write_text(json.dumps(manifest))
    assert verify(entry.path) == "manifest.json: no manifest_checksum"
    assert latest_verified(tmp_path) is None


def test_a_run_whose_checkpoints_all_fail_is_refused_naming_each(tmp_path):
    from rlsup.checkpoint.choose import NoUsableCheckpoint, require_usable

    first = write(tmp_path, small_state(1), 10)
    second = write(tmp_path, small_state(2), 20)
    flip_last_byte(first.path / "tensors.pt")
    rewrite_manifest(second.path, format=FORMAT_VERSION + 1)
    (tmp_path / "checkpoints" / "step-000000000030").mkdir()  # no manifest at all
    assert latest_verified(tmp_path) is None
    with pytest.raises(NoUsableCheckpoint) as refused:
        require_usable(tmp_path)
    message = str(refused.value)
    assert "has 3 checkpoint(s) and none can be used" in message
    assert "step-000000000010 (checksum mismatch in tensors.pt)" in message
    assert (f"step-000000000020 (format {FORMAT_VERSION + 1} is newer than this rlsup ({FORMAT_VERSION}): "
            "upgrade rlsup)") in message
    assert "step-000000000030 (manifest.json: missing or unreadable)" in message
    assert require_usable(tmp_path / "fresh").entry is None  # a run without checkpoints simply starts


def test_falling_back_names_each_newer_checkpoint_and_why(tmp_path):
    from rlsup.checkpoint.choose import newest_usable

    first = write(tmp_path, small_state(1), 10)
    second = write(tmp_path, small_state(2), 20)
    third = write(tmp_path, small_state(3), 30)
    flip_last_byte(second.path / "tensors.pt")
    (third.path / "manifest.json").unlink()
    (tmp_path / "checkpoints" / "step-000000000005").mkdir()  # older than the one used: not "skipped"
    choice = newest_usable(tmp_path)
    assert choice.entry.path == first.path
    assert [str(refused) for refused in choice.refused] == [
        "step-000000000030 (manifest.json: missing or unreadable)",
        "step-000000000020 (checksum mismatch in tensors.pt)"]
    assert choice.skipped_message().startswith("skipped 2 newer checkpoint(s) that do not verify")
    assert choice.skipped_message().endswith("using step-000000000010")


def test_an_unreadable_checkpoints_directory_is_an_error_not_an_empty_run(tmp_path):
    from rlsup.checkpoint.manifest import CheckpointsUnreadable
    from rlsup.checkpoint.choose import require_usable

    (tmp_path / "checkpoints").write_text("a file where the directory should be")
    assert list_checkpoints(tmp_path) == []  # listings for the TUI stay quiet
    with pytest.raises(CheckpointsUnreadable, match="cannot read .*checkpoints: Not a directory"):
        require_usable(tmp_path)


@pytest.mark.parametrize("state", [{"replay": np.ones(1 << 20, np.uint8)}, {"weights": torch.ones(1 << 18)}],
                         ids=["array", "tensor"])
@pytest.mark.parametrize("checked_first", [True, False], ids=["checked-before", "hit-while-writing"])
def test_a_full_disk_is_named_and_leaves_the_previous_checkpoint(tmp_path, monkeypatch, state, checked_first):
    from rlsup.checkpoint import space
    from rlsup_testing import small_filesystem

    if not checked_first:  # the space check passed, then the disk filled while writing
        monkeypatch.setattr(space, "require", lambda parent, needed: None)
    with small_filesystem(tmp_path / "disk", "256k") as run_dir:
        first = write(run_dir, small_state(1), 1)
        with pytest.raises(manifests.NoSpace, match=r"^no space left on device: needed about 1\.0 MiB in .*checkpoints$"):
            write(run_dir, state, 2)
        assert [entry.step for entry in list_checkpoints(run_dir)] == [1]
        assert verify(first.path) is None and dot_entries(run_dir) == []


class RunsCode:
    """What a stranger's tensors.pt may hold: an object whose unpickling calls a function."""

    def __reduce__(self):
        return (print, ("this code ran",))


def test_a_crafted_pickle_is_refused_as_code_without_torchs_advice_to_run_it(tmp_path, capsys):
    entry = write(tmp_path, small_state(3), 1)
    torch.save({"weights": RunsCode()}, entry.path / "tensors.pt")
    data = (entry.path / "tensors.pt").read_bytes()
    files = read_manifest(entry.path)["files"]
    files["tensors.pt"] = {"bytes": len(data), "checksum": f"{zlib.crc32(data):08x}"}
    rewrite_manifest(entry.path, files=files, checksum_algorithm="crc32")
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(entry.path)
    message = str(refused.value)
    assert "weights_only" not in message and "re-run" not in message.lower()
    assert "tensors.pt holds code" in message and "refused" in message and "\n" not in message
    assert "this code ran" not in capsys.readouterr().out
