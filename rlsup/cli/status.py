"""`rlsup logs` and `rlsup status`: one job's worker.log, and its state, events and checkpoints."""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from rlsup import client, formatting, paths
from rlsup.views import colour
from rlsup.jobs import state as jobstate
from rlsup.jobs.record import jobs_following
from rlsup.views import jobs as jobview
from rlsup.run import files as runfiles
from rlsup.cli.arguments import CliError, count_argument, find_job_or_say, names_experiments
from rlsup.cli.checkpoints import run_checkpoint_lines
from rlsup.cli.groups import print_experiment_status
from rlsup.cli.lineage import lineage_lines
from rlsup.jobs.store import Job, Store
from rlsup.run.exit import EXIT_ERROR


def register(subparsers: argparse._SubParsersAction) -> None:
    logs = subparsers.add_parser("logs", help="show a job's worker.log")
    logs.add_argument("job", metavar="JOB", help="job id, job name or run directory")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.add_argument("-n", "--lines", type=count_argument, default=50, help="lines of the tail to show first")
    logs.set_defaults(handler=command_logs)

    status = subparsers.add_parser("status", help="a job's state, events and checkpoints, or an experiment's jobs")
    names_experiments(status.add_argument("job", metavar="JOB",
                                          help="job id, job name, run directory or experiment name"))
    status.add_argument("--events", type=count_argument, default=30, help="newest events shown")
    status.set_defaults(handler=command_status)


# ---------------------------------------------------------------------------------------------
# logs


def command_logs(args: argparse.Namespace) -> int:
    job = find_job_or_say(args.job)
    if job is None:
        return EXIT_ERROR
    path = Path(job.run_dir) / paths.LOG_FILE
    try:
        for line in runfiles.read_tail(path, args.lines):
            print(formatting.printable(line))
        if args.follow:
            with contextlib.suppress(KeyboardInterrupt):
                follow(path)
    except OSError as error:  # a link (to a file outside the run), a FIFO: refused, never read
        raise CliError(str(error)) from None
    return 0


def follow(path: Path, *, poll_s: float = 0.25) -> None:
    """Print what is appended to path, like tail -f, until interrupted."""
    offset = None
    while True:
        try:
            data, offset = runfiles.read_appended(path, offset)
        except FileNotFoundError:  # not yet written, or between a move and its replacement: from its start
            data, offset = b"", 0
        if data:
            sys.stdout.write(formatting.printable_lines(data.decode(errors="replace")))
            sys.stdout.flush()
        time.sleep(poll_s)


# ---------------------------------------------------------------------------------------------
# status


def command_status(args: argparse.Namespace) -> int:
    experiment = client.experiment_jobs(args.job)
    if experiment:
        print_experiment_status(args.job.strip(), experiment)
        return 0
    job = find_job_or_say(args.job)
    if job is None:
        return EXIT_ERROR
    row = jobview.read_row(job)
    state = colour.paint_state(job.state.value, job.state, colour.wanted())
    unmet = jobstate.unmet_desire(job.state, job.desired)
    print(f"job {job.id} {formatting.printable(job.name)}: {state}" + (f" (wants {unmet})" if unmet else ""))
    print(f"  step {row.step:,} of {job.total_steps:,}; restarts {job.restarts}/{job.max_restarts}"
          + (f"; pid {job.pid}" if job.pid else "") + (f"; GPU {job.gpus}" if job.gpus else ""))
    if job.cluster:  # where a cluster job runs, and Ray's name for it (`ray job logs` takes it)
        ref = job.process.ref if job.process else None
        print(f"  runs on cluster {job.where}" + (f" as {ref}" if ref else ""))
    print("  " + formatting.printable(following_line(job)) + f"\n  run  {formatting.printable(job.run_dir)}")
    if job.experiment:
        print(f"  one of experiment {job.experiment} (`rlsup status {job.experiment}` shows all of its jobs)")
    for line in lineage_lines(Path(job.run_dir)):
        print("  " + formatting.printable(line))
    if job.reason:
        print("  " + formatting.printable_lines(job.reason).replace("\n", "\n  "))
    drift = client.spec_drift(job)
    if drift:
        print("  " + formatting.printable_lines(drift))
    print_events(job, args.events)
    print("\ncheckpoints:")
    for line in run_checkpoint_lines(Path(job.run_dir)):
        print("  " + line)
    return 0


def print_events(job: Job, count: int) -> None:
    with Store() as store:
        events = store.events(job.id, count)
    print("\nevents:")
    for event in events:
        change = f"{event.from_state or ''} -> {event.to_state}" if event.to_state else event.kind
        message = formatting.printable_lines(event.message).replace("\n", "\n" + " " * 22)
        print(f"  {formatting.clock_time(event.time, formatting.DATE_AND_TIME)}  {change:20} {message}")


def following_line(job: Job) -> str:
    """Which file's edits reach the job, and which other jobs that file drives."""
    if jobview.is_own_copy(job):
        return f"follows {job.spec_path} (its own copy, made at submit: edits of the original do not reach it)"
    with Store() as store:
        drives = [str(other.id) for other in jobs_following(job.spec_path, store.jobs())]
    shared = f" (this file drives jobs {', '.join(drives)}: its edits reach them all)" if len(drives) > 1 else ""
    return f"follows {job.spec_path}{shared}"
