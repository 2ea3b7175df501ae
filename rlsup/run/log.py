"""How a worker's log records are routed: worker.log gets every one, a foreground run's terminal those meant for it."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from rlsup import own_files, paths
from rlsup.run import fault_stacks

# A record for worker.log only: a foreground run's terminal hears the outcome once, from tell_terminal.
# The worker, its env processes and its actors all log this way, so it lives below all three.
FILE_ONLY = {"terminal": False}


def setup_logging(run_dir: Path, foreground: bool) -> None:
    # A log line that cannot be written (a full disk) must not print a traceback on the terminal.
    logging.raiseExceptions = False
    logger = logging.getLogger("rlsup")
    logger.setLevel(logging.INFO)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    # A worker.log that is refused (a link) must not leave records to logging's last resort, stderr.
    logger.propagate = False
    logger.addHandler(logging.NullHandler())
    file_handler = OwnFileHandler(run_dir / paths.LOG_FILE)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(file_handler)
    fault_stacks.record_to(run_dir / paths.LOG_FILE)  # a user's native env that segfaults leaves its stack
    if foreground:
        stream = logging.StreamHandler(sys.stderr)
        stream.setFormatter(TerminalFormatter("\r\033[K%(message)s" if sys.stderr.isatty() else "%(message)s"))
        stream.addFilter(lambda record: getattr(record, "terminal", True))
        logger.addHandler(stream)


class OwnFileHandler(logging.FileHandler):
    """worker.log opened as own_files opens a run's files: 0600, and never through a link out of the run."""

    def _open(self):
        return own_files.append_text(Path(self.baseFilename))


class TerminalFormatter(logging.Formatter):
    """A log record on a foreground run's terminal: its message alone. Tracebacks go to worker.log only:
    no user sees one, and the sentence that ends the run says where it is."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        return self.formatMessage(record)
