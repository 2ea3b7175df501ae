"""$RLSUP_HOME/daemon.toml read into Settings: by the daemon, and by submit to find a cluster's run_root."""
from __future__ import annotations

from pathlib import Path

from rlsup import own_files, paths
from rlsup.daemon import scheduler
from rlsup.spec import toml_text


def load_settings(home: Path) -> scheduler.Settings:
    """The home's daemon.toml (defaults where it is absent); a bad file raises SettingsError naming it."""
    path = Path(home) / paths.DAEMON_SETTINGS
    if not path.exists():
        return scheduler.Settings()
    try:
        # A regular file only: a FIFO would block the daemon's loop at SIGHUP for ever.
        data = toml_text.loads(own_files.read_regular(path).decode("utf-8"))
    except (OSError, ValueError) as error:  # ValueError: TOMLDecodeError, or text that is not UTF-8
        raise scheduler.SettingsError(f"{path}: {error}") from None
    return scheduler.settings_from_mapping(data, source=str(path))
