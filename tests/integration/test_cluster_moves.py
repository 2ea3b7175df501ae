"""A paused local job edited to a cluster: its run moves under run_root, surviving a daemon SIGKILLed mid-copy."""
from __future__ import annotations

from pathlib import Path

from rlsup import paths
from rlsup.checkpoint.choose import latest_verified
from rlsup.daemon import moves
from rlsup.jobs.state import State
from rlsup_testing import final_fingerprint, run_rlsup

BALLAST_BYTES = 400 << 20  # stands for a large replay: a copy slow enough for the kill to land in it


def test_a_daemon_killed_while_moving_a_run_finds_it_intact_and_moves_it_again(harness, tmp_path: Path) -> None:
    run_root = tmp_path / "cluster-runs"
    harness.settings()
    with open(harness.home / paths.DAEMON_SETTINGS, "a") as settings:
        # Nothing answers at port 9: the run moves all the same, then the job waits for the head.
        settings.write(f'\n[[cluster]]\nname = "lab"\naddress = "http://127.0.0.1:9"\nrun_root = "{run_root}"\n')
    harness.start_daemon()
    spec = harness.job_file("mover", total_steps=400_000, checkpoint_every=0)
    job = harness.submit(spec)
    old = Path(job.run_dir)
    harness.wait_step(job.id, 300)
    assert harness.cli("pause", str(job.id))[0] == 0
    harness.wait_state(job.id, State.PAUSED)
    checkpoint = latest_verified(old)
    with open(old / "ballast.bin", "wb") as ballast:
        ballast.truncate(BALLAST_BYTES)

    spec.write_text(spec.read_text().replace("[job]\n", '[job]\ncluster = "lab"\n', 1))
    harness.wait_for(lambda: harness.job(job.id).cluster == "lab", timeout=30, what="the edit to the cluster")
    assert harness.cli("resume", str(job.id))[0] == 0
    copying = run_root / f"{moves.MOVING_PREFIX}{old.name}"
    harness.wait_for(copying.exists, timeout=60, interval=0.002, what="the copy to begin")
    harness.kill_daemon()
    if copying.exists():  # nearly always: else the copy won the race and the kill landed at a later point
        assert Path(harness.job(job.id).run_dir) == old and not (run_root / old.name).exists()
        assert latest_verified(old) == checkpoint and (old / "ballast.bin").stat().st_size == BALLAST_BYTES

    harness.start_daemon()
    waiting = harness.wait_for(lambda: (lambda now: now if "trying again" in now.reason else None)(harness.job(job.id)),
                               timeout=120, what="the moved job waiting for the head",
                               report=lambda: harness.report(job.id))
    new = Path(waiting.run_dir)
    assert new == run_root / old.name and latest_verified(new).step == checkpoint.step
    harness.wait_for(lambda: not old.exists() and not (new / moves.NOTE_FILE).exists(), timeout=60,
                     what="the old run deleted")
    assert sorted(path.name for path in run_root.iterdir()) == [old.name]
    assert [event.kind for event in harness.events(job.id) if event.kind == "moved"] == ["moved"]
    deleted = harness.wait_for(lambda: [event.message for event in harness.events(job.id) if event.kind == "deleted"],
                               timeout=30, what="the deletion's event")
    assert deleted == [f"deleted old run {old}: the job's run moved to {new}"] and harness.job(job.id).moved_from is None

    # Back to this machine: no move, the run stays under run_root and resumes bit-exactly from there.
    budget = checkpoint.step + 1_000
    spec.write_text(spec.read_text().replace('cluster = "lab"\n', "").replace("total_steps = 400000",
                                                                             f"total_steps = {budget}"))
    done = harness.wait_state(job.id, State.DONE, timeout=240)
    assert Path(done.run_dir) == new and done.step == budget, harness.report(job.id)
    straight = harness.jobs_directory / "straight"
    result = run_rlsup("run", harness.job_file("straight", total_steps=budget, checkpoint_every=0),
                       "--run-dir", straight)
    assert result.returncode == 0, result.stderr
    assert final_fingerprint(new) == final_fingerprint(straight)
