"""Where an experiment that decides stands (views/outcome.py), from a real store: finished or not, its best member,
its forks' lineage, its step total and its variant table, and `rlsup status EXPERIMENT` saying so (issue 50 item 4)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from experiment_story import ASHA, PBT, experiment, finish, reach, start

from rlsup.decisions import pbt
from rlsup.decisions.ranking import Report
from rlsup.jobs import standings
from rlsup.jobs.state import State
from rlsup.jobs.store import Store
from rlsup.run import metrics
from rlsup.run.holds import STANDING_METRICS, Standing
from rlsup.views import jobs as jobview
from rlsup.views.decisions import read_scheduler_view
from rlsup.views.groups import GroupRow, variant_cells, variant_results


def group_of(store: Store, experiment_name: str) -> GroupRow:
    return GroupRow(experiment_name, tuple(jobview.read_row(job) for job in store.experiment_jobs(experiment_name)))


def sentence(store: Store, experiment_name: str) -> str:
    return read_scheduler_view(store, experiment_name, store.experiment_jobs(experiment_name)).outcome.sentence()


def test_asha_is_finished_once_every_rung_is_decided_and_its_winner_trained(rlsup_home, tmp_path) -> None:
    """Over time: deciding, decided with the winner still training, finished naming the best member; the stopped
    members' steps past their rung leave the total, and "paused" reads "stopped". A stopped member its user resumes
    trains again: the experiment is not finished until it is done."""
    ids = [job.id for job in experiment(rlsup_home, tmp_path, "asha", ASHA, 1_800)]
    with Store(rlsup_home) as store:
        assert sentence(store, "asha") == "deciding: 4 members have a rung still ahead"
        for job_id, value in zip(ids, (348.0, 120.5, 9.25, 200.0)):
            reach(store, job_id, 600, value, "rung 1 of ASHA")
        assert sentence(store, "asha") == "deciding: 2 members have a rung still ahead"
        reach(store, ids[0], 1_200, 412.0, "rung 2 of ASHA")
        reach(store, ids[3], 1_200, 150.0, "rung 2 of ASHA")
        assert sentence(store, "asha") == (f"ASHA decided every rung; 1 member still to train to its budget; best so "
                                           f"far job {ids[0]} asha-s1, eval_return 412 at rung 2")
        finish(store, ids[0])
        view = read_scheduler_view(store, "asha", store.experiment_jobs("asha"))
        assert view.outcome.finished
        assert view.outcome.sentence() == f"finished: ASHA decided every rung; best job {ids[0]} asha-s1, " \
                                          "eval_return 412 at rung 2"
        group = group_of(store, "asha")
        assert group.counts == "3 stopped 1 done"  # was "3 paused 1 done" for ever
        assert (group.step, group.total_steps) == (4_200, 4_200)  # was 4,200 of 7,200

        store.transition(ids[1], State.QUEUED, "resumed by its user")  # a user's intent wins
        assert not read_scheduler_view(store, "asha", store.experiment_jobs("asha")).outcome.finished
        assert group_of(store, "asha").total_steps == 4_200 - 600 + 1_800
        finish(store, ids[1])
        assert sentence(store, "asha").startswith("finished: ASHA decided every rung;")


def record_evaluation(run_dir: str, step: int, value: float) -> None:
    with open(Path(run_dir) / "metrics.jsonl", "a") as handle:
        handle.write(json.dumps({metrics.TIME: 0.0, metrics.STEP: step, metrics.KIND: metrics.EVAL,
                                 metrics.EVAL_MEAN: value}) + "\n")


def one_generation(store: Store, ids: list[int], tmp_path: Path) -> tuple[int, int, int]:
    """Generation 1 of PBT as daemon/pbt_generations.py records it: every member reports at 500, the weakest is
    replaced by a fork of a strong one (pbt.decide's own reason), the rest go on. (weak, parent, fork) ids."""
    scores = dict(zip(ids, (10.0, 50.0, 200.0, 120.0)))
    for job_id in ids:
        start(store, job_id)
        store.transition(job_id, State.PAUSED, "reached generation 1 of PBT at step 500", step=500)
        values = {metric: None for metric in STANDING_METRICS}
        standings.record_standing(store, job_id, Standing(500, {**values, "eval_return": scores[job_id]}))
    settings = standings.scheduler(store, "pbt")
    (fork,) = [outcome for outcome in pbt.decide(settings, 0, [Report(job_id, 500, scores[job_id]) for job_id in ids],
                                                 {job_id: {"dqn.lr": 1e-3} for job_id in ids})
               if isinstance(outcome, pbt.Fork)]
    parent = store.job(fork.parent)
    child = store.submit(name="pbt-g1-m1", spec_path=Path(parent.spec_path), run_dir=tmp_path / "pbt-g1-m1",
                         total_steps=1_500, experiment="pbt", overrides={
                             **parent.override_values, "dqn.lr": {"value": 1.25e-3, "pinned": True}})
    standings.record_decision(store, standings.Decision(fork.member, 500, standings.REPLACED, (
        f"replaced at generation 1 by job {child.id} ({child.name}): {fork.reason}"), 1.0), resume=False)
    standings.record_decision(store, standings.Decision(child.id, 500, standings.FORKED, fork.reason, 1.0), resume=False)
    for job_id in ids:
        if job_id != fork.member:
            standings.record_decision(store, standings.Decision(job_id, 500, standings.CONTINUED, "goes on", 1.0),
                                      resume=True)
    return fork.member, fork.parent, child.id


def test_pbt_forks_belong_to_their_lineage_and_n_counts_only_evaluated_members(rlsup_home, tmp_path) -> None:
    """A fork is no variant of its own (its perturbed lr made one, "dqn.lr=0.00125"), the member it replaced leaves
    the table, n counts the members with an evaluation, and the lineage names who forked from whom, when."""
    jobs = experiment(rlsup_home, tmp_path, "pbt", PBT, 1_500)
    ids = [job.id for job in jobs]
    with Store(rlsup_home) as store:
        weak, parent, fork = one_generation(store, ids, tmp_path)
        members = store.experiment_jobs("pbt")
        for job in members:
            if job.id in (weak, parent, ids[1]):
                record_evaluation(job.run_dir, 500, {weak: 10.0, parent: 200.0}.get(job.id, 50.0))
        view = read_scheduler_view(store, "pbt", members)
        assert len(view.lineage) == 1 and view.lineage[0].startswith(
            f"job {fork} pbt-g1-m1 forked from job {parent} pbt-s{ids.index(parent) + 1} at step 500 (generation 1, ")
        assert view.lineage[0].endswith(f"), replacing job {weak}")
        assert view.roots == {fork: parent} and view.replaced == {weak}
        cells = variant_cells(variant_results(members, roots=view.roots, replaced=view.replaced))
        assert cells == [("(seeds only)", "2", "125.0 ± 106.1", "125.0 ± 106.1")], cells
        assert view.outcome.sentence() == "deciding: 4 members have a generation still ahead"
        group = group_of(store, "pbt")
        assert group.counts == "4 queued 1 stopped"
        assert group.total_steps == 4 * 1_500 + 500


def test_rlsup_status_of_an_experiment_says_its_outcome_lineage_and_evaluated_members(rlsup_home, tmp_path) -> None:
    """The CLI renders the same outcome, lineage and variant table (a real `rlsup status` process)."""
    jobs = experiment(rlsup_home, tmp_path, "pbt", PBT, 1_500)
    with Store(rlsup_home) as store:
        weak, parent, fork = one_generation(store, [job.id for job in jobs], tmp_path)
        record_evaluation(store.job(parent).run_dir, 500, 200.0)
    environment = {**os.environ, "RLSUP_HOME": str(rlsup_home), "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "rlsup.cli", "status", "pbt"], env=environment, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("experiment pbt: 4 queued 1 stopped; 2,000 of 6,500 steps;"), lines
    assert lines[1] == "  deciding: 4 members have a generation still ahead", lines
    assert any(line.split() == ["(seeds", "only)", "1", "200.0", "±", "–", "200.0", "±", "–"] for line in lines), lines
    assert "lineage:" in [line.strip() for line in lines] and any(f"job {fork} pbt-g1-m1 forked from job {parent}" in line for line in lines)


def test_rlsup_plot_of_a_pbt_experiment_marks_its_fork_points_and_says_its_outcome(rlsup_home, tmp_path) -> None:
    """`rlsup plot EXPERIMENT`, in the terminal and as a picture: a mark where each fork began on its line, saying
    whom it forked from, and the experiment's outcome under the plot."""
    jobs = experiment(rlsup_home, tmp_path, "pbt", PBT, 1_500)
    with Store(rlsup_home) as store:
        weak, parent, fork = one_generation(store, [job.id for job in jobs], tmp_path)
        runs = {job.id: job.run_dir for job in store.experiment_jobs("pbt")}
    Path(runs[fork]).mkdir()
    for job_id, run_dir in runs.items():
        steps = (100, 300, 500, 700, 900) if job_id == fork else (100, 300, 500)
        for step in steps:
            record_evaluation(run_dir, step, step / 10 + job_id)
    environment = {**os.environ, "RLSUP_HOME": str(rlsup_home), "NO_COLOR": "1", "COLUMNS": "120", "LINES": "30"}
    command = [sys.executable, "-m", "rlsup.cli", "plot", "pbt", "--metric", "eval_return"]
    drawn = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120)
    assert drawn.returncode == 0, drawn.stderr
    assert "◆" in drawn.stdout and f"job {fork} forked from job {parent} at 500" in drawn.stdout, drawn.stdout
    assert drawn.stdout.rstrip().endswith("pbt: deciding: 4 members have a generation still ahead"), drawn.stdout
    picture = tmp_path / "pbt.svg"
    written = subprocess.run(command + ["--out", str(picture)], env=environment, capture_output=True, text=True,
                             timeout=120)
    assert written.returncode == 0, written.stderr
    svg = picture.read_text()
    assert f"job {fork} forked from job {parent} at 500" in svg and "deciding: 4 members have a generation" in svg
