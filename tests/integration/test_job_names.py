"""Job names are unique: a second job of a taken name gets -2, -3…, and a name two jobs share (an older store)
is refused with the ids to choose from, never resolved silently to the newest (issue 24 item 10)."""
from __future__ import annotations

from pathlib import Path

from rlsup_testing import assert_one_line_error, cartpole_job, run_rlsup

from rlsup import client, spec as specs
from rlsup.jobs.state import Desired
from rlsup.jobs.store import Store


def test_copies_of_a_file_get_numbered_names_and_each_is_found_by_its_own(rlsup_home, tmp_path):
    path = cartpole_job(tmp_path, name="twin")
    first = client.submit(path, home=rlsup_home, start_daemon=False)
    copies = [client.submit(path, home=rlsup_home, start_daemon=False, copy=True) for _ in range(2)]
    named = client.submit(path, home=rlsup_home, start_daemon=False, name="twin-2")
    # A name asked for is numbered the same way: twin-2 is taken, so it is twin-2-2 (a name such as run-2024 is
    # not a number to count on from).
    assert [job.name for job in (first, *copies, named)] == ["twin", "twin-2", "twin-3", "twin-2-2"]
    # The run's own job.toml says it too: a later edit of the file that leaves the name alone keeps it.
    assert specs.load(Path(copies[0].run_dir) / "job.toml").job.name == "twin-2"
    for job in (first, *copies):
        shown = run_rlsup("status", job.name)
        assert shown.returncode == 0 and shown.stdout.startswith(f"job {job.id} {job.name}:"), shown.stdout


def test_a_name_two_jobs_share_is_refused_with_their_ids(rlsup_home, tmp_path):
    path = cartpole_job(tmp_path, name="dup")
    with Store(rlsup_home) as store:  # as a store written before names were unique holds them
        ids = [store.submit(name="dup", spec_path=path, run_dir=tmp_path / f"run{index}").id for index in (1, 2)]
    for command in ("status", "pause", "logs"):
        assert_one_line_error(run_rlsup(command, "dup"), 1, "'dup' names jobs 1 and 2", "give one of their ids")
    with Store(rlsup_home) as store:
        assert [store.job(job_id).desired for job_id in ids] == [Desired.RUNNING, Desired.RUNNING]
    assert run_rlsup("status", "2").stdout.startswith("job 2 dup:")


def test_a_live_edit_to_a_name_another_job_holds_keeps_the_jobs_own_name(harness):
    harness.settings(cpu_jobs=0)  # both jobs wait in the queue: their files' edits still apply
    harness.start_daemon()
    holder = harness.submit(harness.job_file("alpha"))
    spec = harness.job_file("beta")
    job = harness.submit(spec)
    spec.write_text(spec.read_text().replace("[job]\n", '[job]\nname = "alpha"\n', 1)
                    .replace("total_steps = 2000", "total_steps = 900"))
    harness.wait_for(lambda: harness.events(job.id, "edit"), timeout=30, what="the edit to apply",
                     report=lambda: harness.report(job.id))
    edited = harness.job(job.id)
    assert (edited.name, edited.total_steps) == ("beta", 900)
    message = harness.events(job.id, "edit")[-1].message
    assert f"job.name 'alpha' is job {holder.id}'s name" in message and "keeps 'beta'" in message, message
    assert specs.load(Path(job.run_dir) / "job.toml").job.name == "beta"
    assert run_rlsup("status", "alpha").stdout.startswith(f"job {holder.id} alpha:")
