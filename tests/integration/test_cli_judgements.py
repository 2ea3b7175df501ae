"""The command line judges alike where it says it does: validate as submit, usage errors in one sentence."""
from __future__ import annotations

from pathlib import Path

import pytest

from rlsup_testing import assert_one_line_error, cartpole_text, run_rlsup

ASHA = '\n[scheduler]\nkind = "asha"\nmetric = "eval_return"\nrungs = [600, 1_200]\nkeep = 0.5\n'


def test_validate_refuses_a_lone_scheduler_as_submit_does(rlsup_home: Path, tmp_path: Path) -> None:
    """Issue 50 item 9: `rlsup validate` said "ok" of a [scheduler] in a lone job, which submit then refused;
    both now judge the file by one function, with the same --seeds and --experiment."""
    path = tmp_path / "alone.toml"
    path.write_text(cartpole_text(eval_every=300) + ASHA)
    for command in ("validate", "submit"):
        assert_one_line_error(run_rlsup(command, str(path)), 2, f"{path}:", "scheduler:",
                              "this would be its only one")
    seeded = run_rlsup("validate", str(path), "--seeds", "1-4")
    assert seeded.returncode == 0 and f"{path}: ok" in seeded.stdout, (seeded.stdout, seeded.stderr)
    assert not (rlsup_home / "rlsup.db").exists()  # validate made no store, and submit queued nothing


@pytest.mark.parametrize("arguments, fragments", [
    (("export", "latest", "--format", "tflite", "--out", "x"), ("rlsup export:", "--format", "'tflite'", "onnx",
                                                                 "torchscript")),
    (("bogus",), ("rlsup:", "'bogus'", "submit", "status")),
    (("submit",), ("rlsup submit:", "JOB.toml")),
    (("logs", "-n", "abc", "x"), ("rlsup logs:", "-n", "whole number")),
    (("list", "--colour"), ("rlsup list:", "--colour")),
])
def test_every_usage_error_is_one_sentence_and_exit_2(arguments: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    """Issue 50 item 11: `rlsup export --format tflite` printed argparse's usage over four lines, then the error;
    every command's usage error is now one line naming what is wrong and the valid choices."""
    result = run_rlsup(*arguments, timeout=60)
    assert_one_line_error(result, 2, *fragments)
    assert "__complete" not in result.stderr and "usage:" not in result.stderr
