"""DESIGN.md section 2: which modules may pull in torch, gymnasium and textual."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "gymnasium", "ale_py", "textual")
CORE = ["rlsup.spec", "rlsup.paths", "rlsup.jobstate", "rlsup.store", "rlsup.runfiles", "rlsup.hardware",
        "rlsup.checkpoint.manifest"]
FRONT = ["rlsup.cli", "rlsup.daemon.main", "rlsup.daemon.client", "rlsup.daemon.commands",
         "rlsup.daemon.scheduler", "rlsup.daemon.supervisor", "rlsup.daemon.watcher"]


def imported_after(module: str) -> set[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {name.split(".")[0] for name in json.loads(output)}


@pytest.mark.parametrize("module", CORE + FRONT)
def test_core_daemon_and_cli_import_no_torch_gymnasium_or_textual(module: str) -> None:
    assert not imported_after(module) & set(HEAVY)


def test_cli_parser_with_every_command_stays_light() -> None:
    code = ("import json, sys; from rlsup.cli import build_parser; build_parser(); "
            "print(json.dumps(sorted(sys.modules)))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert not {name.split(".")[0] for name in json.loads(output)} & set(HEAVY)
