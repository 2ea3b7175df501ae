"""A sweep's group row and its marked curves keep its variants apart: a mean over learning rates is no run's."""
from __future__ import annotations

import shutil
from pathlib import Path

from rlsup import paths
from rlsup.views import plots as plotting
from rlsup.run.status import WorkerStatus, write_worker_status
from rlsup.jobs.state import State
from rlsup.jobs.store import Process, Store
from rlsup.tui.jobstable import JobsTable, group_key
from test_compare import drawn, real_runs  # noqa: F401 (real_runs: a fixture)
from test_screens import make_app

SIZE = (160, 48)
RATES = (1e-3, 3e-4)


def sweep(home: Path, runs: list[Path], returns: dict[tuple[float, int], float] | None = None) -> list[int]:
    """Jobs of experiment "cp" for each rate and seed, each a copy of a real run, running with the return
    its status.json reports."""
    ids = []
    with Store(home) as store:
        for rate in RATES:
            for seed, run in enumerate(runs, start=1):
                run_dir = home / "runs" / f"cp-lr{rate:g}-s{seed}"
                shutil.copytree(run, run_dir)
                overrides = {"dqn.lr": {"value": rate, "pinned": True}, "job.seed": {"value": seed, "pinned": True}}
                job = store.submit(name=run_dir.name, spec_path=run / paths.JOB_FILE, run_dir=run_dir, algo="dqn",
                                   env="CartPole-v1", total_steps=1_500, overrides=overrides, experiment="cp")
                if returns is not None:
                    store.transition(job.id, State.STARTING, "started", process=Process(pid=1))
                    store.transition(job.id, State.RUNNING, "worker reports status")
                    write_worker_status(run_dir, WorkerStatus(pid=1, step=1_000, mean_return=returns[rate, seed]))
                ids.append(job.id)
    return ids


async def test_a_sweeps_group_row_shows_its_best_variant_not_the_mean_over_rates(rlsup_home, real_runs, wait_until):
    returns = {(1e-3, 1): 100.0, (1e-3, 2): 120.0, (3e-4, 1): 400.0, (3e-4, 2): 420.0}
    sweep(rlsup_home, real_runs, returns)
    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        key = group_key("cp")
        await wait_until(pilot, lambda: key in table.cells_shown, what="the sweep's group row")
        cell = lambda: table.get_cell(key, "return").plain  # noqa: E731
        # Over all four it is 260.0 ± 164.9: no learning rate's return.
        await wait_until(pilot, lambda: cell() == "best 410.0 ± 14.1", what="the best variant's return",
                         report=cell)


async def test_a_marked_sweep_is_drawn_as_one_line_per_variant(rlsup_home, real_runs, wait_until):
    sweep(rlsup_home, real_runs)
    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: "cp" in table.groups_shown, what="the sweep's group row")
        table.move_cursor(row=table.get_row_index(group_key("cp")))
        await pilot.pause()
        await pilot.press("space")
        labels = [plotting.group_label(f"cp dqn.lr={rate}", 2) for rate in ("0.001", "0.0003")]
        await wait_until(pilot, lambda: [label for label in drawn(app) if label][:2] == labels,
                         what="a mean and band per learning rate", report=lambda: str(list(drawn(app))))
