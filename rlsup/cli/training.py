"""`rlsup run` and `rlsup enjoy`: train in the foreground without a daemon, and play a trained policy."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rlsup import formatting, paths
from rlsup.spec import experiments
from rlsup.run import import_trust
from rlsup.run import files as runfiles
from rlsup import spec as specs
from rlsup.cli.arguments import CliError, resolve_run, trust_imports_option, use_run_imports
from rlsup.cli.program import answer_stops, finished, note_stops
from rlsup.run.exit import EXIT_ERROR


def register(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser("run", help="train in the foreground; Ctrl-C pauses with a checkpoint")
    run.add_argument("job", metavar="JOB.toml", nargs="?", help="the job file (with --resume: an edited spec)")
    run.add_argument("--run-dir", help="where to put the run (default: under $RLSUP_HOME/runs/)")
    run.add_argument("--resume", metavar="RUN", help="continue RUN from its newest verified checkpoint")
    run.add_argument("--from-scratch", action="store_true",
                     help="with --resume: train RUN again from step 0, moving its checkpoints and metrics "
                          "aside (never deleted)")
    trust_imports_option(run)
    run.set_defaults(handler=command_run)


def register_enjoy(subparsers: argparse._SubParsersAction) -> None:
    enjoy = subparsers.add_parser("enjoy", help="play a trained policy")
    enjoy.add_argument("run", metavar="RUN", help="run directory, job id or name, or latest")
    enjoy.add_argument("--checkpoint", default="latest",
                       help="latest, best (the best evaluation so far), a step, or a checkpoint path")
    enjoy.add_argument("--episodes", type=int, default=5, help="episodes to play (default: 5)")
    enjoy.add_argument("--seed", type=int, default=None, help="env seed (default: the job's seed)")
    enjoy.add_argument("--render", choices=["none", "terminal", "video"], default="none",
                       help="terminal: draw the frames here; video: write an mp4 "
                            "(CartPole needs: pip install 'rlsup[render]')")
    enjoy.add_argument("--fps", type=float, default=None,
                       help="frames per second while rendering (default: the env's own; 0: as fast as it plays)")
    enjoy.add_argument("--video", metavar="PATH.mp4",
                       help="with --render video: where to write it (default: enjoy-TIME.mp4 in the run)")
    enjoy.add_argument("--json", action="store_true", help="print the returns as one JSON object")
    trust_imports_option(enjoy)
    enjoy.set_defaults(handler=command_enjoy)


# ---------------------------------------------------------------------------------------------
# run


def command_run(args: argparse.Namespace) -> int:
    if args.from_scratch and not args.resume:
        raise CliError("--from-scratch goes with --resume RUN: it restarts an existing run from step 0")
    if args.resume:
        run_dir = resolve_run(args.resume)
        if args.job:
            apply_resume_edit(run_dir, loaded(args.job, named_after_file=False))  # no name in it: the run's
    else:
        if not args.job:
            raise CliError("rlsup run needs JOB.toml, or --resume RUN")
        from rlsup.algos.envs.check import check_env_file  # imports gymnasium, as the worker will anyway
        from rlsup.run.signals import listen_while_starting

        listen_while_starting()  # past gymnasium's import: a hang in the user's env package can be left

        run_dir = start_run(check_env_file(loaded(args.job), args.job).spec, args.run_dir)
    print(run_dir, flush=True)
    from rlsup.worker import training as worker

    worker.exit_now(worker.run(run_dir, foreground=True, from_scratch=args.from_scratch,
                               trust_imports=args.trust_imports))


def loaded(path: str, *, named_after_file: bool = True) -> specs.JobSpec:
    """The job file's spec; a [sweep] in it is said to be left out, in one line on stderr.

    A file's own values are a valid job, and running one of them in the foreground before queueing the sweep
    is a check worth making, so run trains them rather than refuse; but silently, it would look like the sweep."""
    spec = specs.load(path, named_after_file=named_after_file)
    sweep = specs.sweep_of(Path(path).read_text(), file=path)
    if sweep.fields:
        own = " ".join(f"{name}={experiments.compact(spec_value(spec, name))}" for name in sweep.names)
        print(f"rlsup: {path} has a [sweep] of {len(sweep.variants())} variants: rlsup run trains only the file's "
              f"own values ({own}); `rlsup submit {path}` queues every variant", file=sys.stderr)
    return spec


def spec_value(spec: specs.JobSpec, name: str) -> object:
    """A field's value by its dotted name ("dqn.lr")."""
    section, field = name.split(".", 1)
    return getattr(getattr(spec, section), field)


def start_run(spec: specs.JobSpec, requested: str | None) -> Path:
    if requested:
        run_dir = Path(requested).expanduser().resolve()
        if (run_dir / paths.JOB_FILE).exists():
            raise CliError(f"{run_dir} already holds a run; continue it with: rlsup run --resume {run_dir}")
        paths.ensure_private_dir(run_dir)
    else:
        run_dir = paths.new_run_dir(spec.job.name)
    runfiles.write_run_spec(run_dir, spec)
    from rlsup.algos.envs.check import import_roots  # loaded with check_env

    import_trust.write_import_paths(run_dir, import_roots(spec.env))  # for a resume or enjoy from another shell
    return run_dir


def apply_resume_edit(run_dir: Path, edited: specs.JobSpec) -> None:
    try:
        changes = runfiles.accept_edit(run_dir, edited)
    except runfiles.EditRefused as refusal:
        raise CliError(str(refusal)) from None
    for change in changes:
        print(f"applying {change} ({change.edit})", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# enjoy


def command_enjoy(args: argparse.Namespace) -> int:
    note_stops()  # until its first episode begins (enjoy calls answer_stops)
    from rlsup.algos.device import UsageError
    from rlsup.algos.envs.sources import EnvError
    from rlsup.enjoy import RenderUnavailable, enjoy

    run_dir = resolve_run(args.run)
    use_run_imports(run_dir, args.trust_imports)
    report = (lambda line: None) if args.json else print
    video = video_path(args, run_dir)
    try:
        returns, entry = enjoy(run_dir, which=args.checkpoint, episodes=args.episodes, seed=args.seed, video=video,
                               terminal=args.render == "terminal", fps=args.fps, report=report,
                               started=answer_stops)
    except RenderUnavailable as error:
        print(f"rlsup: {error}", file=sys.stderr)
        return EXIT_ERROR
    except (EnvError, UsageError) as error:  # not made here (its package not installed, a CPU without its float
        raise CliError(str(error)) from None     # mode), or it failed while playing
    finished()  # played, and the video (if any) closed: a Ctrl-C now would report a failure that did not happen
    mean = sum(returns) / len(returns)
    if args.json:
        print(json.dumps({"returns": returns, "mean": mean, "checkpoint": entry.path.name, "step": entry.step}))
    else:
        print(f"mean return {mean:g} over {formatting.counted(len(returns), 'episode')}"
              + (f"; video: {video}" if video else ""))
    return 0


def video_path(args: argparse.Namespace, run_dir: Path) -> Path | None:
    """Where --render video writes: --video, else a new file in the run directory."""
    if args.render != "video":
        return None
    if args.video:
        return Path(args.video).expanduser()
    return run_dir / f"enjoy-{time.strftime('%Y%m%d-%H%M%S')}.mp4"
