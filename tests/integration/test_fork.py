"""rlsup fork under a real daemon: a fork continues its parent exactly, or with its own identity fields from the
parent's weights; its lineage shows in status; a refused identity edit names a fork command that works."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import torch
from rlsup_testing import assert_one_line_error, run_rlsup

from rlsup import paths
from rlsup.run import lineage
from rlsup.run import files as runfiles
from rlsup.checkpoint.manifest import list_checkpoints, read_manifest
from rlsup.checkpoint.store import load_checkpoint
from rlsup.jobs.state import State
from rlsup.jobs.store import Store


def checkpoint_at(run_dir: str | Path, step: int):
    return next(entry for entry in list_checkpoints(Path(run_dir)) if entry.step == step and entry.reason != "best")


def optimizer_of(entry) -> dict:
    return load_checkpoint(entry.path)[1]["trainer"]["learner"]["optimizer"]


def fork(harness, *arguments: str) -> int:
    code, out, err = harness.cli("fork", *arguments)
    assert code == 0, err
    return int(out.strip())


def every_step_file(harness, name: str, *, total_steps: int, lr: str) -> Path:
    """The parent's job with another lr, a checkpoint every step and a train record every 4: the first
    checkpoint comes before the first gradient step (every 8), so it holds the weights the fork started from."""
    path = harness.jobs_directory / f"{name}.toml"
    text = harness.job_text(total_steps=total_steps, checkpoint_every=1, log_every=4, lr=lr)
    path.write_text(text.replace("keep = 3", "keep = 100"))
    return path


def test_a_fork_continues_its_parent_or_starts_from_its_weights_with_its_own_lr(harness) -> None:
    harness.start_daemon()
    parent_file = harness.job_file("p", total_steps=2_000, checkpoint_every=500, eval_every=500)
    parent = harness.submit(parent_file)
    harness.wait_state(parent.id, State.DONE)
    forked_from = checkpoint_at(parent.run_dir, 1_000)

    # The parent's run's own job.toml: the fork follows a copy of it and is the parent's continuation.
    same = harness.job(fork(harness, parent.id, Path(parent.run_dir) / "job.toml", "--checkpoint", "1000"))
    assert (same.name, Path(same.spec_path).name) == ("p-fork", "source.toml")
    harness.wait_state(same.id, State.DONE)
    # Its own checkpoints begin after step 1000 (a run from scratch would also reach the parent's fingerprint).
    assert [entry.step for entry in list_checkpoints(Path(same.run_dir)) if entry.reason != "best"] == [1_500, 2_000]
    assert checkpoint_at(same.run_dir, 2_000).fingerprint == checkpoint_at(parent.run_dir, 2_000).fingerprint
    parent_records = runfiles.read_metrics(Path(parent.run_dir))
    assert runfiles.read_metrics(Path(same.run_dir))[:10] == parent_records[:10]  # the curve starts as the parent's

    # Another lr: the first checkpoint (before any gradient step) holds the parent's weights and optimizer,
    # and the train records say the new lr is in force.
    changed = harness.job(fork(harness, parent.id, every_step_file(harness, "b", total_steps=1_016, lr="5e-3"),
                               "--checkpoint", "1000"))
    harness.wait_state(changed.id, State.DONE)
    first = list_checkpoints(Path(changed.run_dir))[0]
    assert (first.step, first.fingerprint) == (1_001, forked_from.fingerprint)
    assert checkpoint_at(changed.run_dir, 1_016).fingerprint != forked_from.fingerprint
    inherited, parents = optimizer_of(first)["state"], optimizer_of(forked_from)["state"]
    assert inherited.keys() == parents.keys() and len(inherited) > 0
    assert all(torch.equal(inherited[key]["exp_avg"], parents[key]["exp_avg"]) for key in parents)
    learning_rates = {record["lr"] for record in runfiles.read_metrics(Path(changed.run_dir))
                      if record["kind"] == "train" and record["step"] > 1_000}
    assert learning_rates == {0.005}
    assert {record["lr"] for record in parent_records if record["kind"] == "train"} == {0.001}

    # --fresh-optimizer: the same weights, an optimizer that has taken no step.
    fresh = harness.job(fork(harness, parent.id, every_step_file(harness, "c", total_steps=1_008, lr="5e-3"),
                             "--checkpoint", "1000", "--fresh-optimizer", "--name", "c"))
    harness.wait_state(fresh.id, State.DONE)
    first = list_checkpoints(Path(fresh.run_dir))[0]
    assert (first.step, first.fingerprint) == (1_001, forked_from.fingerprint)
    assert optimizer_of(first)["state"] == {}

    # A fork of a fork: status shows the whole lineage, oldest first.
    grandchild = harness.job(fork(harness, changed.id, every_step_file(harness, "d", total_steps=1_020, lr="5e-3"),
                                  "--checkpoint", "1008"))
    code, out, _ = harness.cli("status", grandchild.id)
    assert code == 0
    assert f"lineage: job {parent.id} p at step 1,000 → job {changed.id} b at step 1,008 → this" in out
    assert f"forked from job {changed.id} b at step 1,008 (step-000000001008" in out
    recorded = json.loads((Path(grandchild.run_dir) / lineage.PARENT_FILE).read_text())
    assert (recorded["run_dir"], recorded["step"], recorded["fresh_optimizer"], recorded["replay"]) == (
        changed.run_dir, 1_008, False, True)
    assert recorded["fingerprint"] == checkpoint_at(changed.run_dir, 1_008).fingerprint
    harness.wait_state(grandchild.id, State.DONE)

    # From the best evaluation: a best checkpoint holds no replay, so the fork starts with an empty one.
    best = max((entry for entry in list_checkpoints(Path(parent.run_dir)) if entry.reason == "best"),
               key=lambda entry: entry.evaluation_mean)
    code, out, err = harness.cli("fork", parent.id, parent_file, "--checkpoint", "best", "--name", "from-best")
    assert code == 0 and f"note: {best.path.name} holds no replay" in err
    from_best = harness.job(int(out))
    recorded = lineage.read_parent(Path(from_best.run_dir))
    assert (recorded.step, recorded.reason, recorded.replay) == (best.step, "best", False)
    harness.wait_state(from_best.id, State.DONE)


def test_a_refused_identity_edit_names_a_fork_command_that_works(harness) -> None:
    harness.settings(cpu_jobs=2)  # the parent trains on while its fork starts
    harness.start_daemon()
    # Checkpoints far apart: the one the fork links must not be rotated away meanwhile (that is refused).
    path = harness.job_file("q", total_steps=1_000_000, checkpoint_every=2_000)
    original = path.read_text()
    parent = harness.submit(path)
    harness.wait_for(lambda: harness.newest_checkpoint(parent.run_dir), what="the parent's first checkpoint")

    path.write_text(original.replace("lr = 1e-3", "lr = 5e-3"))
    message = harness.wait_for(lambda: harness.events(parent.id, "refused"), what="the refusal")[0].message
    advice = message.splitlines()[-1]
    assert advice == (f"to train with it from this run's newest checkpoint: "
                      f"rlsup fork {parent.id} --checkpoint latest {shlex.quote(str(path))}")

    forked = harness.job(fork(harness, *shlex.split(advice.split(": ", 1)[1])[2:]))  # as pasted, less `rlsup fork`
    recorded = lineage.read_parent(Path(forked.run_dir))
    inherited = read_manifest(Path(forked.run_dir) / paths.INHERITED_CHECKPOINT)
    assert (recorded.step, recorded.fingerprint) == (inherited["step"], inherited["fingerprint"]) and recorded.step > 0
    assert "lr = 0.005" in (Path(forked.run_dir) / "job.toml").read_text()
    harness.wait_step(forked.id, recorded.step + 1)
    assert harness.job(parent.id).state is State.RUNNING  # the parent goes on with its own lr

    # An edit no checkpoint of this run can start: the message says to submit it as a new run instead.
    path.write_text(original.replace("hidden_sizes = [32, 32]", "hidden_sizes = [16]"))
    message = harness.wait_for(lambda: harness.events(parent.id, "refused")[1:], what="the second refusal")[0].message
    assert message.splitlines()[-1] == ("dqn.hidden_sizes differs from the parent's [32, 32]: the networks cannot "
                                        f"be loaded; as a new run: rlsup submit --copy {shlex.quote(str(path))}")


def test_a_fork_that_cannot_be_made_is_one_sentence_and_queues_nothing(harness, tmp_path: Path) -> None:
    parent_file = harness.job_file("r", total_steps=1_000, checkpoint_every=500)
    result = run_rlsup("run", parent_file)
    assert result.returncode == 0, result.stderr
    parent_run = result.stdout.splitlines()[0]

    def refused(text: str, *options: str, run: str = parent_run):
        new = tmp_path / "new.toml"
        new.write_text(text)
        return run_rlsup("fork", run, new, *options)

    good = harness.job_text(total_steps=2_000)
    assert_one_line_error(refused(good, run="no-such-job"), 2, "no job 'no-such-job'")
    assert_one_line_error(refused(good, "--checkpoint", "700"), 2, "no checkpoint at step 700",
                          "steps available: 500, 1000")
    assert_one_line_error(refused(good, "--checkpoint", "best"), 2, "has no best checkpoint yet")
    assert_one_line_error(refused(good.replace("hidden_sizes = [32, 32]", "hidden_sizes = [64, 64]")), 2,
                          "dqn.hidden_sizes differs from the parent's [32, 32]: the networks cannot be loaded")
    assert_one_line_error(refused(good.replace("[dqn]", '[dqn]\nactivation = "silu"')), 2,
                          'dqn.activation differs from the parent\'s "relu": ',
                          "the parent's weights were learned with it")
    assert_one_line_error(refused(good.replace("[dqn]", '[dqn]\noptimizer = "rmsprop"')), 2,
                          'dqn.optimizer differs from the parent\'s "adam": the saved optimizer state is for it',
                          "--fresh-optimizer")
    assert_one_line_error(refused(good.replace("capacity = 5_000", "capacity = 6_000")), 2,
                          "replay[0].capacity differs from the parent's 5000", "--no-replay")
    assert_one_line_error(refused(good.replace("seed = 3", "seed = 4")), 2, "job.seed differs from the parent's 3")
    assert_one_line_error(refused(harness.job_text(total_steps=1_000)), 2,
                          "job.total_steps = 1000 is not beyond the checkpoint's step 1000")
    tensors = checkpoint_at(parent_run, 500).path / "tensors.pt"
    data = bytearray(tensors.read_bytes())
    data[-100] ^= 0xFF
    tensors.write_bytes(bytes(data))
    assert_one_line_error(refused(good, "--checkpoint", "500"), 2, "step-000000000500 does not verify",
                          "checksum mismatch in tensors.pt")
    with Store(harness.home) as store:
        assert store.jobs() == []
    assert sorted(path.name for path in (harness.home / "runs").iterdir()) == [Path(parent_run).name]
    # A replay that changed shape is fine when the fork leaves the parent's replay behind, and another
    # optimizer when the fork starts its optimizer afresh.
    assert refused(good.replace("capacity = 5_000", "capacity = 6_000"), "--no-replay").returncode == 0
    assert refused(good.replace("[dqn]", '[dqn]\noptimizer = "rmsprop"'), "--fresh-optimizer").returncode == 0


def test_a_fork_and_validate_say_when_a_changed_schedule_start_has_no_effect(harness, tmp_path: Path) -> None:
    """A fork at 60,000 of a run whose lr_end_step is 40,000 trained at lr_end whatever its lr said, silently."""
    decaying = harness.job_text(total_steps=1_000, checkpoint_every=500).replace(
        "lr = 1e-3\n", "lr = 1e-3\nlr_end = 1e-4\nlr_end_step = 400\n")
    parent_file = tmp_path / "parent.toml"
    parent_file.write_text(decaying)
    result = run_rlsup("run", parent_file)
    assert result.returncode == 0, result.stderr
    parent_run = result.stdout.splitlines()[0]
    harness.settings(cpu_jobs=0)
    harness.start_daemon()

    new = tmp_path / "new.toml"
    # epsilon_end_step = 1,000 is the fork's very step: from it on, epsilon is epsilon_end whatever the start.
    new.write_text(decaying.replace("total_steps = 1000", "total_steps = 3000").replace("lr = 1e-3", "lr = 5e-4")
                   .replace("epsilon_end_step", "epsilon_start = 0.5\nepsilon_end_step"))
    code, out, err = harness.cli("fork", parent_run, new)
    assert code == 0, err
    # The message ended "; run PARENT_RUN", which read as the fork's own run.
    queued = next(line for line in err.splitlines() if line.startswith("queued "))
    assert queued.startswith(f"queued new as job {out.strip()} in {harness.job(int(out)).run_dir}, forked from ")
    assert queued.endswith(f"; the parent's run is {parent_run}"), queued
    warnings = [line for line in err.splitlines() if "no effect" in line]
    assert warnings == [
        f"warning: {new}: dqn.lr = 0.0005 has no effect from the fork's step 1,000 on: lr_end_step = 400 is past, "
        "so lr_end = 0.0001 holds",
        f"warning: {new}: dqn.epsilon_start = 0.5 has no effect from the fork's step 1,000 on: "
        "epsilon_end_step = 1,000 is that very step, so epsilon_end = 0.01 holds"], err
    # An lr whose schedule has not ended at the fork's step does change the run: nothing to say.
    new.write_text(decaying.replace("total_steps = 1000", "total_steps = 3000").replace("lr = 1e-3", "lr = 5e-4")
                   .replace("lr_end_step = 400", "lr_end_step = 2000"))
    code, _, err = harness.cli("fork", parent_run, new, "--name", "later-end")
    assert code == 0 and "no effect" not in err, err

    # validate: an lr whose schedule ends before learning starts is never used by any update.
    early = tmp_path / "early.toml"
    early.write_text(decaying.replace("lr_end_step = 400", "lr_end_step = 100"))
    code, out, err = harness.cli("validate", early)
    assert code == 0 and ": ok (" in out
    assert f"{early}: dqn.lr = 0.001 has no effect: lr_end_step = 100 comes before learning_starts = 200, " \
           "so every update uses lr_end = 0.0001" in err, err


def test_a_queued_fork_stands_at_the_step_it_starts_from(harness, tmp_path: Path) -> None:
    """Issue 50 item 12: a fork from step 1,000 read "0/3,000" until its worker first reported; its job starts at
    its parent's checkpoint step, in the store and so in every view (status, list, the TUI, an experiment's row)."""
    parent_run = tmp_path / "parent"
    trained = run_rlsup("run", harness.job_file("parent", total_steps=1_000, checkpoint_every=500), "--run-dir",
                        parent_run)
    assert trained.returncode == 0, trained.stderr
    harness.settings(cpu_jobs=0)  # the fork stays queued
    harness.start_daemon()
    forked = harness.job(fork(harness, parent_run, harness.job_file("longer", total_steps=3_000),
                              "--checkpoint", "1000"))
    assert (forked.state, forked.step) == (State.QUEUED, 1_000)
    code, out, _ = harness.cli("status", str(forked.id))
    assert code == 0 and "step 1,000 of 3,000" in out, out
