"""`rlsup fork` and `rlsup export`: a new job from another run's checkpoint, and a checkpoint's policy as a file."""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from rlsup import client, paths
from rlsup.run import lineage
from rlsup.run import files as runfiles
from rlsup.jobs import store_file
from rlsup import spec as specs
from rlsup.cli.arguments import CliError, resolve_run, trust_imports_option, use_run_imports
from rlsup.cli.jobs import say_who_follows, warn_if_gpus_missing
from rlsup.cli.program import answer_stops, finished, note_stops
from rlsup.jobs.record import jobs_following
from rlsup.jobs.store import Job, Store
from rlsup.run.exit import EXIT_ERROR

EXPORT_FORMATS = ("torchscript", "onnx")  # rlsup.algos.export.FORMATS, named here without importing torch


def register(subparsers: argparse._SubParsersAction) -> None:
    fork = subparsers.add_parser("fork", help="a new job that starts from a checkpoint of another run")
    fork.add_argument("run", metavar="RUN", help="the parent: run directory, job id or name, or latest")
    fork.add_argument("job", metavar="NEW.toml", help="the new job's file (identity fields may differ where the "
                                                      "checkpoint still loads: lr, gamma, epsilon, ...)")
    fork.add_argument("--checkpoint", default="latest",
                      help="latest (the newest that verifies), best (the best evaluation), or a step")
    fork.add_argument("--fresh-optimizer", action="store_true", help="start the optimizer afresh")
    fork.add_argument("--no-replay", action="store_true", help="start with empty replays")
    fork.add_argument("--name", help="the new job's name (default: the file's, with -fork when it is the parent's)")
    trust_imports_option(fork)
    fork.set_defaults(handler=command_fork)

    export = subparsers.add_parser("export", help="write a checkpoint's greedy policy as TorchScript or ONNX")
    export.add_argument("run", metavar="RUN", help="run directory, job id or name, or latest")
    export.add_argument("--checkpoint", default="latest", help="latest, best, a step, or a checkpoint path")
    export.add_argument("--format", choices=EXPORT_FORMATS, required=True,
                        help="torchscript (torch.jit.load) or onnx (onnxruntime; pip install 'rlsup[onnx]')")
    export.add_argument("--out", required=True, metavar="FILE", help="the model file; FILE.json describes its input")
    trust_imports_option(export)
    export.set_defaults(handler=command_export)


# ---------------------------------------------------------------------------------------------
# fork


def command_fork(args: argparse.Namespace) -> int:
    parent_run = resolve_run(args.run)
    parent_job = parent_job_of(parent_run)
    parent_name = parent_job.name if parent_job else runfiles.read_run_spec(parent_run).job.name
    try:
        entry = lineage.resolve_checkpoint(parent_run, args.checkpoint)
    except lineage.ForkRefused as error:
        raise CliError(str(error)) from None
    request = lineage.ForkRequest(parent_run, parent_name, parent_job.id if parent_job else None, entry,
                                  fresh_optimizer=args.fresh_optimizer, replay=not args.no_replay,
                                  latest=args.checkpoint == "latest")
    path = Path(args.job).expanduser().resolve()
    loaded = specs.load(path)
    name = args.name or (f"{parent_name}-fork" if loaded.job.name == parent_name else None)
    with Store() as store:
        bound = jobs_following(path, store.jobs())  # e.g. the parent's own file, just refused an edit
    # A file that drives a job, or a run's own job.toml, is copied into the fork's run: edits of it then
    # keep reaching only what they reached before.
    copy = bool(bound) or (path.parent / paths.SPEC_HISTORY).is_dir()
    # The parent's env modules, where its submit found them: the fork's submit records where it finds them,
    # so an entry left out here never reaches the fork's own import-paths.json.
    use_run_imports(parent_run, args.trust_imports)
    try:
        job = client.submit(path, name=name, copy=copy,
                            prepare=lambda run_dir, spec: lineage.prepare_fork(run_dir, request, spec))
    except lineage.ForkRefused as error:
        raise CliError(f"{path}: {error}") from None
    except OSError as error:
        raise CliError(f"cannot make the fork's run directory: {error}") from None
    except client.DaemonError as error:
        print(f"rlsup: the fork is queued, but {error}", file=sys.stderr)
        return EXIT_ERROR
    print(job.id)
    parent = lineage.read_parent(Path(job.run_dir))  # written by prepare_fork before the job was queued
    print(f"queued {job.name} as job {job.id} in {job.run_dir}, {parent.describe()}", file=sys.stderr)
    if request.replay and not parent.replay:
        print(f"note: {entry.path.name} holds no replay: the fork starts with empty ones", file=sys.stderr)
    say_unused_fields(parent_run, Path(job.run_dir), path, entry.step)
    say_who_follows(job)
    warn_if_gpus_missing(job)
    return 0


def say_unused_fields(parent_run: Path, run_dir: Path, path: Path, step: int) -> None:
    """A warning per changed scheduled field whose schedule is over at the fork's step (spec/schedule_effects.py).

    A warning, not a refusal: the fork is queued all the same, since it may be meant for more than that
    field (a fresh optimizer, an empty replay, a longer budget, its other fields), and the line names the
    field that decides (lr_end_step) for a fork that is not; `rlsup kill` takes a fork not meant at all."""
    from rlsup.spec.schedule_effects import unused

    try:
        fork_spec = runfiles.read_run_spec(run_dir)
        changed = {change.field for change in specs.diff(runfiles.read_run_spec(parent_run), fork_spec)}
    except specs.SpecError:  # the fork is queued: a parent's job.toml gone unreadable since costs only the warning
        return
    for line in unused(fork_spec, str(path), step=step, changed=changed):
        print(f"warning: {line}", file=sys.stderr)


def parent_job_of(run_dir: Path) -> Job | None:
    """The daemon's job that owns a run directory, or None (a foreground or copied run)."""
    if not store_file.exists(paths.home_path()):
        return None
    with Store() as store:
        return store.find_job(str(run_dir))


def lineage_lines(run_dir: Path) -> list[str]:
    """What `rlsup status` says of a fork: its parent, and the chain of forks it ends."""
    parent = lineage.read_parent(run_dir)
    if parent is None:
        problem = lineage.parent_problem(run_dir)
        return [f"a fork, but {problem}"] if problem else []
    return [parent.describe(), f"lineage: {lineage.lineage_line(run_dir)}"]


# ---------------------------------------------------------------------------------------------
# export


def command_export(args: argparse.Namespace) -> int:
    note_stops()  # until the policy is loaded (export_policy calls answer_stops)
    from rlsup.algos.envs.sources import EnvError  # the network's sizes come from the env, made here
    from rlsup.algos.export import ExportUnavailable, export_policy  # torch: only an export pays for it
    from rlsup.enjoy import read_trainer_state

    run_dir = resolve_run(args.run)
    use_run_imports(run_dir, args.trust_imports)
    out = Path(args.out).expanduser()
    report = functools.partial(print, file=sys.stderr)  # which newer checkpoints `latest` fell back past
    try:
        described = export_policy(run_dir, lambda: read_trainer_state(run_dir, args.checkpoint, report),
                                  format=args.format, out=out, started=answer_stops)
    except (ExportUnavailable, EnvError) as error:
        raise CliError(str(error)) from None
    finished()  # the file is in place: a Ctrl-C now would report a failure that did not happen
    print(out)
    print(f"wrote {out} ({args.format}) and {described}", file=sys.stderr)
    return 0
