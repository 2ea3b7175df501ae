"""The `rlsup` parser, built from each command module's register(), and main(), which maps errors to exit codes."""
from __future__ import annotations

import argparse
import os
import sqlite3
import re
import sys
import typing

from rlsup import __version__, paths
from rlsup.jobs import store_file
from rlsup import spec as specs
from rlsup.checkpoint.manifest import CheckpointProblem
from rlsup.cli import checkpoints, completion, daemon_control, job_files, jobs, lineage, plot, status, training
from rlsup.cli.arguments import CliError
from rlsup.cli.program import answer_stop_signals, answer_stops, finished, leave, note_stops
from rlsup.run.lineage import ForkRefused
from rlsup.jobs.store_file import StoreError
from rlsup.run.exit import EXIT_CLOSED_STDOUT, EXIT_ERROR, EXIT_SPEC
from rlsup.stopping import SAID, signal_number
from rlsup.run.signals import release_signals


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one sentence naming the command and the valid choices: its usage
    first, four lines of it for `rlsup export`, buried the error. Each command's parser is one (add_subparsers
    makes them of their parent's class)."""

    commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> typing.NoReturn:
        shown = re.sub(r", '__\w+'", "", message)  # a hidden command (__complete) is no choice to offer
        self.exit(EXIT_SPEC, f"{self.prog}: {shown}; see {self.prog} --help\n")


def build_parser() -> Parser:
    parser = Parser(prog="rlsup", description="Supervise reinforcement-learning training jobs.")
    parser.add_argument("--version", action="version", version=f"rlsup {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", help="what to do (default: tui)")
    parser.commands = commands.choices  # each command's own parser, which reports its unknown arguments
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


def parse(parser: Parser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, but an unknown argument is reported by its command (`rlsup list: unrecognized arguments`),
    where argparse reports it by `rlsup`."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def leave_closed_stdout() -> int:
    """The reader of stdout has gone (`rlsup schema | head`): stop writing, without a word."""
    # Python flushes stdout once more at exit; pointed at devnull, that flush cannot fail again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_CLOSED_STDOUT


def main(argv: list[str] | None = None) -> int:
    return leave(run_command(argv))


def run_command(argv: list[str] | None) -> int:
    """The command's exit code; every error it can meet is one sentence on stderr."""
    try:
        answer_stop_signals()
        args = parse(build_parser(), argv)
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
