"""Clients submitting at once, as real processes against one real store: a name finds one job, and an experiment
never queues a seed twice (issue 49 item 6)."""
from __future__ import annotations

import collections
import multiprocessing
import traceback
from pathlib import Path
from typing import Callable

from rlsup_testing import cartpole_job

from rlsup import client, paths
from rlsup.jobs.store import Store

CLIENTS = 12


def at_once(count: int, submitting: Callable[[int], list[str]]) -> list[tuple[str, object]]:
    """Run submitting(index) in count processes released together; each one's ("queued", names) or
    ("refused", message) or ("crashed", traceback)."""
    context = multiprocessing.get_context("fork")  # forked after the env check's imports: each starts at once
    barrier, results = context.Barrier(count), context.Queue()

    def client_process(index: int) -> None:
        barrier.wait(timeout=60)
        try:
            results.put(("queued", submitting(index)))
        except client.NameTaken as error:
            results.put(("refused", str(error)))
        except BaseException:
            results.put(("crashed", traceback.format_exc()))

    processes = [context.Process(target=client_process, args=(index,)) for index in range(count)]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    assert [outcome for outcome in outcomes if outcome[0] == "crashed"] == []
    return outcomes


def repeated(names: list[str]) -> list[str]:
    return sorted(name for name, count in collections.Counter(names).items() if count > 1)


def test_copies_submitted_at_once_each_get_a_name_of_their_own(rlsup_home: Path, tmp_path: Path) -> None:
    """Issue 49 item 6: free_name() and the insert were two store sessions, so clients between them took one name
    (c-17 five times, which `rlsup status c-17` then refused)."""
    from rlsup.algos.envs.check import check_env_file  # noqa: F401  imported once, before the fork

    path = cartpole_job(tmp_path, name="c")
    outcomes = at_once(CLIENTS, lambda _: [client.submit(path, copy=True, home=rlsup_home, start_daemon=False).name])
    with Store(rlsup_home) as store:
        names = [job.name for job in store.jobs()]
    assert len(names) == CLIENTS and repeated(names) == [], names
    assert sorted(name for _, queued in outcomes for name in queued) == sorted(names)
    assert len(list(paths.runs_dir(rlsup_home).iterdir())) == CLIENTS  # a run made for a name lost is removed


def test_seeds_submitted_at_once_to_one_experiment_are_each_queued_once(rlsup_home: Path, tmp_path: Path) -> None:
    """Issue 49 item 6: submit_experiment checked the experiment's seeds in one store session and queued them in
    another, so clients joining at once queued one seed twice. Each client asks for two seeds, each seed asked for
    by two clients: whichever comes first queues it, and the other is refused whole."""
    from rlsup.algos.envs.check import check_env_file  # noqa: F401  imported once, before the fork

    path = cartpole_job(tmp_path, name="e")
    outcomes = at_once(CLIENTS, lambda index: [job.name for job in client.submit_experiment(
        path, seeds=(index + 1, index + 2), experiment="e",
        home=rlsup_home, start_daemon=False)])
    with Store(rlsup_home) as store:
        names = [job.name for job in store.experiment_jobs("e")]
    assert repeated(names) == [], names
    assert sorted(name for kind, queued in outcomes if kind == "queued" for name in queued) == sorted(names)
    assert all("already has job" in message for kind, message in outcomes if kind == "refused"), outcomes
    assert len(list(paths.runs_dir(rlsup_home).iterdir())) == len(names)
