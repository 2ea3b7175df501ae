"""Submit refuses a job no GPU of the machine can ever hold, judged by the GPUs the daemon places on (issue 50 item 6).

A real `rlsup submit` (the CLI in this process), real SQLite, and a real daemon with fake GPUs where its view counts."""
from __future__ import annotations

from pathlib import Path


def gpu_job(harness, name: str, *, gpus: int = 1, gib: float = 0) -> Path:
    path = harness.job_file(name, gpus=gpus)
    path.write_text(path.read_text().replace(f"gpus = {gpus}\n", f"gpus = {gpus}\ngpu_memory_gb = {gib}\n"))
    return path


def line_of(path: Path, key: str) -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), start=1)
                if line.startswith(f"{key} ="))


def assert_refused(harness, path: Path, key: str, *fragments: str, options: tuple[str, ...] = ()) -> None:
    """Exit 2, one line naming file, line and field, and nothing queued or made; validate says the same."""
    code, out, err = harness.cli("submit", path, *options)
    assert code == 2 and out == "", (code, out, err)
    assert harness.cli("validate", path, *options) == (2, "", err)
    assert err.strip().splitlines() == [err.strip()], err
    assert err.startswith(f"{path}:{line_of(path, key)}: job.{key}: "), err
    for fragment in fragments:
        assert fragment in err, err
    assert harness.store.jobs() == []
    runs = harness.home / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_submit_refuses_memory_no_gpu_holds_and_more_gpus_than_exist(harness, monkeypatch) -> None:
    """issue 50 item 6: gpu_memory_gb = 40 on 16 GiB GPUs was queued without a word and waited for ever;
    gpus = 3 on a 2-GPU machine was queued with a warning only."""
    monkeypatch.setenv("RLSUP_FAKE_GPUS", "2")  # what this client sees: no daemon runs yet
    assert_refused(harness, gpu_job(harness, "large", gib=40), "gpu_memory_gb",
                   "needs 1 GPU with 40 GiB and this machine has none that large (2 GPUs, the largest of 16 GiB)",
                   "gpu_memory_gb = 16 or less")
    assert_refused(harness, gpu_job(harness, "many", gpus=3), "gpus", "needs 3 GPUs and this machine has 2",
                   "gpus = 2")
    assert_refused(harness, gpu_job(harness, "seeds", gpus=3), "gpus", "needs 3 GPUs", options=("--seeds", "1-2"))
    # Two GPUs of 12 GiB on a machine with one that large: the memory, on each, is what no pair holds.
    monkeypatch.setenv("RLSUP_FAKE_GPUS", "2x16GiB")
    assert_refused(harness, gpu_job(harness, "pair", gpus=2, gib=20), "gpu_memory_gb", "needs 2 GPUs with 20 GiB")


def test_submit_judges_by_the_running_daemons_gpus(harness, monkeypatch) -> None:
    """The daemon places the job: its hardware record wins over this client's own view of the machine."""
    harness.extra_environment["RLSUP_FAKE_GPUS"] = "1x8GiB"
    harness.start_daemon()
    harness.wait_for(lambda: harness.store.latest_hardware_sample(), timeout=30, what="the daemon's hardware record")
    monkeypatch.setenv("RLSUP_FAKE_GPUS", "4x80GiB")
    assert_refused(harness, gpu_job(harness, "large", gib=12), "gpu_memory_gb", "(1 GPU, the largest of 8 GiB)",
                   "gpu_memory_gb = 8 or less")
    assert_refused(harness, gpu_job(harness, "pair", gpus=2), "gpus", "needs 2 GPUs and this machine has 1")
    code, out, err = harness.cli("submit", gpu_job(harness, "fits", gib=6))
    assert code == 0 and "warning" not in err, err


def test_submit_refuses_nothing_on_a_guess_where_no_gpu_is_known(harness, monkeypatch) -> None:
    """No GPU seen by this client and no daemon's record of one: the machine may have GPUs it cannot read, so the job
    is queued, with a warning, and the daemon then holds it with its reason while it cannot place it."""
    monkeypatch.setenv("RLSUP_FAKE_GPUS", "0")
    harness.extra_environment["RLSUP_FAKE_GPUS"] = "0"
    code, out, err = harness.cli("submit", gpu_job(harness, "unknown", gpus=3, gib=40))
    assert code == 0 and out.strip().isdigit(), err
    assert "warning" in err and "needs 3 GPUs; this machine has 0" in err, err
    job_id = int(out)
    held = harness.wait_for(lambda: (job := harness.job(job_id)).reason and job, timeout=30, what="its reason")
    assert held.reason.startswith("held: needs 3 GPUs; this machine has 0"), held.reason
