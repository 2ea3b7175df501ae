"""tomllib on Python 3.11+, tomli before, for tests that read TOML directly."""
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def load(path: Path) -> dict:
    return tomllib.loads(Path(path).read_text())
