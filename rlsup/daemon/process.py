"""The daemon's process around its loop: settings, the home's lock, signal handlers, detaching; its exit code."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path

from rlsup import hardware as hardware_module, paths
from rlsup.daemon import scheduler
from rlsup.daemon.main import Daemon
from rlsup.daemon.runner import JobRunner
from rlsup.daemon.settings_file import load_settings
from rlsup.jobs.store import Store, StoreError
from rlsup.daemon.startup import AlreadyRunning, detach_output, setup_logging, take_lock
from rlsup.run.exit import EXIT_DONE, EXIT_ERROR, EXIT_SPEC, EXIT_STORE_LOST

log = logging.getLogger("rlsup.daemon")


def run(home: Path | None = None, *, settings: scheduler.Settings | None = None,
        machine: hardware_module.Machine | None = None, runner: JobRunner | None = None, detach: bool = False) -> int:
    """Run a daemon for home in this process until SIGTERM / SIGINT; returns an exit code.

    SIGHUP re-reads daemon.toml. detach (what `python -m rlsup.daemon` does) points stdout and
    stderr at /dev/null once the lock is held, since the client that started it is gone.
    """
    os.umask(0o077)
    home = Path(home) if home else paths.rlsup_home()
    try:
        settings = settings or load_settings(home)
    except scheduler.SettingsError as error:
        print(f"rlsup daemon: {error}", file=sys.stderr)
        return EXIT_SPEC
    try:
        Store(home).close()  # before the lock: a client waiting for it hears why a daemon cannot start
    except StoreError as error:
        print(f"rlsup daemon: {error}", file=sys.stderr)
        return EXIT_ERROR
    try:
        lock = take_lock(home)
    except AlreadyRunning as error:
        print(f"rlsup daemon: {error}", file=sys.stderr)
        return EXIT_DONE
    setup_logging(home, settings)
    try:
        daemon = Daemon(home, settings, machine=machine, runner=runner)
    except Exception as error:  # e.g. a database from a newer rlsup
        log.exception("daemon cannot start")
        print(f"rlsup daemon: {error}", file=sys.stderr)
        os.close(lock)
        return EXIT_ERROR
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, daemon.request_stop)
        signal.signal(signal.SIGINT, daemon.request_stop)
        signal.signal(signal.SIGHUP, daemon.request_reload)
    if detach:
        detach_output()
    try:
        daemon.run()
    except Exception:
        log.exception("daemon crashed")
        return EXIT_ERROR
    finally:
        os.close(lock)
    return EXIT_STORE_LOST if daemon.store_watch.lost else EXIT_DONE