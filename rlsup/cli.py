"""The rlsup command: an argparse front whose every command is a thin call into the modules."""
from __future__ import annotations

import os
import signal
import sys


def leave_on_early_interrupt(signum: int, frame) -> None:
    """Ctrl-C while Python is still importing rlsup: nothing has been written yet, so leave at once."""
    os.write(2, b"rlsup: interrupted\n")
    os._exit(130)


# Before the imports below (a tenth of a second): a Ctrl-C during them would print a traceback. Only
# when this is the program (`rlsup`, `python -m rlsup.cli`), never when a test or tool imports it.
if __name__ == "__main__" or os.path.basename(sys.argv[0] if sys.argv else "") == "rlsup":
    signal.signal(signal.SIGINT, leave_on_early_interrupt)

import argparse  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from rlsup import __version__, paths, runfiles  # noqa: E402
from rlsup import spec as specs  # noqa: E402
from rlsup.checkpoint.manifest import CheckpointProblem  # noqa: E402
from rlsup.daemon import client  # noqa: E402
from rlsup.completion import register as register_completion  # noqa: E402
from rlsup.daemon.commands import register as register_daemon_commands  # noqa: E402


class CliError(Exception):
    """A usage problem reported as one line and exit code 2."""


# ---------------------------------------------------------------------------------------------
# Resolving RUN arguments


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


# ---------------------------------------------------------------------------------------------
# Commands


def command_validate(args: argparse.Namespace) -> int:
    spec = specs.load(args.job)
    check_env_id(Path(args.job), spec.env.id)
    print(f"{args.job}: ok ({spec.job.algo} on {spec.env.id}, {spec.job.total_steps:,} steps)")
    return 0


def check_env_id(path: Path, env_id: str) -> None:
    """Refuse an env id that no worker could make, now rather than seconds into the run."""
    from rlsup.envids import unknown_env_id  # imports gymnasium: only validate pays for it

    problem = unknown_env_id(env_id)
    if problem:
        line = specs.locate_keys(path.read_text(encoding="utf-8")).get(("env", "id"))
        raise specs.SpecError([specs.Problem(str(path), line, "env.id", problem)])


def command_schema(args: argparse.Namespace) -> int:
    print(json.dumps(specs.json_schema(), indent=2))
    return 0


def command_run(args: argparse.Namespace) -> int:
    if args.from_scratch and not args.resume:
        raise CliError("--from-scratch goes with --resume RUN: it restarts an existing run from step 0")
    if args.resume:
        run_dir = resolve_run(args.resume)
        if args.job:
            apply_resume_edit(run_dir, specs.load(args.job))
    else:
        if not args.job:
            raise CliError("rlsup run needs JOB.toml, or --resume RUN")
        run_dir = start_run(specs.load(args.job), args.run_dir)
    print(run_dir, flush=True)
    from rlsup import worker

    worker.exit_now(worker.run(run_dir, foreground=True, from_scratch=args.from_scratch))


def start_run(spec: specs.JobSpec, requested: str | None) -> Path:
    if requested:
        run_dir = Path(requested).expanduser().resolve()
        if (run_dir / paths.JOB_FILE).exists():
            raise CliError(f"{run_dir} already holds a run; continue it with: rlsup run --resume {run_dir}")
        paths.ensure_private_dir(run_dir)
    else:
        run_dir = paths.new_run_dir(spec.job.name)
    runfiles.write_run_spec(run_dir, spec)
    return run_dir


def apply_resume_edit(run_dir: Path, edited: specs.JobSpec) -> None:
    try:
        changes = runfiles.accept_edit(run_dir, edited)
    except runfiles.EditRefused as refusal:
        raise CliError(str(refusal)) from None
    for change in changes:
        print(f"applying {change} ({change.edit})", file=sys.stderr)


def command_checkpoints(args: argparse.Namespace) -> int:
    from rlsup.checkpoint.manifest import scan_checkpoints, verify

    run_dir = resolve_run(args.run)
    entries, invalid = scan_checkpoints(run_dir, strict=True)
    rows = []
    for entry in entries:
        row = entry.to_json()
        problem = verify(entry.path) if args.verify else None
        row["verified"] = (problem is None) if args.verify else None
        row["problem"] = problem
        rows.append(row)
    # A directory whose manifest is missing or broken is no checkpoint, but it must not go unseen.
    broken = [{"step": refused.step, "path": str(refused.path), "verified": False, "problem": refused.problem}
              for refused in invalid]
    code = 1 if any(row["verified"] is False for row in rows + broken) else 0
    if args.json:
        print(json.dumps(rows + broken, indent=1))
        return code
    print_checkpoint_table(rows)
    for row in broken:
        print(f"{Path(row['path']).name}: not a usable checkpoint ({row['problem']})")
    return code


def print_checkpoint_table(rows: list[dict]) -> None:
    print(f"{'step':>12}  {'time':19}  {'reason':16}  {'size':>9}  {'fingerprint':12}  verified")
    for row in rows:
        mark = {True: "yes", False: "NO", None: "-"}[row["verified"]]
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["time"]))
        print(f"{row['step']:>12,}  {when}  {row['label']:16}  {format_bytes(row['bytes']):>9}  "
              f"{row['fingerprint'][:12]:12}  {mark}" + (f"  ({row['problem']})" if row["problem"] else ""))


def format_bytes(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"


def command_tui(args: argparse.Namespace) -> int:
    from rlsup.tui.app import run  # imported here so other commands never load Textual

    return run()


def command_enjoy(args: argparse.Namespace) -> int:
    from rlsup.enjoy import RenderUnavailable, enjoy

    run_dir = resolve_run(args.run)
    report = (lambda line: None) if args.json else print
    video = video_path(args, run_dir)
    try:
        returns, entry = enjoy(run_dir, which=args.checkpoint, episodes=args.episodes, seed=args.seed, video=video,
                               terminal=args.render == "terminal", fps=args.fps, report=report)
    except RenderUnavailable as error:
        print(f"rlsup: {error}", file=sys.stderr)
        return 1
    mean = sum(returns) / len(returns)
    if args.json:
        print(json.dumps({"returns": returns, "mean": mean, "checkpoint": entry.path.name, "step": entry.step}))
    else:
        print(f"mean return {mean:g} over {len(returns)} episodes" + (f"; video: {video}" if video else ""))
    return 0


def video_path(args: argparse.Namespace, run_dir: Path) -> Path | None:
    """Where --render video writes: --video, else a new file in the run directory."""
    if args.render != "video":
        return None
    if args.video:
        return Path(args.video).expanduser()
    return run_dir / f"enjoy-{time.strftime('%Y%m%d-%H%M%S')}.mp4"


# ---------------------------------------------------------------------------------------------
# Parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlsup", description="Supervise reinforcement-learning training jobs.")
    parser.add_argument("--version", action="version", version=f"rlsup {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", help="what to do (default: tui)")

    validate = commands.add_parser("validate", help="check a job file")
    validate.add_argument("job", metavar="JOB.toml", help="the job file to check")
    validate.set_defaults(handler=command_validate)

    schema = commands.add_parser("schema", help="print the JSON Schema of job files")
    schema.set_defaults(handler=command_schema)

    run = commands.add_parser("run", help="train in the foreground; Ctrl-C pauses with a checkpoint")
    run.add_argument("job", metavar="JOB.toml", nargs="?", help="the job file (with --resume: an edited spec)")
    run.add_argument("--run-dir", help="where to put the run (default: under $RLSUP_HOME/runs/)")
    run.add_argument("--resume", metavar="RUN", help="continue RUN from its newest verified checkpoint")
    run.add_argument("--from-scratch", action="store_true",
                     help="with --resume: train RUN again from step 0, moving its checkpoints and metrics "
                          "aside (never deleted)")
    run.set_defaults(handler=command_run)

    checkpoints = commands.add_parser("checkpoints", help="list a run's checkpoints")
    checkpoints.add_argument("run", metavar="RUN", help="run directory, job id or name, or latest")
    checkpoints.add_argument("--json", action="store_true", help="a JSON list of objects")
    checkpoints.add_argument("--verify", action="store_true", help="check every file's checksum")
    checkpoints.set_defaults(handler=command_checkpoints)

    enjoy = commands.add_parser("enjoy", help="play a trained policy")
    enjoy.add_argument("run", metavar="RUN", help="run directory, job id or name, or latest")
    enjoy.add_argument("--checkpoint", default="latest", help="latest, best (the best evaluation so far), a step, or a checkpoint path")
    enjoy.add_argument("--episodes", type=int, default=5, help="episodes to play (default: 5)")
    enjoy.add_argument("--seed", type=int, default=None, help="env seed (default: the job's seed)")
    enjoy.add_argument("--render", choices=["none", "terminal", "video"], default="none",
                       help="terminal: draw the frames here; video: write an mp4 "
                            "(CartPole needs: pip install 'rlsup[render]')")
    enjoy.add_argument("--fps", type=float, default=None,
                       help="frames per second while rendering (default: the env's own; 0: as fast as it plays)")
    enjoy.add_argument("--video", metavar="PATH.mp4", help="with --render video: where to write it (default: enjoy-TIME.mp4 in the run)")
    enjoy.add_argument("--json", action="store_true", help="print the returns as one JSON object")
    enjoy.set_defaults(handler=command_enjoy)

    tui = commands.add_parser("tui", help="the live dashboard (also: rlsup with no command)")
    tui.set_defaults(handler=command_tui)

    register_daemon_commands(commands)
    register_completion(commands)
    return parser


# What a shell reports for a command that SIGPIPE stopped (128 + 13), so `rlsup … | head` ends as `cat` does.
CLOSED_STDOUT = 141


def leave_closed_stdout() -> int:
    """The reader of stdout has gone (`rlsup schema | head`): stop writing, without a word."""
    # Python flushes stdout once more at exit; pointed at devnull, that flush cannot fail again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return CLOSED_STDOUT


def main(argv: list[str] | None = None) -> int:
    try:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)  # each command handles Ctrl-C itself
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            args.handler = command_tui
        code = args.handler(args)
        sys.stdout.flush()  # here, not at exit: a reader gone by then would be reported with a traceback
        return code
    except BrokenPipeError:
        return leave_closed_stdout()
    except specs.SpecError as error:
        print(error, file=sys.stderr)
        return 2
    except (CliError, CheckpointProblem) as error:
        print(f"rlsup: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rlsup: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
