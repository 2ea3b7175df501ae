"""What a JOB or RUN argument names, and the one-line usage error every command reports."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlsup import client, paths
from rlsup.run import import_trust
from rlsup.jobs.store import Job


class CliError(Exception):
    """A usage problem reported as one line and exit code 2."""


COUNT_MAX = 1_000_000  # lines or events a command shows, far beyond a screen and within SQLite's integers


def count_argument(text: str) -> int:
    """argparse's type for a count of lines or events: a whole number from 0 to COUNT_MAX (one of 30 digits
    overflowed SQLite's LIMIT, a traceback)."""
    try:
        value = int(text)
    except ValueError:  # also one of more than 4,300 digits, which int() refuses
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if not 0 <= value <= COUNT_MAX:
        raise argparse.ArgumentTypeError(f"must be from 0 to {COUNT_MAX:,}")
    return value


def names_experiments(action: argparse.Action) -> argparse.Action:
    """Mark a JOB or RUN positional that also takes an experiment's name: shell completion offers those too."""
    action.experiments = True  # type: ignore[attr-defined]  # read by cli/completion.py
    return action


def experiment_options(parser: argparse.ArgumentParser) -> None:
    """--seeds and --experiment, which submit queues by and validate judges by alike."""
    parser.add_argument("--seeds", metavar="SEEDS",
                        help="queue one job per seed as one experiment: 1-5, 1,4,9 or both (1-3,7)")
    parser.add_argument("--experiment", metavar="NAME",
                        help="the experiment's name (default: the job's name); its jobs are NAME-s1, NAME-s2, …")


def trust_imports_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trust-imports", action="store_true",
                        help="import the run's env modules from where its import-paths.json says, though this "
                             "user's rlsup did not write it (a run received from someone you trust)")


def use_run_imports(run_dir: Path, trust: bool) -> None:
    """Where the run's env modules are, by the trust rule (run/import_trust.py); what it left out, in one line."""
    _, left_out = import_trust.use_import_paths(run_dir, trust=trust)
    if left_out:
        print(f"rlsup: {left_out}", file=sys.stderr)


def resolve_run(text: str) -> Path:
    """A run directory from a path, `latest`, or a job id or name known to the daemon's store."""
    path = Path(text).expanduser()
    if (path / paths.JOB_FILE).is_file():
        return path.resolve()
    if text == "latest":
        return newest_run()
    try:
        return Path(client.find_job(text).run_dir)
    except client.JobNotFound as error:
        raise CliError(str(error)) from None


def newest_run() -> Path:
    runs_dir = paths.home_path() / "runs"  # looked at, never made: no run is there if it is missing
    runs = [run for run in runs_dir.iterdir() if (run / paths.JOB_FILE).is_file()] if runs_dir.is_dir() else []
    if not runs:
        raise CliError(f"there are no runs in {runs_dir} yet")
    return max(runs, key=lambda run: (run / paths.JOB_FILE).stat().st_mtime)


def find_job_or_say(reference: str) -> Job | None:
    """The job a JOB argument names, or None after saying on stderr that there is none."""
    try:
        return client.find_job(reference)
    except client.JobNotFound as error:
        print(f"rlsup: {error}", file=sys.stderr)
        return None
