"""$RLSUP_HOME/daemon.toml read into Settings: by the daemon, and by submit to find a cluster's run_root."""
from __future__ import annotations

import sys
from pathlib import Path

from rlsup import paths
from rlsup.daemon import scheduler

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def load_settings(home: Path) -> scheduler.Settings:
    """The home's daemon.toml (defaults where it is absent); a bad file raises SettingsError naming it."""
    path = Path(home) / paths.DAEMON_SETTINGS
    if not path.exists():
        return scheduler.Settings()
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise scheduler.SettingsError(f"{path}: {error}") from None
    return scheduler.settings_from_mapping(data, source=str(path))
