"""Hooks with a real store and real hook processes, reaped at moments the daemon's loop cannot choose."""
from __future__ import annotations

import logging

from rlsup.daemon.hooks import Hooks
from rlsup.daemon.scheduler import Settings
from rlsup.jobs.state import State
from rlsup.jobs.store import Store


def test_a_hook_its_shell_killed_at_the_timeout_before_a_tick_saw_it_overdue_is_logged_as_timed_out(
        tmp_path, caplog) -> None:
    # CI found this: hook_shell.py kills the hook at its deadline, and on busy cores the daemon's next
    # tick may come only after that, reaping a process that is already gone without having said why.
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with Store(home) as store:
        job = store.submit(name="quick", spec_path=home / "quick.toml", run_dir=home / "runs" / "quick-1",
                           algo="dqn", env="CartPole-v1", total_steps=1000)
        hooks = Hooks(store)
        store.transition(job.id, State.STARTING, "test")
        store.transition(job.id, State.RUNNING, "test")
        store.transition(job.id, State.DONE, "test")
        settings = Settings(on_done="sleep 600", hook_timeout_s=0.5)
        hooks.follow(settings)
        [hook] = hooks.running
        hook.process.wait(timeout=30)  # no tick between its start and its end
        with caplog.at_level(logging.INFO, logger="rlsup.daemon"):
            hooks.follow(settings)
    assert not hooks.running
    assert f"job {job.id}: on_done hook (pid {hook.process.pid}) killed at its timeout of 0.5 s" in caplog.text
    assert "killed by signal 9" in caplog.text
