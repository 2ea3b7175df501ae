"""exit.json (DESIGN.md section 6): how a worker ended, for its writer and readers; every rlsup process's exit codes
with their meanings; and how a process that loaded torch leaves."""
from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from rlsup import atomic, paths
from rlsup.formatting import number, whole
from rlsup.own_files import read_json
from rlsup.run.holds import Standing

EXIT_DONE = 0
EXIT_ERROR = 1
EXIT_SPEC = 2
NOT_RETRIED_AGAIN = "not retried again"  # how a worker's reason for a fault repeated after a restart ends
EXIT_NO_SPACE = 74
EXIT_PAUSED = 75
EXIT_WALL_TIME = 76
EXIT_HELD = 77
EXIT_ABORTED = 128 + signal.SIGINT  # 130, what a shell reports for a process that SIGINT ended
EXIT_NOT_RUNNING = 3  # `rlsup daemon status`, as `systemctl status` says of an inactive unit
EXIT_STORE_LOST = 3   # the daemon's
# `rlsup … | head` ends as `cat` does: what a shell reports for a command that SIGPIPE stopped.
EXIT_CLOSED_STDOUT = 128 + signal.SIGPIPE


@dataclass(frozen=True)
class ExitCode:
    """One exit code of an rlsup process: its number, a short name, and what it means to whoever started it."""

    number: int
    name: str
    meaning: str


# What each code means, defined here only: the code exits with the names above, and the reference's exit-codes
# page is generated from these tables (docs_hooks/exit_code_page.py). The daemon reads the worker's codes in
# rlsup/jobs/state.py exit_outcome().
WORKER_EXITS = (
    ExitCode(EXIT_DONE, "done", "Trained to `[job] total_steps`; the final checkpoint is written."),
    ExitCode(EXIT_ERROR, "crashed", "Anything else: the daemon restarts the job from its newest verified checkpoint, "
                                    "up to `[job] max_restarts` times, waiting longer before each."),
    ExitCode(EXIT_SPEC, "spec error", "A spec or usage error, or a run that cannot resume as it is (a diverged run, "
                                      "or the same fault at the same step as its previous worker): never retried."),
    ExitCode(EXIT_NO_SPACE, "no space", "The disk is full: paused, since a restart would only fill it again; free "
                                        "some space, then resume."),
    ExitCode(EXIT_PAUSED, "paused", "Paused after writing a complete checkpoint (SIGINT or SIGTERM). Also a CUDA "
                                    "out-of-memory, which holds the job paused until a client resumes it."),
    ExitCode(EXIT_WALL_TIME, "wall time used up", "`[job] max_wall_s` used up: paused with a checkpoint, held "
                                                  "paused until a client resumes it (raise it to train on)."),
    ExitCode(EXIT_HELD, "held", "Reached the hold of its experiment's scheduler (hold.json): paused there with a "
                                "checkpoint until the scheduler decides."),
    ExitCode(EXIT_ABORTED, "aborted", "A second interrupt: stopped at once, the previous checkpoint kept (143 for "
                                      "a second SIGTERM while the worker starts)."),
)
COMMAND_EXITS = (
    ExitCode(EXIT_DONE, "done", "Did what it was asked."),
    ExitCode(EXIT_ERROR, "failed", "Could not do it: no such job, an intent with nothing to do for the job, a "
                                   "store that is busy or damaged, a daemon that would not start."),
    ExitCode(EXIT_SPEC, "refused", "A job file that does not validate, a usage error, or an argument that cannot "
                                   "be used as given (a checkpoint, a fork): nothing was changed."),
    ExitCode(EXIT_NOT_RUNNING, "not running", "`rlsup daemon status` only: no daemon runs for this RLSUP_HOME."),
    ExitCode(128 + signal.SIGINT, "interrupted", "Stopped by Ctrl-C (SIGINT), with one sentence saying so."),
    ExitCode(EXIT_CLOSED_STDOUT, "output closed", "The reader of its output went away (`rlsup list | head`): "
                                                  "stopped without a word."),
    ExitCode(128 + signal.SIGTERM, "terminated", "Stopped by SIGTERM, with one sentence saying so."),
)
DAEMON_EXITS = (
    ExitCode(EXIT_DONE, "stopped", "Stopped by SIGTERM or SIGINT (its workers keep running), or another daemon "
                                   "already holds this RLSUP_HOME."),
    ExitCode(EXIT_ERROR, "failed", "Could not start (the store cannot be opened, or was made by a newer rlsup), "
                                   "or its loop crashed; daemon.log says why."),
    ExitCode(EXIT_SPEC, "bad settings", "daemon.toml has an unknown key or a bad value."),
    ExitCode(EXIT_STORE_LOST, "store lost", "Its store's file was deleted, replaced, cut or damaged under it; "
                                            "daemon.log says which."),
)


@dataclass(frozen=True)
class ExitRecord:
    """What a worker wrote, atomically and last, before it exited: a daemon that adopted the process (and cannot
    wait() on it) learns the outcome from it. Read back, each value is checked and None where it does not fit."""

    code: int | None    # its exit code (the worker's table above)
    reason: str | None  # why, in a sentence
    step: int | None    # the step it ended at
    checkpoint: str | None = None  # the newest checkpoint of the run's trajectory, None before the first
    # A pause (exit 75) the worker decided, which holds until a client resumes the job rather than one the
    # daemon would resume at once: a CUDA out of memory, which another start on the same GPU would repeat.
    held: bool = False
    standing: Standing | None = None  # with EXIT_HELD: the metrics the scheduler compares members by
    pid: int | None = field(default_factory=os.getpid)  # which worker wrote it: an earlier one's is stale
    time: float | None = field(default_factory=time.time)  # when it wrote this (Unix time)

    def to_json(self) -> dict:
        return {"code": self.code, "reason": self.reason, "step": self.step, "checkpoint": self.checkpoint,
                "held": self.held, "pid": self.pid, "time": self.time,
                "standing": self.standing.to_json() if self.standing else None}

    @classmethod
    def from_json(cls, raw: dict) -> ExitRecord:
        reason, checkpoint = raw.get("reason"), raw.get("checkpoint")
        return cls(code=whole(raw.get("code")), reason=reason if isinstance(reason, str) else None,
                   step=whole(raw.get("step")), checkpoint=checkpoint if isinstance(checkpoint, str) else None,
                   held=raw.get("held") is True, standing=Standing.from_json(raw.get("standing")),
                   pid=whole(raw.get("pid")), time=number(raw.get("time")))


def read_exit(run_dir: str | Path) -> ExitRecord | None:
    """The run's exit.json, checked; None when there is none (the worker runs, or died before writing it)."""
    raw = read_json(Path(run_dir) / paths.EXIT_FILE)
    return None if raw is None else ExitRecord.from_json(raw)


def write_exit(run_dir: Path, record: ExitRecord) -> None:
    atomic.write_json(Path(run_dir) / paths.EXIT_FILE, record.to_json())


def clear_exit(run_dir: Path) -> None:
    """Forget the previous outcome (and kill request) when a worker starts, so neither is taken as new."""
    (Path(run_dir) / paths.EXIT_FILE).unlink(missing_ok=True)
    (Path(run_dir) / paths.KILL_MARKER).unlink(missing_ok=True)


def end_process(code: int) -> int:
    """Leave with code as any exit would, exit handlers and buffered output included, but once torch is loaded
    without the interpreter's teardown of its modules: 0.75-0.87 s of CPU after `import torch` on a 2-core
    EPYC (2026-12-01), which every `rlsup enjoy` or `export` and every fork server paid before it could end.
    Without torch, or while a thread the interpreter would wait for still runs, it returns code, for an ordinary
    exit."""
    if "torch" not in sys.modules or threads_waited_for():
        return code
    atexit._run_exitfuncs()  # logging's flush, multiprocessing's clean-up, weakref finalizers (temporary dirs)
    leave_now(code)


def leave_now(code: int) -> NoReturn:
    """Flush what stdout and stderr hold, then end the process with code at once: no exit handler, no teardown.

    Output that cannot be written (a reader gone, a full disk, a closed stream) is dropped rather than raised,
    since an exception here would replace code (a pause's 75, a full disk's 74) with a crash's 1."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def threads_waited_for() -> list[threading.Thread]:
    """Threads other than main that the interpreter joins before it exits (os._exit would cut them off)."""
    return [thread for thread in threading.enumerate()
            if thread is not threading.main_thread() and thread.is_alive() and not thread.daemon]
