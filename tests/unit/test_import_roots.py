"""Where submit found an env's modules: the sys.path entry of each, the interpreter's own left out."""
from __future__ import annotations

import importlib
import sys

import pytest

from rlsup.run import import_trust
from rlsup import spec as specs
from rlsup.algos.envs.check import import_roots, module_root


@pytest.fixture
def source_tree(tmp_path, monkeypatch):
    top = tmp_path / "top"
    (top / "rlsup_roots_pkg" / "inner").mkdir(parents=True)
    for file in ("rlsup_roots_pkg/__init__.py", "rlsup_roots_pkg/sub.py", "rlsup_roots_pkg/inner/__init__.py",
                 "rlsup_roots_mod.py"):
        (top / file).write_text("")
    monkeypatch.syspath_prepend(str(top))
    yield top
    for name in [name for name in sys.modules if name.startswith("rlsup_roots_")]:
        del sys.modules[name]  # each test imports its own tree afresh


@pytest.mark.parametrize("name", ["rlsup_roots_mod", "rlsup_roots_pkg", "rlsup_roots_pkg.sub",
                                  "rlsup_roots_pkg.inner"])
def test_a_modules_root_is_the_entry_it_was_imported_from(name, source_tree):
    assert module_root(importlib.import_module(name), name) == str(source_tree)


def test_the_interpreters_own_directories_and_unimported_names_are_left_out(source_tree):
    importlib.import_module("rlsup_roots_pkg.sub")
    env = specs.EnvSection(id="rlsup_roots_mod:Walk-v0", imports=["json", "numpy", "rlsup_roots_pkg.sub",
                                                                  "rlsup_never_imported"])
    importlib.import_module("rlsup_roots_mod")
    assert import_roots(env) == [str(source_tree)]  # once, though two of its modules are named


@pytest.mark.parametrize("damaged", ["a\x00b", "\ud800x", 7, None])
def test_a_damaged_import_paths_entry_is_left_out_and_later_imports_still_work(damaged, tmp_path, monkeypatch):
    """An entry import cannot stat (a NUL, a lone surrogate: a hand-edited or damaged file) made every later
    import that reached it raise ValueError or UnicodeEncodeError instead of finding its module or not."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "rlsup_roots_recorded.py").write_text("")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    import_trust.write_import_paths(run_dir, [damaged, str(tmp_path / "gone"), str(real)])
    monkeypatch.setattr(sys, "path", list(sys.path))
    import_trust.use_import_paths(run_dir)
    assert sys.path[-1] == str(real) and damaged not in sys.path and str(tmp_path / "gone") not in sys.path
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("rlsup_roots_never_written")
    importlib.import_module("rlsup_roots_recorded")
    del sys.modules["rlsup_roots_recorded"]
