"""The exit-code reference: the worker's, a command's and the daemon's codes, from their tables in rlsup/run/exit.py."""
from __future__ import annotations

from page_tables import table
from rlsup.run.exit import COMMAND_EXITS, DAEMON_EXITS, WORKER_EXITS

# Which process each table is of, as the page's marker names it.
TABLES = {"worker": WORKER_EXITS, "command": COMMAND_EXITS, "daemon": DAEMON_EXITS}


def render(process: str) -> str:
    """One process's codes; each row has an id (worker-75), since 2 means one thing for a worker, another for the
    daemon."""
    rows = ((f'<span id="{process}-{code.number}"></span>{code.number}', code.name, code.meaning)
            for code in TABLES[process])
    return table(("Code", "Name", "Meaning"), rows)
