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
    """Every module of rlsup (or of one of its packages, or the one module), as dotted names; a package is its
    __init__. A module not there (yet) is none."""
    root = PACKAGE / relative
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")] * root.with_suffix(".py").exists()
    names = []
    for path in files:
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue  # runs the program when imported: `python -m` is its only caller
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


# The root's leaf modules: the lowest floor, light, importing nothing of rlsup but each other.
ROOT_LEAVES = ("atomic", "paths", "locks", "own_files", "formatting", "hardware", "stopping", "frames")
# Packages (and root modules) that stay light for every module in them, a new one included: the CLI lists
# jobs, and the TUI draws them, from these without paying for a deep-learning import (DESIGN.md section 2).
LIGHT = ("spec", "decisions", "jobs", "run", "views", *ROOT_LEAVES)
# Modules of heavier packages that light ones and clients import: the registry (spec/ checks an algo name
# with it), the trainer contract, the checkpoint listing, and the worker's progress and TensorBoard files,
# which the env processes and a resume read without the trainer.
LIGHT_ELSEWHERE = ["rlsup.spec.registry", "rlsup.algos.contract", "rlsup.checkpoint.manifest", "rlsup.checkpoint.choose",
                   "rlsup.worker.progress", "rlsup.worker.tensorboard", "rlsup.worker.resume"]
# What people run: never a heavy import at module level (`rlsup list` must answer in well under a second).
FRONT = modules_under("cli") + modules_under("daemon") + ["rlsup.client"]


def imported_after(module: str) -> set[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {name.split(".")[0] for name in json.loads(output)}


def light_modules() -> list[str]:
    return [module for name in LIGHT for module in modules_under(name)] + LIGHT_ELSEWHERE


@pytest.mark.parametrize("module", light_modules() + FRONT)
def test_light_packages_daemon_and_cli_import_no_torch_gymnasium_textual_or_ray(module: str) -> None:
    assert not imported_after(module) & set(HEAVY)


def test_every_module_of_the_light_packages_and_the_front_is_covered() -> None:
    covered = set(light_modules() + FRONT)
    assert {"rlsup.cli", "rlsup.cli.parser", "rlsup.cli.jobs", "rlsup.client", "rlsup.daemon.main",
            "rlsup.spec.changes", "rlsup.jobs.record", "rlsup.run.files", "rlsup.views.colour", "rlsup.paths"} <= covered


@pytest.mark.parametrize("module", modules_under("tui"))
def test_the_tui_imports_no_torch_gymnasium_or_ray(module: str) -> None:
    # The Ray runner imports ray when the daemon first talks to a head; nothing a user opens pays for it.
    assert not imported_after(module) & {"torch", "gymnasium", "ale_py", "ray"}


def test_plotting_loads_matplotlib_and_plotext_only_when_it_draws() -> None:
    assert not imported_after("rlsup.cli.plot") & {"matplotlib", "plotext"}


def test_cli_parser_with_every_command_stays_light() -> None:
    code = ("import json, sys; from rlsup.cli import build_parser; build_parser(); "
            "print(json.dumps(sorted(sys.modules)))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert not {name.split(".")[0] for name in json.loads(output)} & set(HEAVY)


# ---------------------------------------------------------------------------------------------
# Floors: a module imports from its own floor or below, never above (lazy and type-only imports count too)

# Top first (DESIGN.md section 2). A package is named once and holds its subpackages unless they are named
# too (algos.envs sits below algos); a module at the root that no floor names fails the test until placed.
FLOORS = (("rlsup.cli", "rlsup.tui"), ("rlsup.client",), ("rlsup.worker", "rlsup.enjoy"), ("rlsup.views",),
          ("rlsup.daemon",), ("rlsup.algos",), ("rlsup.algos.envs",), ("rlsup.jobs",), ("rlsup.run",),
          ("rlsup.checkpoint",), ("rlsup.replay",), ("rlsup.spec", "rlsup.decisions"),
          ("rlsup", *(f"rlsup.{leaf}" for leaf in ROOT_LEAVES)))
# Upward imports made on purpose, (importer, imported), each with why. Keep it short: each is a fact in the
# wrong floor.
ALLOWED_UPWARD: set[tuple[str, str]] = set()
ALL_MODULES = modules_under()


def floor(module: str) -> int | None:
    """The module's floor, 1 the top; the longest name that holds it decides (rlsup.algos.envs.x is floor 7)."""
    found = [(len(name), rank) for rank, names in enumerate(FLOORS, start=1) for name in names
             if module == name or (module.startswith(name + ".") and name != "rlsup")]
    return max(found)[1] if found else None


def module_path(module: str) -> Path:
    relative = Path(*module.split(".")[1:])
    package = PACKAGE / relative / "__init__.py"
    return package if package.exists() else (PACKAGE / relative).with_suffix(".py")


def imported_from(module: str, node: ast.ImportFrom) -> str:
    """The module a `from … import` in `module` names, a relative one (`from ..jobs import store`) made absolute."""
    if node.level == 0:
        return node.module or ""
    package = module if module_path(module).name == "__init__.py" else module.rpartition(".")[0]
    base = package.rsplit(".", node.level - 1)[0]
    return f"{base}.{node.module}" if node.module else base


def rlsup_imports(module: str) -> set[str]:
    """The rlsup modules a module imports anywhere in its text; `from rlsup import client` names rlsup.client."""
    tree = ast.parse(module_path(module).read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "rlsup"}
        elif isinstance(node, ast.ImportFrom) and (named := imported_from(module, node)).split(".")[0] == "rlsup":
            submodules = {f"{named}.{alias.name}" for alias in node.names} & set(ALL_MODULES)
            found |= submodules or {named}
    return found


def upward_imports(module: str) -> list[str]:
    return sorted(imported for imported in rlsup_imports(module)
                  if floor(imported) < floor(module) and (module, imported) not in ALLOWED_UPWARD)


def test_every_module_has_a_floor() -> None:
    assert [module for module in ALL_MODULES if floor(module) is None] == []


def test_the_floors_are_found() -> None:
    assert {"rlsup.cli.parser", "rlsup.client", "rlsup.daemon.watcher", "rlsup.tui.app"} <= set(ALL_MODULES)
    assert floor("rlsup.cli.jobs") < floor("rlsup.client") < floor("rlsup.views.jobs") < floor("rlsup.daemon.main") \
        < floor("rlsup.algos.dqn") < floor("rlsup.algos.envs.vector") < floor("rlsup.jobs.store") < floor("rlsup.spec") \
        < floor("rlsup.paths")
    assert floor("rlsup.daemon") == floor("rlsup.daemon.edits") and floor("rlsup.tui.app") == floor("rlsup.cli")


def test_imports_are_found_at_module_level_inside_functions_and_from_the_package() -> None:
    """What the test below reads: `from rlsup import spec as specs` (the daemon's edits) names rlsup.spec."""
    assert "rlsup.client" in rlsup_imports("rlsup.cli.jobs") and "rlsup.spec" in rlsup_imports("rlsup.daemon.edits")
    assert "rlsup.algos.envs.check" in rlsup_imports("rlsup.client")  # imported inside submit()


@pytest.mark.parametrize("module", ALL_MODULES)
def test_no_module_imports_a_floor_above_its_own(module: str) -> None:
    upward = upward_imports(module)
    assert upward == [], f"{module} (floor {floor(module)}) imports {upward} from a floor above its own"
