"""A user's env that raises, or hands out what no network can learn from, mid-run: one sentence naming it."""
from __future__ import annotations

import resource
import signal
from pathlib import Path

import pytest
from rlsup_testing import assert_one_line_error, run_rlsup
from user_envs import (FAULT_MESSAGE, FAULTY_IDS, HEAVY_ID, OLD_RESET_ID, OLD_STEP_ID, PACKAGE, UNMADE_ID,
                        UNMADE_MESSAGE, with_python_path, write_package)

from rlsup.run.exit import EXIT_ERROR, EXIT_SPEC, read_exit
from rlsup.jobs.state import State

JOB = """
[job]
seed = 3
algo = "{algo}"
total_steps = 2_000
threads = 1

[env]
id = "{env_id}"
imports = ["{package}"]
num_envs = {num_envs}
vectoriser = "{vectoriser}"

[{algo}]
{algo_fields}

[[replay]]
{replay}

[checkpoint]
every_steps = 0
"""
DQN_FIELDS = """batch_size = 16
learning_starts = 8
hidden_sizes = [16]"""
VTRACE_FIELDS = """actors = 2
envs_per_actor = 2
unroll_length = 5
batch_size = 4
hidden_sizes = [16]"""
DQN_REPLAY = "capacity = 1_000"
VTRACE_REPLAY = 'kind = "queue"\ncapacity = 4'

# What each fault's sentence says (the env's own words for one that raised).
SENTENCES = {
    "raise": [f"env {FAULTY_IDS['raise']!r} raised in step: RuntimeError: {' '.join(FAULT_MESSAGE.split())}",
              "its traceback is in worker.log"],
    "nan": [f"env {FAULTY_IDS['nan']!r} returned an observation holding NaN or infinity after 2 steps of its "
            "episode"],
    "huge reward": [f"env {FAULTY_IDS['huge reward']!r} returned the reward 1e+39 after 2 steps of its episode",
                    "float32"],
    "shape": [f"env {FAULTY_IDS['shape']!r} returned an observation of shape (3,) after 2 steps of its episode",
              "its observation space is Box(0.0, 1.0, (2,), float32)"],
}


@pytest.fixture
def user_envs(tmp_path, monkeypatch):
    directory = write_package(tmp_path / "user")
    monkeypatch.setenv("PYTHONPATH", with_python_path(directory))
    monkeypatch.syspath_prepend(str(directory))  # for a submit made in this process
    return directory


def faulty_run(directory: Path, fault: str, *, algo: str = "dqn", num_envs: int = 1,
               vectoriser: str = "serial", dqn_fields: str = DQN_FIELDS) -> tuple:
    job = directory / f"{algo}.toml"
    job.write_text(JOB.format(algo=algo, env_id=FAULTY_IDS[fault], package=PACKAGE, num_envs=num_envs,
                              vectoriser=vectoriser, algo_fields=dqn_fields if algo == "dqn" else VTRACE_FIELDS,
                              replay=DQN_REPLAY if algo == "dqn" else VTRACE_REPLAY))
    run_dir = directory / "run"
    return run_rlsup("run", job, "--run-dir", run_dir), run_dir


def assert_ended_with(result, run_dir: Path, fragments: list[str]) -> None:
    """A crash (the daemon would retry it from its newest checkpoint) told in one sentence on the terminal,
    the same in exit.json; a traceback, if any, only in worker.log."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == EXIT_ERROR, (result.returncode, result.stderr)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("rlsup: "), result.stderr
    for fragment in fragments:
        assert fragment in last, (fragment, last)
    assert read_exit(run_dir).reason == last.removeprefix("rlsup: ")
    # One line of the outcome on the terminal, not the worker's own "crashed" and "exit 1" records too.
    assert sum(fragments[0] in line for line in result.stderr.splitlines()) == 1, result.stderr


@pytest.mark.parametrize("fault", list(SENTENCES))
def test_a_faulty_env_ends_a_dqn_run_in_one_sentence_naming_it(fault, user_envs, tmp_path):
    result, run_dir = faulty_run(tmp_path, fault)
    assert_ended_with(result, run_dir, SENTENCES[fault])
    if fault == "raise":  # the env's own frame, where a user looks for the bug
        log = (run_dir / "worker.log").read_text()
        assert "Traceback" in log and f"raise RuntimeError({FAULT_MESSAGE!r})" in log, log


def test_a_fault_while_a_learner_round_runs_beside_the_envs_reads_the_same(user_envs, tmp_path):
    # Learning from step 1, a round every step: the third step, where the env raises, runs beside a round.
    overlapped = "batch_size = 1\nlearning_starts = 1\ntrain_every = 1\noverlap = true\nhidden_sizes = [16]"
    result, run_dir = faulty_run(tmp_path, "raise", dqn_fields=overlapped)
    assert_ended_with(result, run_dir, SENTENCES["raise"])
    assert f"raise RuntimeError({FAULT_MESSAGE!r})" in (run_dir / "worker.log").read_text()


@pytest.mark.parametrize("fault", ["raise", "nan"])
def test_a_faulty_env_in_an_env_process_reads_as_it_would_in_the_worker(fault, user_envs, tmp_path):
    result, run_dir = faulty_run(tmp_path, fault, num_envs=4, vectoriser="subprocess")
    assert_ended_with(result, run_dir, SENTENCES[fault])


@pytest.mark.parametrize("fault", ["raise", "huge reward"])
def test_a_faulty_env_in_a_vtrace_actor_process_is_named_not_lost(fault, user_envs, tmp_path):
    """An actor that failed used to exit before its report reached the learner: 'exited with code 0'."""
    result, run_dir = faulty_run(tmp_path, fault, algo="vtrace")
    assert_ended_with(result, run_dir, SENTENCES[fault])
    assert "exited with code" not in result.stderr


def trained_briefly(directory: Path, fault: str) -> Path:
    """A run of five steps: its final checkpoint comes before any env reaches its third episode."""
    job = directory / "short.toml"
    job.write_text(JOB.format(algo="dqn", env_id=FAULTY_IDS[fault], package=PACKAGE, num_envs=1,
                              vectoriser="serial", algo_fields=DQN_FIELDS, replay=DQN_REPLAY).replace("2_000", "5"))
    run_dir = directory / "short"
    result = run_rlsup("run", job, "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    return run_dir


def test_enjoy_of_a_faulty_env_says_what_it_did_in_one_line(user_envs, tmp_path):
    run_dir = trained_briefly(tmp_path, "nan")
    assert_one_line_error(run_rlsup("enjoy", run_dir, "--episodes", "3"), EXIT_SPEC, *SENTENCES["nan"])


def test_enjoy_and_export_of_a_run_whose_env_package_is_gone_say_so_in_one_line(user_envs, tmp_path, monkeypatch):
    """As on a laptop the run was copied to: the package that registers its env is not installed there."""
    run_dir = trained_briefly(tmp_path, "raise")
    monkeypatch.delenv("PYTHONPATH")
    (user_envs / PACKAGE).rename(tmp_path / "elsewhere")  # nor where the run's import-paths.json says
    missing = f"cannot import {PACKAGE!r} ([env] imports names it): ModuleNotFoundError"
    assert_one_line_error(run_rlsup("enjoy", run_dir), EXIT_SPEC, missing)
    out = tmp_path / "policy.pt"
    assert_one_line_error(run_rlsup("export", run_dir, "--format", "torchscript", "--out", out), EXIT_SPEC, missing)
    assert not list(tmp_path.glob("policy.pt*"))


@pytest.mark.parametrize("vectoriser", ["serial", "subprocess"])
def test_more_envs_than_memory_holds_are_refused_after_a_few_not_by_the_kernel_hours_in(vectoriser, user_envs,
                                                                                       tmp_path):
    """[env] num_envs goes up to 2**20: that many Atari envs would need a TiB. The worker measures what the
    envs it makes take, and refuses once the rest would not fit, rather than swap and be killed for memory."""
    job = tmp_path / "heavy.toml"
    job.write_text(JOB.format(algo="dqn", env_id=HEAVY_ID, package=PACKAGE, num_envs=100_000, vectoriser=vectoriser,
                              algo_fields=DQN_FIELDS, replay="capacity = 200_000"))
    result = run_rlsup("run", job, "--run-dir", tmp_path / "run", timeout=120)
    assert_one_line_error_at_the_end(result, EXIT_SPEC, f"making 100,000 {HEAVY_ID} envs would need about ",
                                     " of memory (8.", "lower [env] num_envs")


def test_more_envs_than_memory_holds_in_vtrace_actors_are_refused_as_at_start(user_envs, tmp_path):
    """Actors make their envs in their own processes, after the trainer: a refusal there is still a job that
    cannot run as written (exit 2, not retried), as it is when the worker makes a DQN vector."""
    job = tmp_path / "heavy.toml"
    job.write_text(JOB.format(algo="vtrace", env_id=HEAVY_ID, package=PACKAGE, num_envs=1, vectoriser="serial",
                              algo_fields=VTRACE_FIELDS.replace("envs_per_actor = 2", "envs_per_actor = 100_000"),
                              replay=VTRACE_REPLAY))
    result = run_rlsup("run", job, "--run-dir", tmp_path / "run", timeout=120)
    assert_one_line_error_at_the_end(result, EXIT_SPEC, f"making 100,000 {HEAVY_ID} envs would need about ")


def assert_one_line_error_at_the_end(result, code: int, *fragments: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, (result.returncode, result.stderr)
    last = result.stderr.strip().splitlines()[-1]
    for fragment in fragments:
        assert fragment in last, (fragment, last)


def test_an_env_whose_constructor_raises_is_refused_by_validate_in_one_line(user_envs, tmp_path):
    job = tmp_path / "unmade.toml"
    job.write_text(JOB.format(algo="dqn", env_id=UNMADE_ID, package=PACKAGE, num_envs=1, vectoriser="serial",
                              algo_fields=DQN_FIELDS, replay=DQN_REPLAY))
    line = next(number for number, text in enumerate(job.read_text().splitlines(), 1) if text.startswith("id ="))
    assert_one_line_error(run_rlsup("validate", job), EXIT_SPEC, f"{job}:{line}",
                          f"cannot make env {UNMADE_ID!r}: FileNotFoundError: {UNMADE_MESSAGE}")


@pytest.mark.parametrize("env_id, words", [
    (OLD_RESET_ID, "raised in reset: TypeError: "),  # Gymnasium resets with a seed
    (OLD_STEP_ID, "raised in step: ValueError: not enough values to unpack (expected 5, got 4)"),
])
def test_an_env_of_the_old_gym_api_is_refused_by_validate_not_by_its_worker(env_id, words, user_envs, tmp_path):
    """validate resets the env and takes one step, as the worker does first: an env written for the old Gym API
    is refused before it is queued, naming the file, the line of [env] id and the call that failed."""
    job = tmp_path / "old.toml"
    job.write_text(JOB.format(algo="dqn", env_id=env_id, package=PACKAGE, num_envs=1, vectoriser="serial",
                              algo_fields=DQN_FIELDS, replay=DQN_REPLAY))
    line = next(number for number, text in enumerate(job.read_text().splitlines(), 1) if text.startswith("id ="))
    assert_one_line_error(run_rlsup("validate", job), EXIT_SPEC, f"{job}:{line}", f"env {env_id!r} {words}")


def test_a_fault_that_a_restart_repeats_at_the_same_step_is_not_retried_again(harness, user_envs, tmp_path):
    """The daemon restarts a crash from its newest checkpoint, and the run resumes bit for bit: an env that
    faults at the same step with the same sentence will do so on every restart. The second time, the worker
    says so and exits 2, and the job fails with the env's sentence, not after max_restarts identical runs."""
    job = tmp_path / "dqn.toml"
    job.write_text(JOB.format(algo="dqn", env_id=FAULTY_IDS["nan"], package=PACKAGE, num_envs=1, vectoriser="serial",
                              algo_fields=DQN_FIELDS, replay=DQN_REPLAY))
    harness.start_daemon()
    submitted = harness.submit(job)
    failed = harness.wait_state(submitted.id, State.FAILED)
    assert failed.restarts == 1, harness.report(submitted.id)
    assert SENTENCES["nan"][0] in failed.reason and "as the run's previous worker" in failed.reason, failed.reason
    first_crash = [event.message for event in harness.events(submitted.id, "state")
                   if "restart 1 of 3" in event.message]
    assert first_crash and SENTENCES["nan"][0] in first_crash[0]  # a crash's reason carries the worker's sentence


@pytest.fixture
def no_core_files():
    """A segfaulting env must not leave a core file in the run or the checkout, whatever the machine's limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))  # inherited by every process started meanwhile
    yield
    resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))


def assert_stack_in_log(run_dir: Path) -> None:
    """faulthandler's dump, down to the env's own frame, where a user looks for the bug."""
    log = (run_dir / "worker.log").read_text()
    assert "Fatal Python error: Segmentation fault" in log, log
    assert f"{PACKAGE}/__init__.py\", line" in log and "in step" in log, log


def test_an_env_that_segfaults_in_the_worker_leaves_its_python_stack_in_worker_log(user_envs, no_core_files,
                                                                                   tmp_path):
    """A fault in native code ends the process at once: no sentence can be printed by it, but worker.log
    says where, and the daemon's reason (jobstate) points there."""
    result, run_dir = faulty_run(tmp_path, "segfault")
    assert result.returncode == -signal.SIGSEGV, (result.returncode, result.stderr)
    assert "Fatal Python error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert_stack_in_log(run_dir)


@pytest.mark.parametrize("algo", ["dqn", "vtrace"])
def test_an_env_that_segfaults_in_a_child_process_is_named_with_its_signal(algo, user_envs, no_core_files,
                                                                             tmp_path):
    """An env process or V-trace actor killed by SIGSEGV: the run's sentence names the signal and where the
    stack is, instead of 'exited with code -11'."""
    if algo == "dqn":
        result, run_dir = faulty_run(tmp_path, "child segfault", num_envs=4, vectoriser="subprocess")
    else:
        result, run_dir = faulty_run(tmp_path, "child segfault", algo="vtrace")
    who = "the env process of envs " if algo == "dqn" else "V-trace actor rlsup-actor-"  # slices follow the CPUs
    assert_ended_with(result, run_dir, [who, "was killed by signal 11 (SIGSEGV)",
                                        "; the Python stack at the fault is in worker.log"])
    assert result.stderr.strip().endswith("; the Python stack at the fault is in worker.log"), result.stderr
    assert "Fatal Python error" not in result.stderr, result.stderr
    assert_stack_in_log(run_dir)
