"""One job file, many jobs: a second submit of a bound file is refused unless it asks for --copy or --name."""
from __future__ import annotations

from pathlib import Path

from rlsup import paths
from rlsup.jobs.state import State


def test_a_bound_file_is_refused_and_a_copy_keeps_edits_apart(harness) -> None:
    harness.start_daemon()
    original = harness.job_file("shared", total_steps=400, checkpoint_every=400)
    code, out, _ = harness.cli("submit", original)
    assert code == 0
    first = int(out.strip())
    harness.wait_state(first, State.DONE)

    code, out, err = harness.cli("submit", original)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1, err
    assert f"job {first}" in err and "--copy" in err and "--name" in err

    code, out, _ = harness.cli("submit", original, "--copy")
    assert code == 0
    second = harness.job(int(out.strip()))
    copy = Path(second.run_dir) / paths.SOURCE_COPY
    assert Path(second.spec_path) == copy and copy.read_bytes() == original.read_bytes()
    harness.wait_state(second.id, State.DONE)

    # Raising the original's budget reaches only the first job; the copy drives the second.
    original.write_text(harness.job_text(total_steps=600, checkpoint_every=400))
    harness.wait_for(lambda: harness.job(first).total_steps == 600, timeout=30, what="the edit to reach job 1")
    copy.write_text(harness.job_text(total_steps=500, checkpoint_every=400))
    harness.wait_for(lambda: harness.job(second.id).total_steps == 500, timeout=30, what="the copy's edit")
    assert harness.job(first).total_steps == 600
    assert not [event for event in harness.events(second.id, "edit") if "600" in event.message]

    code, out, _ = harness.cli("status", str(second.id))
    assert code == 0 and f"follows {copy}" in out and "copy" in out


def test_name_lets_two_jobs_share_a_file_and_status_says_so(harness) -> None:
    original = harness.job_file("twice", total_steps=400)
    first = harness.submit(original)
    code, out, err = harness.cli("submit", original, "--name", "twice-again")
    assert code == 0, err
    second = int(out.strip())
    assert f"now drives jobs {first.id}, {second}: its edits reach both" in err, err
    code, out, _ = harness.cli("status", str(first.id))
    assert f"follows {original}" in out and f"jobs {first.id}, {second}" in out


def test_an_edit_reaching_many_jobs_is_judged_once_and_the_loop_serves_intents_meanwhile(harness) -> None:
    """Each job's share of an edit took ~29 ms on the loop: 1,000 jobs held a pause of another job 24.5 s."""
    harness.settings(cpu_jobs=0)  # all queued: what is measured is the edit, not training
    harness.start_daemon()
    other = harness.submit(harness.job_file("other"))
    path = harness.job_file("many", total_steps=400)
    count = 300
    code, _, err = harness.cli("submit", path, "--seeds", f"1-{count}")
    assert code == 0, err
    many = [job.id for job in harness.store.jobs() if job.id != other.id]
    assert len(many) == count

    def applied() -> int:
        return sum(1 for job in harness.store.jobs() if job.id != other.id and job.total_steps == 500)

    path.write_text(harness.job_text(total_steps=500))
    harness.wait_for(applied, timeout=60, what="the edit to reach its first job")
    assert harness.cli("pause", str(other.id))[0] == 0
    harness.wait_state(other.id, State.PAUSED, timeout=120)
    assert applied() < count, "the pause waited for the whole edit"
    harness.wait_for(lambda: applied() == count, timeout=240, what="the edit to reach every job")
    log = (harness.home / paths.DAEMON_LOG).read_text()
    assert log.count(f"edit of {path} judged once for {count} job(s)") == 1, log[-3000:]
    assert all(len(harness.events(job_id, "edit")) == 1 for job_id in many)


def test_a_second_save_during_a_long_edit_reaches_every_job_and_the_first_is_not_left_anywhere(harness) -> None:
    """Saved twice quickly: the jobs still waiting for the first save take the second, the others take it too."""
    harness.settings(cpu_jobs=0)
    harness.start_daemon()
    path = harness.job_file("twice", total_steps=400)
    count = 200
    code, _, err = harness.cli("submit", path, "--seeds", f"1-{count}")
    assert code == 0, err

    def budgets() -> list[int]:
        return [job.total_steps for job in harness.store.jobs()]

    path.write_text(harness.job_text(total_steps=500))
    harness.wait_for(lambda: 500 in budgets(), timeout=60, what="the first save to reach a job")
    path.write_text(harness.job_text(total_steps=600))
    harness.wait_for(lambda: set(budgets()) == {600}, timeout=240, what="the second save to reach every job",
                     report=lambda: str(sorted(set(budgets()))))
    assert all("total_steps = 600" in (Path(job.run_dir) / "job.toml").read_text() for job in harness.store.jobs())
    log = (harness.home / paths.DAEMON_LOG).read_text()
    assert log.count(f"edit of {path} judged once for") == 2, log[-3000:]
