"""DESIGN.md section 2: which modules may pull in torch, gymnasium and textual, and no module imports upward."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import rlsup

HEAVY = ("torch", "gymnasium", "ale_py", "textual", "ray")
PACKAGE = Path(rlsup.__file__).parent


def modules_under(relative: str = "") -> list[str]:
    """Every module of rlsup (or of one of its packages), as dotted names; a package is its __init__."""
    root = PACKAGE / relative
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]
    names = []
    for path in files:
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue  # runs the program when imported: `python -m` is its only caller
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


CORE = ["rlsup.spec", "rlsup.run.lineage", "rlsup.paths", "rlsup.jobs.state", "rlsup.jobs.store", "rlsup.run.files",
        "rlsup.hardware", "rlsup.checkpoint.manifest", "rlsup.views.jobs", "rlsup.formatting", "rlsup.jobs.record",
        "rlsup.algos.registry", "rlsup.algos.contract", "rlsup.views.plots", "rlsup.spec.experiments", "rlsup.views.groups",
        "rlsup.worker.resume", "rlsup.worker.progress", "rlsup.worker.tensorboard",
        "rlsup.run.signals"]  # the last: imported at a program's first line, before anything else
FRONT = modules_under("cli") + modules_under("daemon") + ["rlsup.client"]


def imported_after(module: str) -> set[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {name.split(".")[0] for name in json.loads(output)}


@pytest.mark.parametrize("module", CORE + FRONT)
def test_core_daemon_and_cli_import_no_torch_gymnasium_or_textual(module: str) -> None:
    assert not imported_after(module) & set(HEAVY)


def test_the_cli_and_client_are_covered_module_by_module() -> None:
    assert {"rlsup.cli", "rlsup.cli.parser", "rlsup.cli.jobs", "rlsup.client", "rlsup.daemon.main"} <= set(FRONT)


def test_plotting_loads_matplotlib_and_plotext_only_when_it_draws() -> None:
    assert not imported_after("rlsup.cli.plot") & {"matplotlib", "plotext"}


def test_cli_parser_with_every_command_stays_light() -> None:
    code = ("import json, sys; from rlsup.cli import build_parser; build_parser(); "
            "print(json.dumps(sorted(sys.modules)))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert not {name.split(".")[0] for name in json.loads(output)} & set(HEAVY)


# ---------------------------------------------------------------------------------------------
# Layers: each may import its own and those below it, never one above (lazy imports count too)

# Lowest first. Everything not named here is the core: spec, store, runfiles, the worker and its parts.
LAYERS = ("rlsup.daemon", "rlsup.client", "rlsup.tui", "rlsup.cli")
ALL_MODULES = modules_under()


def layer(module: str) -> int:
    """0 for the core, then the index in LAYERS plus one."""
    for rank, prefix in enumerate(LAYERS, start=1):
        if module == prefix or module.startswith(prefix + "."):
            return rank
    return 0


def module_path(module: str) -> Path:
    relative = Path(*module.split(".")[1:])
    package = PACKAGE / relative / "__init__.py"
    return package if package.exists() else (PACKAGE / relative).with_suffix(".py")


def rlsup_imports(module: str) -> set[str]:
    """The rlsup modules a module imports anywhere in its text; `from rlsup import client` names rlsup.client."""
    tree = ast.parse(module_path(module).read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "rlsup"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "rlsup":
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & set(ALL_MODULES)
            found |= submodules or {node.module}
    return found


def test_the_layers_are_found() -> None:
    assert {"rlsup.cli.parser", "rlsup.client", "rlsup.daemon.watcher", "rlsup.tui.app"} <= set(ALL_MODULES)
    assert layer("rlsup.jobs.store") < layer("rlsup.daemon.main") < layer("rlsup.client") < layer("rlsup.cli.jobs")


@pytest.mark.parametrize("module", ALL_MODULES)
def test_no_module_imports_a_layer_above_its_own(module: str) -> None:
    """The core knows no front end, the daemon neither client, TUI nor CLI, and nothing imports the CLI."""
    upward = sorted(imported for imported in rlsup_imports(module) if layer(imported) > layer(module))
    assert upward == [], f"{module} imports {upward} from a layer above its own"


def test_the_tui_never_imports_ray() -> None:
    # The Ray runner imports ray when the daemon first talks to a head; nothing a user opens pays for it.
    assert "ray" not in imported_after("rlsup.tui.app")
