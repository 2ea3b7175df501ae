"""Where rlsup keeps things: RLSUP_HOME, run directories and the files inside them."""
from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

# Files of a run directory (DESIGN.md sections 6 and 7).
JOB_FILE = "job.toml"           # the run's spec: every field resolved, the one its worker reads
SPEC_HISTORY = "spec-history"   # every accepted version of job.toml, numbered 0001.toml, 0002.toml, ...
STATUS_FILE = "status.json"     # what the worker last said of itself, rewritten about once a second
METRICS_FILE = "metrics.jsonl"  # training, episode, evaluation and checkpoint records, one JSON object a line
LOG_FILE = "worker.log"         # the worker's log: what `rlsup logs` and the TUI's log pane show
EXIT_FILE = "exit.json"         # how the worker ended, written last: its exit code, reason and step
CHECKPOINTS = "checkpoints"     # one directory per checkpoint, step-000000012345/, each with its manifest
WORKER_LOCK = "worker.lock"     # held by the run's one worker for its whole life
KILL_MARKER = "kill-requested"  # a stop signal that finds it aborts the worker: a kill where only SIGINT gets through
SOURCE_COPY = "source.toml"     # `submit --copy`: the job file's snapshot that this job alone follows
TENSORBOARD = "tensorboard"     # [log] tensorboard: event files kept equal to metrics.jsonl (worker/tensorboard.py)
IMPORT_PATHS = "import-paths.json"  # where submit found the env's modules, for workers started without them
HOLD_FILE = "hold.json"         # a step where the experiment's scheduler compares members: the worker pauses there
# A fork's copy of its parent's checkpoint, hard-linked (or copied) at fork time (run/lineage.py): the parent
# may rotate it away before the fork's worker starts, and a copied fork stays self-describing.
INHERITED_CHECKPOINT = "parent-checkpoint"

# Files of RLSUP_HOME.
# rlsup's own example job files, in its source tree (a clone, as the README's first command uses).
EXAMPLES = Path(__file__).resolve().parents[1] / "jobs"


def is_example(path: Path) -> bool:
    """Whether path is one of rlsup's examples: submitted by copy, so that editing the job leaves it alone."""
    return Path(path).resolve().parent == EXAMPLES


DATABASE = "rlsup.db"           # the SQLite store: jobs, their events, hardware samples; the daemon's queue
DAEMON_LOCK = "daemon.lock"     # held by the home's one daemon, and naming its pid
DAEMON_LOG = "daemon.log"       # the daemon's log, rotated (daemon.toml log_max_bytes, log_backups)
DAEMON_SETTINGS = "daemon.toml" # the daemon's settings (rlsup/daemon/settings_file.py)
FOREGROUND = "foreground"       # one registration file per live `rlsup run` (rlsup/run/foreground.py)
IMPORT_KEY = "import-key"       # seals the import-paths.json of this home's runs (rlsup/run/import_trust.py)


def rlsup_home() -> Path:
    """$RLSUP_HOME, else $XDG_DATA_HOME/rlsup, else ~/.local/share/rlsup; created private."""
    return ensure_private_dir(home_path())


def home_path() -> Path:
    """Where rlsup_home() is, without creating it: a read-only command must leave no home behind."""
    explicit = os.environ.get("RLSUP_HOME")
    if explicit:
        home = Path(explicit)
    else:
        data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        home = Path(data) / "rlsup"
    return home.expanduser().resolve()


def ensure_private_dir(path: Path) -> Path:
    """Create path and its missing parents, each readable by its owner alone.

    A directory that already exists keeps its permissions: it may be shared on purpose (a 1777
    scratch directory given as --run-dir), and only what rlsup creates is rlsup's to make private.
    """
    path = Path(path)
    missing = [directory for directory in (path, *path.parents) if not directory.exists()]
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)  # the umask can only remove bits, never add them to 0700
        except FileExistsError:
            pass  # made meanwhile by another process: not ours to change
    if not path.is_dir():
        raise NotADirectoryError(f"{path} exists and is not a directory")
    return path


NAME_LENGTH = 64  # characters of a job name: part of its run directory's name, and a column of `rlsup list`


def sanitize_name(name: str) -> str:
    """A name safe as a path component: no separators, no dots at the start, no control characters."""
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]+", "-", name).strip("-.")
    return cleaned[:NAME_LENGTH] or "job"


def runs_dir(home: Path | None = None) -> Path:
    return ensure_private_dir((home or rlsup_home()) / "runs")


def new_run_dir(name: str, home: Path | None = None, root: Path | None = None) -> Path:
    """A fresh, uniquely named run directory: runs/NAME-YYYYmmdd-HHMMSS-XXXX (or under root: a cluster's run_root)."""
    if root is not None:
        Path(root).mkdir(parents=True, exist_ok=True)
    while True:
        candidate = run_dir_name(name, home, root)
        try:
            candidate.mkdir(mode=0o700)
            return candidate
        except FileExistsError:
            continue


def run_dir_name(name: str, home: Path | None = None, root: Path | None = None) -> Path:
    """Where new_run_dir would make a run now, not made: one who must record it first makes it after."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (Path(root) if root is not None else runs_dir(home)) / f"{sanitize_name(name)}-{stamp}-{secrets.token_hex(2)}"


def checkpoint_name(step: int, reason: str = "") -> str:
    # A best checkpoint gets a name of its own: an interval or final checkpoint at the same step
    # would otherwise replace it.
    return f"step-{step:012d}-best" if reason == "best" else f"step-{step:012d}"
