"""A real daemon given numbers too large for a double or for a machine (issue 49 items 2, 3, 13 and 17)."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from rlsup_testing import copy_run, finished_cartpole, run_rlsup

from rlsup import client, hardware, paths
from rlsup.checkpoint.manifest import MANIFEST_CHECKSUM, MANIFEST_FILE, list_checkpoints, manifest_checksum
from rlsup.jobs.state import ACTIVE, State

HUNDREDS_OF_DIGITS = "1" + "0" * 400  # past a double's range: float() and math.isfinite raise OverflowError


def test_a_daemon_toml_number_of_hundreds_of_digits_keeps_the_old_settings_on_sighup(harness) -> None:
    """issue 49 item 2: float() in scheduler._checked raised OverflowError, which killed the daemon on SIGHUP and
    ended `rlsup daemon start` in a traceback; now a SettingsError naming the key, the old settings kept."""
    daemon = harness.start_daemon()
    # Its SIGHUP handler is set once its loop is about to run, just before it records this.
    harness.wait_for(lambda: [event for event in harness.events(None) if "daemon started" in event.message],
                     timeout=30, what="the daemon's loop")
    settings = harness.home / paths.DAEMON_SETTINGS
    settings.write_text(settings.read_text() + f"gpu_memory_margin_gib = {HUNDREDS_OF_DIGITS}\n")
    os.kill(daemon.pid, signal.SIGHUP)
    refused = harness.wait_for(lambda: [event for event in harness.events(None) if "not applied" in event.message],
                               timeout=30, what="the refusal of daemon.toml", report=harness.report)
    assert "gpu_memory_margin_gib: must be at most 1024" in refused[0].message, refused[0].message
    assert HUNDREDS_OF_DIGITS not in refused[0].message
    assert "gpu_memory_margin_gib" in harness.daemon_log()
    assert daemon.poll() is None and client.daemon_status(harness.home).pid == daemon.pid
    # The daemon goes on with the settings it had: a job still runs.
    job = harness.submit(harness.job_file("after", total_steps=300, checkpoint_every=0))
    harness.wait_state(job.id, State.DONE, timeout=120)

    assert harness.cli("daemon", "stop")[0] == 0
    code, _, err = harness.cli("daemon", "start")
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "gpu_memory_margin_gib: must be at most 1024" in err, err


def test_a_twenty_digit_fake_gpu_count_is_capped_and_a_gpu_job_runs(harness, monkeypatch) -> None:
    """issue 49 item 3: tuple(range(count)) overflowed in schedule() (the daemon died once a job was queued) and in
    `rlsup submit`'s GPU check (a traceback)."""
    count = "9" * 20
    monkeypatch.setenv(hardware.FAKE_GPUS_VARIABLE, count)  # the submit below reads it, as the daemon does
    harness.extra_environment[hardware.FAKE_GPUS_VARIABLE] = count
    daemon = harness.start_daemon()
    code, out, err = harness.cli("submit", harness.job_file("on-a-gpu", gpus=1, total_steps=1_000_000,
                                                            checkpoint_every=0))
    assert code == 0 and "Traceback" not in err, err
    job = harness.wait_state(int(out), *ACTIVE, timeout=60)
    assert job.gpus == "0"
    assert daemon.poll() is None
    assert harness.cli("kill", str(job.id))[0] == 0
    harness.wait_state(job.id, State.KILLED, timeout=60)


def test_a_hundred_thousand_fake_gpus_make_small_hardware_samples(harness) -> None:
    """issue 49 item 17: RLSUP_FAKE_GPUS=100000 made every stored hardware sample megabytes of JSON."""
    harness.settings(hardware_sample_s=0.2)
    harness.extra_environment[hardware.FAKE_GPUS_VARIABLE] = "100000"
    harness.start_daemon()
    samples = harness.wait_for(lambda: harness.store.hardware_samples(), timeout=30, what="a hardware sample")
    assert len(json.dumps(samples[-1])) < 20_000, f"{len(samples[-1]['gpus'])} GPUs in a sample"
    assert len(samples[-1]["gpus"]) == hardware.MAX_GPUS


def test_a_float_field_of_hundreds_of_digits_is_refused_by_the_edit_judge_and_status(harness) -> None:
    """issue 49 item 13: math.isfinite raised OverflowError in spec/values.py: the daemon's edit judge failed the
    job, and `rlsup status` of a queued job so edited ended in a traceback."""
    harness.settings(cpu_jobs=1)
    harness.start_daemon()
    running = harness.submit(harness.job_file("running", total_steps=1_000_000, checkpoint_every=0))
    queued = harness.submit(harness.job_file("queued"))
    harness.wait_step(running.id, 100)
    for job in (running, queued):
        spec = Path(job.spec_path)
        spec.write_text(spec.read_text().replace("lr = 1e-3", f"lr = {HUNDREDS_OF_DIGITS}"))
    line = next(number for number, text in enumerate(Path(running.spec_path).read_text().splitlines(), 1)
                if text.startswith("lr ="))
    refused = harness.wait_for(lambda: harness.events(running.id, "refused"), timeout=30, what="the edit refused",
                               report=lambda: harness.report(running.id))
    assert f"{running.spec_path}:{line}: dqn.lr: is too large" in refused[0].message, refused[0].message
    assert HUNDREDS_OF_DIGITS not in refused[0].message
    assert harness.job(running.id).state is State.RUNNING
    assert harness.job(queued.id).state is State.QUEUED

    code, out, err = harness.cli("status", str(queued.id))
    assert code == 0 and "Traceback" not in err and "does not load" in out + err, (out, err)
    code, _, err = harness.cli("validate", queued.spec_path)
    assert code == 2 and f"{queued.spec_path}:{line}: dqn.lr: is too large" in err, err
    assert harness.cli("daemon", "status")[0] == 0
    assert harness.cli("kill", str(running.id))[0] == 0
    harness.wait_state(running.id, State.KILLED, timeout=60)


@pytest.mark.parametrize("field,value", [("time", HUNDREDS_OF_DIGITS), ("time", "1e308"),
                                         ("bytes", HUNDREDS_OF_DIGITS)])
def test_a_received_checkpoint_of_huge_numbers_is_listed_and_played_without_a_traceback(tmp_path_factory, tmp_path,
                                                                                       field, value) -> None:
    """issue 49 (huge numbers in a received run): a manifest's time of 400 digits raised OverflowError in
    CheckpointEntry.from_manifest (`rlsup checkpoints` and `enjoy` of the run), one of 1e308 in clock_time's
    localtime (the checkpoint table), and a file's size of 400 digits in byte_size. The manifest's own checksum
    is made again, as whoever forged it can."""
    run_dir = copy_run(finished_cartpole(tmp_path_factory, 2_000), tmp_path)
    newest = list_checkpoints(run_dir)[-1].path / MANIFEST_FILE
    manifest = json.loads(newest.read_text())
    if field == "bytes":
        next(iter(manifest["files"].values()))["bytes"] = json.loads(value)
    else:
        manifest[field] = json.loads(value)
    manifest[MANIFEST_CHECKSUM] = manifest_checksum(manifest)
    newest.write_text(json.dumps(manifest))
    for arguments in (("checkpoints", run_dir), ("enjoy", run_dir, "--episodes", "1", "--render", "none")):
        result = run_rlsup(*arguments)
        assert result.returncode in (0, 1, 2) and "Traceback" not in result.stderr, result.stderr
        assert HUNDREDS_OF_DIGITS not in result.stdout + result.stderr
