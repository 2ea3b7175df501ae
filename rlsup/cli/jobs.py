"""`rlsup submit`, `list`, `pause`, `resume` and `kill`: queue jobs, see them, and record intents."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlsup import client, formatting, paths, spec as specs
from rlsup.views import colour
from rlsup.spec import experiments
from rlsup.views import gpus, groups
from rlsup.jobs.record import jobs_following
from rlsup.views import jobs as jobview
from rlsup.jobs import store_file
from rlsup.cli import groups as group_views
from rlsup.cli.arguments import experiment_options, names_experiments
from rlsup.cli.program import ENV_CHECK_IMPORTS, import_quietly
from rlsup.hardware import gpu_totals
from rlsup.jobs.gpu_room import gpu_shortfall, machine_gpus
from rlsup.jobs.state import RESTING, Desired, State
from rlsup.jobs.store import Job, Store, StoreBusy
from rlsup.run.exit import EXIT_ERROR, EXIT_SPEC

INTENT_HELP = {Desired.PAUSED: "pause jobs with a checkpoint",
               Desired.RUNNING: "resume jobs from their newest checkpoint",
               Desired.KILLED: "stop jobs at once, without a checkpoint"}


def register(subparsers: argparse._SubParsersAction) -> None:
    submit = subparsers.add_parser("submit", help="queue a job; starts the daemon if needed")
    submit.add_argument("job", metavar="JOB.toml", help="the job file; later edits of it reach the job (rlsup's "
                        "own examples in jobs/ are followed by a copy, so they stay as they are)")
    submit.add_argument("--name", help="job name (default: [job] name, else the file's stem)")
    submit.add_argument("--priority", type=int, help="higher runs first (default: [job] priority)")
    submit.add_argument("--cluster", metavar="NAME",
                        help="run on this [[cluster]] of daemon.toml (default: [job] cluster; \"\": this machine)")
    submit.add_argument("--copy", action="store_true",
                        help="follow a copy of the file made in the run directory (RUN/source.toml), so edits of "
                             "the file reach only the jobs already bound to it")
    experiment_options(submit)
    submit.set_defaults(handler=command_submit)

    listing = subparsers.add_parser("list", help="jobs, states and progress")
    listing.add_argument("--json", action="store_true", help="a JSON list of objects")
    listing.set_defaults(handler=command_list)

    for desired in (Desired.PAUSED, Desired.RUNNING, Desired.KILLED):
        intent = subparsers.add_parser(desired.verb, help=INTENT_HELP[desired])
        names_experiments(intent.add_argument("jobs", metavar="JOB", nargs="+", help="job id, job name, run "
                                              "directory, or an experiment's name (all of its jobs)"))
        intent.set_defaults(handler=command_intent, desired=desired)


# ---------------------------------------------------------------------------------------------
# submit and intents


def command_submit(args: argparse.Namespace) -> int:
    try:
        queued = submit_jobs(args)
    except specs.SpecError as error:
        print(error, file=sys.stderr)
        return EXIT_SPEC
    except (client.FileAlreadyBound, client.NameTaken, client.ClusterUnavailable, experiments.SeedsError) as error:
        print(f"rlsup: {error}", file=sys.stderr)
        return EXIT_SPEC
    job = queued[0]
    print("\n".join(str(each.id) for each in queued))
    if job.experiment:
        print(f"queued experiment {job.experiment}: {len(queued)} job(s), "
              f"{', '.join(f'{each.id} {each.name}' for each in queued)}", file=sys.stderr)
    else:
        print(f"queued {job.name} as job {job.id}; run directory {job.run_dir}", file=sys.stderr)
        say_who_follows(job)
    if paths.is_example(Path(args.job)):
        print(f"note: {args.job} is one of rlsup's examples, which stay as they are: the job follows a copy "
              "(`e` in the TUI edits it); submit a file of your own to have its edits followed", file=sys.stderr)
    warn_if_gpus_missing(job)
    try:
        client.ensure_daemon()
    except client.DaemonError as error:
        print(f"rlsup: job {job.id} is queued, but {error}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def submit_jobs(args: argparse.Namespace) -> list[Job]:
    """One job, or an experiment's (with --seeds, --experiment or a [sweep] table in the file)."""
    import_quietly(ENV_CHECK_IMPORTS)  # each job's env is checked before it is queued
    if args.seeds is None and args.experiment is None and not has_sweep(args.job):
        return [client.submit(args.job, name=args.name, priority=args.priority, cluster=args.cluster,
                              start_daemon=False, copy=args.copy)]
    if args.name is not None and args.experiment is not None:
        raise experiments.SeedsError("--name names one job; an experiment's jobs are named after --experiment")
    seeds = experiments.parse_seeds(args.seeds) if args.seeds is not None else None
    return client.submit_experiment(args.job, seeds=seeds, experiment=args.experiment or args.name,
                                    priority=args.priority, cluster=args.cluster, start_daemon=False, copy=args.copy)


def has_sweep(path: str) -> bool:
    """Whether the file holds a [sweep] table; False for one that does not read, which submit then reports."""
    try:
        return bool(specs.sweep_of(Path(path).read_text(encoding="utf-8"), file=path).fields)
    except (OSError, ValueError):  # unreadable, not TOML (ValueError), a bad sweep (SpecError is one)
        return False


def say_who_follows(job: Job) -> None:
    """Which file the new job follows, and which other jobs the same edits reach."""
    with Store() as store:
        others = [other for other in jobs_following(job.spec_path, store.jobs()) if other.id != job.id]
    if jobview.is_own_copy(job):
        print(f"job {job.id} follows its own copy {job.spec_path}: edit that file to change it", file=sys.stderr)
    elif others:
        drives = ", ".join(str(other.id) for other in [*others, job])
        print(f"note: {job.spec_path} now drives jobs {drives}: its edits reach "
              + ("both" if len(others) == 1 else "all of them"), file=sys.stderr)


def warn_if_gpus_missing(job: Job) -> None:
    """Say at once when a job wants GPUs and none is known here, rather than leave it queued in silence (submit
    refuses what the GPUs it knows can never hold, and a guess refuses nothing)."""
    if job.gpus_wanted == 0 or job.cluster:
        return
    shortfall = gpu_shortfall(job.gpus_wanted, job.gpu_memory_need, machine_gpus(paths.home_path()))
    if shortfall:
        print(f"rlsup: warning: job {job.id} {shortfall.needs}; {shortfall.has}, so the daemon holds it until it "
              f"finds GPUs: {shortfall.fix}", file=sys.stderr)


def command_intent(args: argparse.Namespace) -> int:
    verb = args.desired.verb
    code = 0
    for reference in args.jobs:
        try:
            if group_views.group_intent(reference, args.desired):
                continue
            job = client.set_intent(reference, args.desired)
        except (client.JobNotFound, client.IntentRefused) as error:
            print(f"rlsup: {formatting.printable(str(error))}", file=sys.stderr)
            code = EXIT_ERROR
            continue
        except client.DaemonError as error:
            print(f"rlsup: {verb} recorded, but {error}", file=sys.stderr)
            code = EXIT_ERROR
            continue
        except StoreBusy as error:  # reported, not retried past the busy timeout: the user decides when to
            print(f"rlsup: {verb} of {reference} not recorded: {error.why}; try again", file=sys.stderr)
            code = EXIT_ERROR
            continue
        print(f"job {job.id} ({formatting.printable(job.name)}): {verb} requested (now {job.state})")
    return code


# ---------------------------------------------------------------------------------------------
# list


def listing_json(rows: list[jobview.JobRow]) -> list[dict]:
    """Lone jobs, and each experiment as an object of "kind": "experiment" followed by its jobs'."""
    listing = []
    for entry in groups.grouped(rows):
        if isinstance(entry, groups.GroupRow):
            listing.append(group_views.group_json(entry))
            listing.extend(job_json(row) for row in entry.rows)
        else:
            listing.append(job_json(entry))
    return listing


def job_json(row: jobview.JobRow) -> dict:
    """What `rlsup list --json` says of a job: the store's row with live values from status.json.

    A foreground run (`rlsup run`) has no id and says "foreground": true; the daemon does not manage it.
    """
    job = row.job
    return {"kind": "job", "experiment": job.experiment, "id": None if row.foreground else job.id,
            "foreground": row.foreground, "name": job.name, "algo": job.algo, "env": job.env, "state": job.state.value,
            "desired": job.desired.value, "step": row.step, "total_steps": job.total_steps,
            "steps_per_second": row.steps_per_second, "mean_return": row.mean_return,
            "gpus": list(job.gpu_indices), "gpu_memory_bytes": job.gpu_memory_need, "where": job.where,
            "pid": jobview.pid_of(job), "priority": job.priority, "restarts": job.restarts,
            "reason": job.reason, "run_dir": job.run_dir, "spec_path": job.spec_path, "submitted": job.submitted}


def command_list(args: argparse.Namespace) -> int:
    home = paths.home_path()
    stored, sample = [], None
    if store_file.exists(home):  # a read-only command makes no database where there is none
        with Store(home) as store:
            stored, sample = store.jobs(), store.latest_hardware_sample()
    rows = [jobview.read_row(job) for job in stored + jobview.foreground_jobs(home, stored)]
    for pid, run_dir in jobview.unowned_workers(home, stored):
        print(f"rlsup: worker pid {pid} trains {run_dir}, which no job owns (its store was lost): `kill -INT {pid}` "
              f"pauses it with a checkpoint; `rlsup run --resume {run_dir}` continues it", file=sys.stderr)
    if args.json:
        print(json.dumps(listing_json(rows), indent=1))
        return 0
    totals = gpu_totals(sample)
    print_table(rows, totals)
    for line in gpus.packing_lines(stored, totals):
        print(line)
    waiting = [row for row in rows if not row.foreground and row.job.state not in RESTING]
    if waiting and not client.daemon_status(home).running:
        print("(the daemon is not running: `rlsup daemon start`)", file=sys.stderr)
    return 0


COLUMNS = ("ID", "NAME", "ALGO", "ENV", "STATE", "STEP/TOTAL", "STEPS/S", "RETURN", "WHERE", "RUN DIR")


def print_table(rows: list[jobview.JobRow], gpu_totals: dict[int, int | None]) -> None:
    """Lone jobs one line each; an experiment as a group line followed by its jobs, indented."""
    if not rows:
        print("no jobs; queue one with `rlsup submit JOB.toml`")
        return
    lines: list[tuple[tuple[str, ...], State | None]] = [(COLUMNS, None)]  # cells, and the state to colour by
    for entry in groups.grouped(rows):
        if isinstance(entry, groups.GroupRow):
            lines.append((printable_cells(group_views.group_cells(entry)), None))
            lines.extend((indented(printable_cells(table_cells(row, gpu_totals))), row.job.state) for row in entry.rows)
        else:
            lines.append((printable_cells(table_cells(entry, gpu_totals)), entry.job.state))
    widths = [max(len(cells[index]) for cells, _ in lines) for index in range(len(COLUMNS) - 1)]
    painted = colour.wanted()
    state_column = COLUMNS.index("STATE")
    for cells, state in lines:
        padded = [cell.ljust(width) for cell, width in zip(cells, widths)]
        if state:  # colour after padding: escape codes have no width on screen
            padded[state_column] = colour.paint_state(padded[state_column], state, painted)
        print("  ".join(padded) + "  " + cells[-1])


def printable_cells(cells: tuple[str, ...]) -> tuple[str, ...]:
    """Every cell holds a job's data (names, paths, envs), which a job file or a received run wrote."""
    return tuple(formatting.printable(cell) for cell in cells)


def indented(cells: tuple[str, ...]) -> tuple[str, ...]:
    name_column = COLUMNS.index("NAME")
    return cells[:name_column] + (group_views.INDENT + cells[name_column],) + cells[name_column + 1:]


def table_cells(row: jobview.JobRow, gpu_totals: dict[int, int | None]) -> tuple[str, ...]:
    job = row.job
    state = f"{job.state.value} (foreground)" if row.foreground else job.state.value + jobview.waiting_words(job)
    return (jobview.job_label(job), job.name, job.algo, job.env, state, f"{row.step:,}/{job.total_steps:,}",
            formatting.speed(row.steps_per_second, missing="-"), formatting.decimal(row.mean_return, 1, missing="-"),
            jobview.where(job, gpu_totals=gpu_totals), job.run_dir)
