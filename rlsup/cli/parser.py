"""The `rlsup` parser, built from each command module's register(), and main(), which maps errors to exit codes."""
from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import sys

from rlsup import __version__, paths
from rlsup.jobs import store_file
from rlsup import spec as specs
from rlsup.checkpoint.manifest import CheckpointProblem
from rlsup.cli import checkpoints, completion, daemon_control, job_files, jobs, lineage, plot, status, training
from rlsup.cli.arguments import CliError
from rlsup.cli.program import answer_stop_signals, answer_stops, finished, leave, note_stops
from rlsup.run.lineage import ForkRefused
from rlsup.jobs.store_file import StoreError
from rlsup.run.exit import EXIT_ERROR, EXIT_SPEC
from rlsup.stopping import SAID, signal_number
from rlsup.run.signals import release_signals

# What a shell reports for a command that SIGPIPE stopped (128 + its number), so that `rlsup … | head` ends as
# `cat` does.
CLOSED_STDOUT = 128 + signal.SIGPIPE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlsup", description="Supervise reinforcement-learning training jobs.")
    parser.add_argument("--version", action="version", version=f"rlsup {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", help="what to do (default: tui)")
    # In the order `rlsup --help` lists them: files and foreground training first, then the daemon's jobs.
    for register in (job_files.register, training.register, checkpoints.register, training.register_enjoy,
                     register_tui, jobs.register, status.register, plot.register, daemon_control.register,
                     completion.register, lineage.register):
        register(commands)
    return parser


def register_tui(subparsers: argparse._SubParsersAction) -> None:
    tui = subparsers.add_parser("tui", help="the live dashboard (also: rlsup with no command)")
    tui.set_defaults(handler=command_tui)


def command_tui(args: argparse.Namespace) -> int:
    note_stops()
    from rlsup.tui.app import run  # imported here so other commands never load Textual

    answer_stops()  # the app answers them itself from here (rlsup/tui/stop_signals.py)
    return run()


def leave_closed_stdout() -> int:
    """The reader of stdout has gone (`rlsup schema | head`): stop writing, without a word."""
    # Python flushes stdout once more at exit; pointed at devnull, that flush cannot fail again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return CLOSED_STDOUT


def main(argv: list[str] | None = None) -> int:
    return leave(run_command(argv))


def run_command(argv: list[str] | None) -> int:
    """The command's exit code; every error it can meet is one sentence on stderr."""
    try:
        answer_stop_signals()
        args = build_parser().parse_args(argv)
        if args.command is None:
            args.handler = command_tui
        if args.command != "run":  # `rlsup run` holds them until its worker listens, and pauses on them
            release_signals()  # held since the first line (rlsup/cli/__init__.py): one that came raises here
        code = args.handler(args)
        finished()
        sys.stdout.flush()  # here, not at exit: a reader gone by then would be reported with a traceback
        return code
    except BrokenPipeError:
        return leave_closed_stdout()
    except specs.SpecError as error:
        print(error, file=sys.stderr)
        return EXIT_SPEC
    except (CliError, CheckpointProblem, ForkRefused) as error:
        print(f"rlsup: {error}", file=sys.stderr)
        return EXIT_SPEC
    except StoreError as error:  # busy, not a database, lost: nothing was recorded
        print(f"rlsup: {error}", file=sys.stderr)
        return EXIT_ERROR
    except sqlite3.DatabaseError as error:  # damaged past its header: found by a query, not by opening it
        print(f"rlsup: {store_file.not_a_store(paths.home_path() / paths.DATABASE, error)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as stop:
        finished()  # a second Ctrl-C must not cut the sentence short with a traceback
        number = signal_number(stop)
        print(SAID[number], file=sys.stderr)
        return 128 + number  # what a shell reports for a command that the signal stopped: 130, 143
