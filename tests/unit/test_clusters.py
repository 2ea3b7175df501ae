"""[[cluster]] tables of daemon.toml, placement on clusters, and routing each job to its runner."""
from __future__ import annotations

from pathlib import Path

import pytest

from fake_runner import FakeRunner
from rlsup import spec as specs
from rlsup.run import files as runfiles
from rlsup.daemon import scheduler
from rlsup.daemon.runner import Signal, WorkerHandle
from rlsup.daemon.runners import Runners

LAB = {"name": "lab", "address": "http://head:8265", "run_root": "/shared/runs"}


def settings(*tables: dict, **values) -> scheduler.Settings:
    return scheduler.settings_from_mapping({**values, "cluster": list(tables)})


def test_clusters_read_with_their_defaults_beside_the_daemon_keys() -> None:
    read = settings(LAB, {**LAB, "name": "big", "max_jobs": 2, "python": "/opt/py/bin/python"}, tick_s=0.5)
    assert read.tick_s == 0.5
    assert [(c.name, c.max_jobs, c.python) for c in read.clusters] == [("lab", 8, "python"),
                                                                       ("big", 2, "/opt/py/bin/python")]
    assert scheduler.settings_from_mapping({"daemon": {"tick_s": 0.5}, "cluster": [LAB]}).clusters[0].name == "lab"


@pytest.mark.parametrize("tables, message", [
    ([{"name": "lab", "address": "x"}], "cluster[0].run_root: missing"),
    ([{**LAB, "run_root": "runs"}], "cluster[0].run_root: must be an absolute path"),
    ([{**LAB, "max_jobs": 0}], "cluster[0].max_jobs: must be an integer of at least 1"),
    ([{**LAB, "colour": "red"}], "cluster[0].colour: unknown key"),
    ([{**LAB, "address": 8265}], "cluster[0].address: must be a non-empty string"),
    ([LAB, LAB], "cluster[1].name: 'lab' names two clusters"),
    ([{**LAB, "name": "local"}], "cluster[0].name: 'local' is not a cluster name"),
    ({"name": "lab"}, "cluster: must be an array of tables"),
])
def test_a_bad_cluster_table_is_one_sentence_naming_the_key(tables, message) -> None:
    with pytest.raises(scheduler.SettingsError, match="daemon.toml: ") as raised:
        scheduler.settings_from_mapping({"cluster": tables})
    assert message in str(raised.value)


def test_cluster_jobs_start_in_priority_order_up_to_max_jobs_and_unknown_clusters_wait() -> None:
    candidates = [(scheduler.Candidate(1, priority=0), "lab"), (scheduler.Candidate(2, priority=5), "lab"),
                  (scheduler.Candidate(3), "lab"), (scheduler.Candidate(4), "gone"),
                  (scheduler.Candidate(5, not_before=50.0), "lab")]
    plan = scheduler.place_on_clusters(candidates, active={"lab": 1}, settings=settings({**LAB, "max_jobs": 3}),
                                       now=10.0)
    assert [placement.job_id for placement in plan.start] == [2, 1]
    assert plan.waiting[3] == "waiting for room on cluster lab (max_jobs = 3 in use)"
    assert plan.waiting[4] == "cluster 'gone' is not in daemon.toml (known: lab)"
    assert plan.waiting[5].startswith("restart backoff")


def run_on(tmp_path: Path, name: str, cluster: str) -> Path:
    run_dir = tmp_path / name
    run_dir.mkdir()
    runfiles.write_run_spec(run_dir, specs.JobSpec().replace("job", cluster=cluster))
    return run_dir


def test_each_job_goes_to_the_runner_of_its_cluster_and_is_followed_there(tmp_path: Path) -> None:
    local, remote = FakeRunner(), FakeRunner()
    remote.boot_id = "ray:lab"
    runners = Runners(local, lambda: settings(LAB).clusters, make_cluster_runner=lambda cluster: remote)
    runners.start(1, run_on(tmp_path, "here", ""), (0,))
    runners.start(2, run_on(tmp_path, "there", "lab"), ())
    assert (set(local.followed), set(remote.followed)) == ({1}, {2})
    assert runners.signal(2, Signal.PAUSE) and remote.sent(2) == [Signal.PAUSE] and local.sent(2) == []
    assert {worker.job_id for worker in runners.handles()} == {1, 2}
    remote.end(2, code=75)
    assert [(worker.job_id, ended.code) for worker, ended in runners.reap()] == [(2, 75)]
    remote.survivors.add(77)
    assert runners.adopt(WorkerHandle(3, 77, 0.0, "ray:lab", tmp_path / "there", ref="rlsup-3-00"))
    assert 3 in remote.followed and 3 not in local.followed
    with pytest.raises(OSError, match="no \\[\\[cluster\\]\\] named 'gone'"):
        runners.start(4, run_on(tmp_path, "gone", "gone"), ())
