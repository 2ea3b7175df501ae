"""The daemon-facing commands of `rlsup`: submit, list, pause, resume, kill, logs, status, daemon."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rlsup import colour, paths, runfiles, spec as specs
from rlsup.daemon import client
from rlsup.daemon.scheduler import gpu_shortage
from rlsup.hardware import Hardware
from rlsup.jobstate import ACTIVE, Desired, State
from rlsup.store import Job, Store


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the daemon commands to the `rlsup` parser; each sets `handler`, which returns an exit code."""
    submit = subparsers.add_parser("submit", help="queue a job; starts the daemon if needed")
    submit.add_argument("job", metavar="JOB.toml", help="the job file; later edits of it reach the job")
    submit.add_argument("--name", help="job name (default: [job] name, else the file's stem)")
    submit.add_argument("--priority", type=int, help="higher runs first (default: [job] priority)")
    submit.add_argument("--copy", action="store_true",
                        help="follow a copy of the file made in the run directory (RUN/source.toml), so edits of "
                             "the file reach only the jobs already bound to it")
    submit.set_defaults(handler=command_submit)

    listing = subparsers.add_parser("list", help="jobs, states and progress")
    listing.add_argument("--json", action="store_true", help="a JSON list of objects")
    listing.set_defaults(handler=command_list)

    for name, desired, text in (("pause", Desired.PAUSED, "pause jobs with a checkpoint"),
                                ("resume", Desired.RUNNING, "resume jobs from their newest checkpoint"),
                                ("kill", Desired.KILLED, "stop jobs at once, without a checkpoint")):
        intent = subparsers.add_parser(name, help=text)
        intent.add_argument("jobs", metavar="JOB", nargs="+", help="job id, job name or run directory")
        intent.set_defaults(handler=command_intent, desired=desired)

    logs = subparsers.add_parser("logs", help="show a job's worker.log")
    logs.add_argument("job", metavar="JOB", help="job id, job name or run directory")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.add_argument("-n", "--lines", type=int, default=50, help="lines of the tail to show first")
    logs.set_defaults(handler=command_logs)

    status = subparsers.add_parser("status", help="a job's state, events and checkpoints")
    status.add_argument("job", metavar="JOB", help="job id, job name or run directory")
    status.add_argument("--events", type=int, default=30, help="newest events shown")
    status.set_defaults(handler=command_status)

    daemon = subparsers.add_parser("daemon", help="start, stop or inspect the daemon")
    daemon.add_argument("action", choices=["start", "stop", "status"],
                        help="status exits 3 when no daemon runs")
    daemon.set_defaults(handler=command_daemon)


# ---------------------------------------------------------------------------------------------
# submit and intents


def command_submit(args: argparse.Namespace) -> int:
    try:
        job = client.submit(args.job, name=args.name, priority=args.priority, start_daemon=False, copy=args.copy)
    except specs.SpecError as error:
        print(error, file=sys.stderr)
        return 2
    except client.FileAlreadyBound as error:
        print(f"rlsup: {error}", file=sys.stderr)
        return 2
    print(job.id)
    print(f"queued {job.name} as job {job.id}; run directory {job.run_dir}", file=sys.stderr)
    say_who_follows(job)
    warn_if_gpus_missing(job)
    try:
        client.ensure_daemon()
    except client.DaemonError as error:
        print(f"rlsup: job {job.id} is queued, but {error}", file=sys.stderr)
        return 1
    return 0


def say_who_follows(job: Job) -> None:
    """Which file the new job follows, and which other jobs the same edits reach."""
    with Store() as store:
        others = [other for other in client.jobs_following(job.spec_path, store.jobs()) if other.id != job.id]
    if client.is_own_copy(job):
        print(f"job {job.id} follows its own copy {job.spec_path}: edit that file to change it", file=sys.stderr)
    elif others:
        drives = ", ".join(str(other.id) for other in [*others, job])
        print(f"note: {job.spec_path} now drives jobs {drives}: its edits reach "
              + ("both" if len(others) == 1 else "all of them"), file=sys.stderr)


def warn_if_gpus_missing(job: Job) -> None:
    """Say at once when a job asks for more GPUs than exist, rather than leave it queued in silence."""
    if job.gpus_wanted == 0:
        return
    hardware = Hardware()
    try:
        available = len(hardware.gpu_indices())
    finally:
        hardware.close()
    if job.gpus_wanted > available:
        print(f"rlsup: warning: job {job.id} {gpu_shortage(job.gpus_wanted, available)}", file=sys.stderr)


def command_intent(args: argparse.Namespace) -> int:
    words = {Desired.PAUSED: "pause", Desired.RUNNING: "resume", Desired.KILLED: "kill"}
    code = 0
    for reference in args.jobs:
        try:
            job = client.set_intent(reference, args.desired)
        except client.JobNotFound as error:
            print(f"rlsup: {error}", file=sys.stderr)
            code = 1
            continue
        except client.DaemonError as error:
            print(f"rlsup: {words[args.desired]} recorded, but {error}", file=sys.stderr)
            code = 1
            continue
        print(f"job {job.id} ({job.name}): {words[args.desired]} requested (now {job.state})")
        if job.state is State.DONE and args.desired is Desired.RUNNING:
            print(f"  it reached its budget; raise total_steps in {job.spec_path} to train further")
    return code


# ---------------------------------------------------------------------------------------------
# list


def job_row(job: Job) -> dict:
    """What `rlsup list --json` says of a job: the store's row with live values from status.json."""
    status = runfiles.read_status(Path(job.run_dir)) or {}
    live = job.state in ACTIVE and status.get("pid") == job.pid
    step = int(status["step"]) if live and status.get("step") is not None else job.step
    return {"id": job.id, "name": job.name, "algo": job.algo, "env": job.env, "state": job.state.value,
            "desired": job.desired.value, "step": step, "total_steps": job.total_steps,
            "steps_per_second": status.get("steps_per_second") if live else None,
            "mean_return": status.get("mean_return"), "gpus": list(job.gpu_indices), "pid": job.pid,
            "priority": job.priority, "restarts": job.restarts, "reason": job.reason,
            "run_dir": job.run_dir, "spec_path": job.spec_path, "submitted": job.submitted}


def command_list(args: argparse.Namespace) -> int:
    home = paths.home_path()
    if not (home / paths.DATABASE).exists():
        rows = []
    else:
        with Store(home) as store:
            rows = [job_row(job) for job in store.jobs()]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print_table(rows)
    if not client.daemon_status(home).running and any(row["state"] not in _RESTING for row in rows):
        print("(the daemon is not running: `rlsup daemon start`)", file=sys.stderr)
    return 0


_RESTING = {State.DONE.value, State.FAILED.value, State.KILLED.value, State.PAUSED.value}
COLUMNS = ("ID", "NAME", "ALGO", "ENV", "STATE", "STEP/TOTAL", "STEPS/S", "RETURN", "GPU", "RUN DIR")


def print_table(rows: list[dict]) -> None:
    if not rows:
        print("no jobs; queue one with `rlsup submit JOB.toml`")
        return
    cells = [COLUMNS] + [_cells(row) for row in rows]
    widths = [max(len(line[index]) for line in cells) for index in range(len(COLUMNS) - 1)]
    painted = colour.wanted()
    state_column = COLUMNS.index("STATE")
    for number, line in enumerate(cells):
        padded = [cell.ljust(width) for cell, width in zip(line, widths)]
        if number:  # colour after padding: escape codes have no width on screen
            padded[state_column] = colour.paint_state(padded[state_column], line[state_column], painted)
        print("  ".join(padded) + "  " + line[-1])


def _cells(row: dict) -> tuple[str, ...]:
    rate = row["steps_per_second"]
    mean = row["mean_return"]
    return (str(row["id"]), row["name"], row["algo"], row["env"], row["state"],
            f"{row['step']:,}/{row['total_steps']:,}", f"{rate:,.0f}" if rate else "-",
            f"{mean:.1f}" if isinstance(mean, (int, float)) else "-",
            ",".join(map(str, row["gpus"])) or "-", row["run_dir"])


# ---------------------------------------------------------------------------------------------
# logs and status


def command_logs(args: argparse.Namespace) -> int:
    job = _find(args.job)
    if job is None:
        return 1
    path = Path(job.run_dir) / paths.LOG_FILE
    for line in runfiles.tail_lines(path, args.lines):
        print(line)
    if args.follow:
        try:
            follow(path)
        except KeyboardInterrupt:
            return 0
    return 0


def follow(path: Path, *, poll_s: float = 0.25) -> None:
    """Print what is appended to path, like tail -f, until interrupted."""
    offset = path.stat().st_size if path.exists() else 0
    while True:
        size = path.stat().st_size if path.exists() else 0
        if size < offset:  # truncated or replaced: start from its beginning
            offset = 0
        if size > offset:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read(size - offset)
            offset = size
            sys.stdout.write(data.decode(errors="replace"))
            sys.stdout.flush()
        time.sleep(poll_s)


def command_status(args: argparse.Namespace) -> int:
    job = _find(args.job)
    if job is None:
        return 1
    row = job_row(job)
    state = colour.paint_state(job.state.value, job.state.value, colour.wanted())
    print(f"job {job.id} {job.name}: {state} (wants {job.desired})")
    print(f"  step {row['step']:,} of {job.total_steps:,}; restarts {job.restarts}/{job.max_restarts}"
          + (f"; pid {job.pid}" if job.pid else "") + (f"; GPU {job.gpus}" if job.gpus else ""))
    print("  " + following_line(job) + f"\n  run  {job.run_dir}")
    if job.reason:
        print("  " + job.reason.replace("\n", "\n  "))
    drift = client.spec_drift(job)
    if drift:
        print("  " + drift)
    with Store() as store:
        events = store.events(job.id, args.events)
    print("\nevents:")
    for event in events:
        change = f"{event.from_state or ''} -> {event.to_state}" if event.to_state else event.kind
        message = event.message.replace("\n", "\n" + " " * 22)
        print(f"  {_clock(event.time)}  {change:20} {message}")
    print("\ncheckpoints:")
    for line in checkpoint_lines(Path(job.run_dir)):
        print("  " + line)
    return 0


def following_line(job: Job) -> str:
    """Which file's edits reach the job, and which other jobs that file drives."""
    if client.is_own_copy(job):
        return f"follows {job.spec_path} (its own copy, made at submit: edits of the original do not reach it)"
    with Store() as store:
        drives = [str(other.id) for other in client.jobs_following(job.spec_path, store.jobs())]
    shared = f" (this file drives jobs {', '.join(drives)}: its edits reach them all)" if len(drives) > 1 else ""
    return f"follows {job.spec_path}{shared}"


def checkpoint_lines(run_dir: Path) -> list[str]:
    try:
        from rlsup.checkpoint.manifest import list_checkpoints  # torch-free by contract
    except ImportError:
        return ["(checkpoint listing unavailable)"]
    entries = list_checkpoints(run_dir)
    if not entries:
        return ["none yet"]
    return [f"{entry.step:>12,}  {_clock(entry.time)}  {entry.label:16}  {entry.bytes / 1e6:8.1f} MB  "
            f"{entry.fingerprint[:12]}" for entry in entries]


def _clock(moment: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment))


def _find(reference: str) -> Job | None:
    try:
        return client.find_job(reference)
    except client.JobNotFound as error:
        print(f"rlsup: {error}", file=sys.stderr)
        return None


# ---------------------------------------------------------------------------------------------
# daemon


def command_daemon(args: argparse.Namespace) -> int:
    home = paths.rlsup_home() if args.action == "start" else paths.home_path()
    try:
        if args.action == "start":
            status = client.ensure_daemon(home)
            print(f"daemon running (pid {status.pid}) for {home}")
            return 0
        if args.action == "stop":
            stopped = client.stop_daemon(home)
            print("daemon stopped; running workers keep running" if stopped else "no daemon was running")
            return 0
    except client.DaemonError as error:
        print(f"rlsup: {error}", file=sys.stderr)
        return 1
    status = client.daemon_status(home)
    print(f"daemon {'running (pid %s)' % status.pid if status.running else 'not running'} for {home}")
    if (home / paths.DATABASE).exists():
        with Store(home) as store:
            counts: dict[str, int] = {}
            for job in store.jobs():
                counts[job.state.value] = counts.get(job.state.value, 0) + 1
        print("jobs: " + (", ".join(f"{count} {state}" for state, count in counts.items()) or "none"))
    else:
        print("no jobs yet")
    return 0 if status.running else 3
