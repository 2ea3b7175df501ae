"""Path completion for the submit dialog: directories and job files, from the filesystem."""
from __future__ import annotations

import os
from pathlib import Path

from textual.suggester import Suggester


class PathSuggester(Suggester):
    """Completes the last part of a path from the filesystem: directories and .toml files."""

    def __init__(self):
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        if not value:
            return None
        expanded = Path(os.path.expanduser(value))
        directory, prefix = (expanded, "") if value.endswith("/") else (expanded.parent, expanded.name)
        try:
            names = sorted(completions(directory, prefix))
        except OSError:
            return None
        if not names or names[0] == prefix:
            return None
        return value + names[0][len(prefix):]


def completions(directory: Path, prefix: str):
    """Entries of directory starting with prefix: sub-directories (with a slash) and job files."""
    for entry in os.scandir(directory):
        hidden = entry.name.startswith(".") and not prefix.startswith(".")
        if hidden or not entry.name.startswith(prefix):
            continue
        if entry.is_dir():
            yield entry.name + "/"
        elif entry.name.endswith(".toml"):
            yield entry.name
