"""`rlsup daemon start|stop|status`: the daemon process of this RLSUP_HOME."""
from __future__ import annotations

import argparse
import sys

from rlsup import client, paths
from rlsup.jobs import store_file
from rlsup.jobs.store import Store
from rlsup.run.exit import EXIT_DONE, EXIT_ERROR, EXIT_NOT_RUNNING


def register(subparsers: argparse._SubParsersAction) -> None:
    daemon = subparsers.add_parser("daemon", help="start, stop or inspect the daemon")
    daemon.add_argument("action", choices=["start", "stop", "status"],
                        help=f"status exits {EXIT_NOT_RUNNING} when no daemon runs")
    daemon.set_defaults(handler=command_daemon)


def command_daemon(args: argparse.Namespace) -> int:
    home = paths.rlsup_home() if args.action == "start" else paths.home_path()
    try:
        if args.action == "start":
            status = client.ensure_daemon(home)
            print(f"daemon running (pid {status.pid}) for {home}")
            return EXIT_DONE
        if args.action == "stop":
            stopped = client.stop_daemon(home)
            print("daemon stopped; running workers keep running" if stopped else "no daemon was running")
            return EXIT_DONE
    except client.DaemonError as error:
        print(f"rlsup: {error}", file=sys.stderr)
        return EXIT_ERROR
    return print_daemon_status(home)


def print_daemon_status(home) -> int:
    status = client.daemon_status(home)
    print(f"daemon {'running (pid %s)' % status.pid if status.running else 'not running'} for {home}")
    if store_file.exists(home):
        with Store(home) as store:
            counts: dict[str, int] = {}
            for job in store.jobs():
                counts[job.state.value] = counts.get(job.state.value, 0) + 1
        print("jobs: " + (", ".join(f"{count} {state}" for state, count in counts.items()) or "none"))
    else:
        print("no jobs yet")
    return EXIT_DONE if status.running else EXIT_NOT_RUNNING
