"""Modules an env package imports only to draw itself, loaded when something draws: MinAtar's seaborn and pyplot."""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types

# A namespace's plugin -> what importing it pulls in for rendering alone. MinAtar imports seaborn (and with it
# scipy and pandas) and matplotlib's pyplot at the top of its environment and gym modules, for a colour
# palette and a window: over a second of CPU in every process that makes one of its envs (a worker, each
# actor, each env process), against a tenth of that for the rest of MinAtar. Training never touches them; a
# render (rlsup enjoy) loads them at its first use.
RENDER_ONLY = {"MinAtar": ("seaborn", "matplotlib.pyplot")}


class LoadedOnFirstUse(types.ModuleType):
    """Stands in sys.modules for a module until an attribute of it is read, then imports it and hands it over.

    importlib.util.LazyLoader would not do: an import statement reads the module's __spec__, which loads a
    LazyLoader's module at once. This one holds the real __spec__, so importing it costs nothing, and the real
    __file__: inspect.getmodule, which torch's import runs, asks every module in sys.modules for one."""

    def __getattr__(self, attribute: str):
        return getattr(self.__dict__.get("_loaded") or self._load(), attribute)

    def _load(self) -> types.ModuleType:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        module = importlib.import_module(self.__name__)
        self.__dict__["_loaded"] = module
        return module


def defer_render_imports(namespace: str) -> None:
    """Before the namespace's plugin is imported: each of its render-only modules that is installed and not yet
    imported is a stand-in, so that importing it costs nothing until something reads from it."""
    for name in RENDER_ONLY.get(namespace, ()):
        if name in sys.modules:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # its parent package is missing or broken: the plugin says so itself
            continue
        if spec is None:
            continue
        stand_in = LoadedOnFirstUse(name)
        stand_in.__spec__ = spec
        if spec.has_location:
            stand_in.__file__ = spec.origin
        sys.modules[name] = stand_in
