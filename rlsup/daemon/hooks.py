"""daemon.toml's on_done / on_failed / on_paused: a shell command per state change, as pueue's callbacks."""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rlsup.daemon.scheduler import Settings
from rlsup.jobs.record import Event, EventKind, Job
from rlsup.jobs.state import State
from rlsup.run.status import read_worker_status
from rlsup.jobs.store import Store

log = logging.getLogger("rlsup.daemon")

# The daemon.toml key whose command runs when a job enters each state.
HOOK_KEYS = {State.DONE: "on_done", State.FAILED: "on_failed", State.PAUSED: "on_paused"}
# Of a hook's output (stdout and stderr together), the tail that daemon.log gets: a chatty hook must not
# rotate away the daemon's own lines.
OUTPUT_LOGGED_BYTES = 4096
# Every hook runs under hook_shell.py, which keeps only that tail of its output, kills the hook at its timeout
# (a daemon SIGKILLed meanwhile left it running for ever) and then writes the tail into the daemon's pipe. The
# daemon kills the group itself only this long after, should hook_shell.py not have.
BACKSTOP_AFTER_S = 2.0
HOOK_SHELL = str(Path(__file__).with_name("hook_shell.py"))
# A hook's bytes reach daemon.log escaped: a terminal showing the log must not take them for commands.
CONTROL_ESCAPES = {code: f"\\x{code:02x}" for code in (*range(32), *range(127, 160)) if code != ord("\t")}
# Of each RLSUP_ variable, the bytes a hook gets: Linux refuses to start a process with a variable over
# 128 KiB (E2BIG), and a path is at most 4 KiB; a reason cut here has said what it had to.
ENVIRONMENT_VALUE_BYTES = 8192


@dataclass
class RunningHook:
    """One hook process, from its start until the loop reaps it."""

    job_id: int
    key: str
    process: subprocess.Popen
    output: int  # the read end of the pipe hook_shell.py writes the output's tail into as it ends
    started: float
    timeout_s: float
    timed_out: bool = False  # hook_shell.py kills it then, and the daemon says so
    killed: bool = False     # by the daemon, hook_shell.py having failed to

    def name(self) -> str:
        return f"job {self.job_id}: {self.key} hook (pid {self.process.pid})"


class Hooks:
    """Runs each transition's hook once: it follows the store's state events from where this daemon began.

    A transition recorded before the daemon started had its hook started by the daemon that recorded it,
    so a restart or the adoption of a worker never runs a hook twice (at most once: a daemon that dies
    between recording a state and starting its hook does not run it).
    """

    def __init__(self, store: Store):
        self.store = store
        newest = store.events(None, 1)
        self.last_event_id = newest[-1].id if newest else 0
        self.running: list[RunningHook] = []

    def follow(self, settings: Settings) -> None:
        """Start the hooks of the state changes recorded since the last call; reap or kill running ones.

        Called from the daemon's loop: nothing here waits for a hook, and nothing a hook does stops the loop.
        """
        try:
            while batch := self.store.events_since(self.last_event_id):
                for event in batch:
                    self.last_event_id = event.id  # first: an event whose hook fails to start is not retried
                    state_change = event.kind is EventKind.STATE and event.to_state
                    key = HOOK_KEYS.get(State(event.to_state)) if state_change else None
                    if key and getattr(settings, key) and event.job_id is not None:
                        self.start(event, key, settings)
            self.reap()
        except sqlite3.DatabaseError:
            raise  # the store's: the daemon's loop hands a damaged file to its store watch, which names it once
        except Exception:
            log.exception("hooks: an unexpected error; the daemon carries on")

    def start(self, event: Event, key: str, settings: Settings) -> None:
        job = self.store.job(event.job_id)
        if job is None:
            return
        command = getattr(settings, key)
        environment = {**os.environ, **hook_environment(job, State(event.to_state), event.message)}
        reading, writing = os.pipe2(os.O_CLOEXEC)
        arguments = [sys.executable, "-I", HOOK_SHELL, f"{settings.hook_timeout_s:g}", str(OUTPUT_LOGGED_BYTES),
                     command]
        try:
            # Its own session: a timeout kills the whole group, the shell and whatever it started.
            process = subprocess.Popen(arguments, env=environment, stdin=subprocess.DEVNULL, stdout=writing,
                                       stderr=writing, start_new_session=True)
        except (OSError, ValueError) as error:  # ValueError: an environment Popen refuses to pass
            os.close(reading)
            log.error("job %s: %s hook could not start: %s", job.id, key, error)
            return
        finally:
            os.close(writing)
        hook = RunningHook(job.id, key, process, reading, time.monotonic(), settings.hook_timeout_s)
        log.info("%s started: %s", hook.name(), command)
        self.running.append(hook)

    def reap(self) -> None:
        now = time.monotonic()
        for hook in list(self.running):
            code = hook.process.poll()
            overdue = now - hook.started - hook.timeout_s
            # Also when it is already gone: hook_shell.py kills it at the deadline, and on busy cores that
            # may come before any tick has seen it running late.
            ended_by_timeout = code is None or code == -signal.SIGKILL
            if overdue > 0 and ended_by_timeout and not hook.timed_out:
                hook.timed_out = True
                log.warning("%s killed at its timeout of %g s", hook.name(), hook.timeout_s)
            if code is None:
                if overdue > BACKSTOP_AFTER_S and not hook.killed:
                    kill_group(hook)
                continue  # a killed one is reaped at a later tick: waiting here could block the loop
            self.running.remove(hook)
            log_end(hook, code, now - hook.started)

    def stop(self) -> None:
        """The daemon stops: hooks still running finish on their own, their output no longer logged."""
        for hook in self.running:
            log.warning("%s still running as the daemon stops: left to finish, its output not logged", hook.name())
            os.close(hook.output)
        self.running.clear()


def hook_environment(job: Job, state: State, reason: str) -> dict[str, str]:
    """The variables a hook reads: which job, where it stands, and the mean return it last reported."""
    status = read_worker_status(job.run_dir)
    last_return = status.mean_return if status is not None else None
    variables = {"RLSUP_JOB_ID": str(job.id), "RLSUP_JOB_NAME": job.name, "RLSUP_JOB_STATE": state.value,
                 "RLSUP_JOB_STEP": str(job.step), "RLSUP_RUN_DIR": str(job.run_dir),
                 "RLSUP_LAST_RETURN": "" if last_return is None else repr(last_return),
                 # The first line: a failure's reason goes on with worker.log's last lines.
                 "RLSUP_JOB_REASON": (reason.splitlines() or [""])[0]}
    return {name: environment_value(value) for name, value in variables.items()}


def environment_value(text: str) -> str:
    """text as an environment variable can hold it. A reason is a worker's words (worker.log, exit.json), and
    Popen refuses a NUL (written \\x00 here, as daemon.log writes it) or a string the file system's encoding
    cannot write (replaced), and the kernel a variable past its size (cut to ENVIRONMENT_VALUE_BYTES)."""
    text = text.replace("\0", CONTROL_ESCAPES[0])
    try:
        data = os.fsencode(text)
    except UnicodeEncodeError:
        data = text.encode(sys.getfilesystemencoding(), "replace")
    if len(data) > ENVIRONMENT_VALUE_BYTES:  # cut whole characters only
        return data[:ENVIRONMENT_VALUE_BYTES].decode(sys.getfilesystemencoding(), "ignore")
    return os.fsdecode(data)


def kill_group(hook: RunningHook) -> None:
    hook.killed = True
    log.warning("%s still running %g s after its timeout: its process group killed", hook.name(), BACKSTOP_AFTER_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(hook.process.pid, signal.SIGKILL)


def log_end(hook: RunningHook, code: int, seconds: float) -> None:
    """Its exit status and the tail of its output, into daemon.log."""
    how = f"killed by signal {-code}" if code < 0 else f"exited {code}"
    level = logging.INFO if code == 0 else logging.WARNING
    log.log(level, "%s %s after %.1f s", hook.name(), how, seconds)
    os.set_blocking(hook.output, False)
    try:
        text = os.read(hook.output, 2 * OUTPUT_LOGGED_BYTES).decode(errors="replace").rstrip()
    except BlockingIOError:  # killed before it wrote any
        text = ""
    finally:
        os.close(hook.output)
    for line in text.splitlines():
        log.log(level, "%s output: %s", hook.name(), line.translate(CONTROL_ESCAPES))
