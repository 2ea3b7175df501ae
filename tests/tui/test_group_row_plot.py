"""On a group row the plot shows its first job, read once for the plot and the experiment pane together."""
from __future__ import annotations

import json
from pathlib import Path

from rlsup_testing import cartpole_job
from test_compare import drawn
from test_experiment_pane import SIZE, SWEEP, pane_text, variant_lines

from rlsup import client, paths
from rlsup.hardware import FakeHardware
from rlsup.tui.app import RlsupApp
from rlsup.tui.jobstable import JobsTable, group_key


def append(run_dir: Path, *records: dict) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / paths.METRICS_FILE).open("a") as file:
        file.writelines(json.dumps({"t": 0.0, **record}) + "\n" for record in records)


def episodes(first_step: int, returns: list[float]) -> list[dict]:
    return [{"kind": "episode", "step": first_step + 10 * index, "return": value, "length": 10}
            for index, value in enumerate(returns)]


async def test_a_group_rows_plot_follows_new_metrics_and_the_pane_shares_its_read(daemon_home, tmp_path,
                                                                                   wait_until):
    path = cartpole_job(tmp_path, name="sweep", total_steps=1_500)
    path.write_text(path.read_text() + SWEEP)
    # Queued with no daemon: the metrics lines are the test's, appended as a worker appends them.
    jobs = client.submit_experiment(path, seeds=(1,), home=daemon_home, start_daemon=False)
    first_dir, second_dir = (Path(job.run_dir) for job in jobs)
    append(first_dir, *episodes(10, [10.0, 12.0, 14.0]), {"kind": "eval", "step": 40, "mean": 20.0})
    append(second_dir, {"kind": "eval", "step": 40, "mean": 30.0})

    app = RlsupApp(daemon_home, hardware=FakeHardware())
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: "sweep" in table.groups_shown, what="the group row")
        table.move_cursor(row=table.get_row_index(group_key("sweep")))
        await wait_until(pilot, lambda: drawn(app).get("episodes", ((), ()))[1] == (10.0, 12.0, 14.0),
                         what="the first job's returns", report=lambda: str(drawn(app)))
        assert app.selected_job_id == jobs[0].id
        await wait_until(pilot, lambda: [line[2] for line in variant_lines(pane_text(app))] == ["20.0 ± –", "30.0 ± –"],
                         what="both runs' evaluations", report=lambda: pane_text(app))
        # The first job's file is read by the plot's reader alone; the pane takes its evaluations from it.
        assert set(app.metrics_poller.evaluations.readers) == {jobs[1].id}

        for round_number in range(1, 4):  # lines keep arriving: the plot and the pane follow each round
            step = 40 + 100 * round_number
            append(first_dir, *episodes(step, [15.0 + round_number]),
                   {"kind": "eval", "step": step, "mean": 20.0 + round_number})
            app.poll_now()
            await wait_until(pilot, lambda: drawn(app)["episodes"][0][-1] == step, what=f"round {round_number} plotted",
                             report=lambda: str(drawn(app)))
            assert drawn(app)["episodes"][1][-1] == 15.0 + round_number
            await wait_until(pilot, lambda: variant_lines(pane_text(app))[0][2] == f"{20 + round_number:.1f} ± –",
                             what=f"round {round_number}'s evaluation in the pane", report=lambda: pane_text(app))
