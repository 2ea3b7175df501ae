"""One formatter writes where a job runs, for the CLI's WHERE column and the TUI's jobs table alike."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from rlsup.jobs.record import Process
from rlsup.views.jobs import JobRow, where
from rlsup.jobs.store import Store
from rlsup.tui.jobstable import job_cells


def test_cli_and_tui_write_the_same_place_in_their_own_style(tmp_path) -> None:
    with Store(tmp_path) as store:
        job = store.submit(name="cp", spec_path=Path("/nowhere/cp.toml"), run_dir=Path("/nowhere/run"),
                           total_steps=100)
    jobs = {"two gpus": dataclasses.replace(job, process=Process(gpus=(0, 1))),
            "no gpu": job,
            "cluster": dataclasses.replace(job, cluster="lab", process=Process(node="10.0.0.7"))}
    cli = {name: where(each) for name, each in jobs.items()}
    tui = {name: job_cells(JobRow(job=each, step=0, steps_per_second=None, mean_return=None, eta_s=None))[-1]
           for name, each in jobs.items()}
    assert cli == {"two gpus": "gpu 0,1", "no gpu": "-", "cluster": "lab:10.0.0.7"}
    assert tui == {"two gpus": "0 1", "no gpu": "–", "cluster": "lab:10.0.0.7"}


def test_a_queued_job_says_why_it_waits_in_the_same_words_in_list_and_the_tui(tmp_path) -> None:
    """`rlsup list` showed a bare `queued` where the TUI said `queued: needs 1 GPU`."""
    from rlsup.cli.jobs import table_cells
    from rlsup.tui.jobstable import state_cell

    with Store(tmp_path) as store:
        job = store.submit(name="cp", spec_path=Path("/nowhere/cp.toml"), run_dir=Path("/nowhere/run"),
                           total_steps=100)
        job = store.update(job.id, reason="needs 1 GPU; this machine has 0 (set [job] gpus = 0 to run it on the CPU)")
    row = JobRow(job=job, step=0, steps_per_second=None, mean_return=None, eta_s=None)
    assert table_cells(row, {})[4] == state_cell(row).plain == "queued: needs 1 GPU"
