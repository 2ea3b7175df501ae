"""A run directory received from someone else is data: its import-paths.json, and modules dropped into it, never
run while rlsup exports, plays, forks or resumes it; a run of this user's own still finds its env modules."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rlsup_testing import cartpole_job, run_rlsup, vtrace_text
from user_envs import PACKAGE, WALK_ID, write_package

from rlsup import paths
from rlsup.jobs.state import State

# Modules torch, sympy, onnx and gymnasium try when they are there, and those Python runs itself at start-up:
# each one, imported from a hostile directory, leaves a file named after it in the marker directory.
BAIT = ("tqdm", "dill", "opt_einsum", "pydot", "gmpy2", "triton", "sitecustomize", "usercustomize")
# Dropped into the run directory itself: what a worker, and the `-c` of an env process or a V-trace actor
# (multiprocessing's spawn), import first.
RUN_BAIT = ("gymnasium", "numpy", "torch", "rlsup", "multiprocessing", *BAIT)


def bait(directory: Path, names: tuple[str, ...], markers: Path) -> Path:
    """directory, holding a module for each name that leaves a marker (named with its pid) when imported."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        marker = str(markers / f"{directory.name}-{name}-")
        (directory / f"{name}.py").write_text(f"import os\nopen({marker!r} + str(os.getpid()), 'w').close()\n")
    return directory


def poison(run_dir: Path, tmp_path: Path) -> Path:
    """Make run_dir as a stranger could hand it over: import-paths.json naming a directory of bait (absolute,
    and relative to the cwd the commands run in), and bait in the run directory itself. The marker directory."""
    markers = tmp_path / "markers"
    markers.mkdir(exist_ok=True)
    evil = bait(tmp_path / "evil", BAIT, markers)
    bait(tmp_path / "relative", BAIT, markers)
    bait(run_dir, RUN_BAIT, markers)
    (run_dir / paths.IMPORT_PATHS).write_text(json.dumps({"sys_path": [str(evil), "relative", str(run_dir)]}))
    return markers


def rlsup_in(cwd: Path, *arguments: object, timeout: float = 240) -> subprocess.CompletedProcess:
    """The `rlsup` program, as a user types it, run in cwd."""
    program = shutil.which("rlsup", path=os.path.dirname(sys.executable)) or "rlsup"
    return subprocess.run([program, *map(str, arguments)], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=os.environ.copy())


def fired(markers: Path) -> list[str]:
    return sorted(path.name for path in markers.iterdir())


def subprocess_cartpole(directory: Path, *, total_steps: int, name: str = "cartpole") -> Path:
    """A CartPole job stepping its two envs in an env process (the subprocess vectoriser) as well."""
    job = cartpole_job(directory, name=name, total_steps=total_steps, checkpoint_every=300, log_every=100)
    job.write_text(job.read_text().replace("\n[env]\n", '\n[env]\nnum_envs = 2\nvectoriser = "subprocess"\n'))
    return job


def test_a_received_runs_import_paths_and_modules_never_run_in_export_enjoy_or_resume(tmp_path) -> None:
    run_dir = tmp_path / "received"
    made = run_rlsup("run", subprocess_cartpole(tmp_path, total_steps=600), "--run-dir", run_dir)
    assert made.returncode == 0, made.stderr
    markers = poison(run_dir, tmp_path)

    # From the directory that holds "relative", and from inside the run itself.
    exported = rlsup_in(tmp_path, "export", run_dir, "--format", "torchscript", "--out", tmp_path / "policy.pt")
    assert exported.returncode == 0, exported.stderr
    assert "--trust-imports" in exported.stderr and str(run_dir) in exported.stderr, exported.stderr
    played = rlsup_in(run_dir, "enjoy", run_dir, "--episodes", "1")
    assert played.returncode == 0, played.stderr
    longer = subprocess_cartpole(tmp_path, total_steps=900, name="longer")
    resumed = rlsup_in(run_dir, "run", "--resume", run_dir, longer)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / paths.STATUS_FILE).read_text())["step"] == 900
    assert fired(markers) == []


def test_a_paused_daemon_job_resumes_and_forks_without_running_what_was_dropped_into_its_run(harness, tmp_path):
    harness.start_daemon()
    job = harness.submit(subprocess_cartpole(harness.jobs_directory, total_steps=20_000))
    harness.wait_step(job.id, 300)
    code, _, err = harness.cli("pause", str(job.id))
    assert code == 0, err
    harness.wait_state(job.id, State.PAUSED)
    run_dir = Path(job.run_dir)
    markers = poison(run_dir, tmp_path)
    code, _, err = harness.cli("resume", str(job.id))
    assert code == 0, err
    harness.wait_step(job.id, 900)  # trained on from the resume's checkpoint, in a fresh worker
    code, _, err = harness.cli("pause", str(job.id))
    assert code == 0, err
    assert harness.wait_state(job.id, State.PAUSED, State.FAILED).state is State.PAUSED, harness.report(job.id)
    assert "import-paths.json" in (run_dir / paths.LOG_FILE).read_text()  # said, not silently dropped

    forked = rlsup_in(tmp_path, "fork", run_dir, subprocess_cartpole(tmp_path, total_steps=1_500, name="child"))
    assert forked.returncode == 0, forked.stderr
    child = harness.job(int(forked.stdout.split()[0]))
    assert harness.wait_state(child.id, State.DONE, State.FAILED).state is State.DONE, harness.report(child.id)
    assert not (Path(child.run_dir) / paths.IMPORT_PATHS).exists()  # nothing of the parent's was carried over
    assert fired(markers) == []


def test_a_received_runs_env_package_is_used_only_when_the_user_trusts_its_import_paths(tmp_path) -> None:
    """The same run made by someone else: its env package is where import-paths.json says, but only
    --trust-imports puts it on sys.path; without it, one line says which run and how."""
    package = write_package(tmp_path / "theirs")
    job = tmp_path / "walk.toml"
    job.write_text(cartpole_job(tmp_path).read_text().replace('id = "CartPole-v1"',
                                                              f'id = "{WALK_ID}"\nimports = ["{PACKAGE}"]')
                   .replace("total_steps = 2000", "total_steps = 400"))
    run_dir = tmp_path / "run"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(package),
                                                                             os.environ.get("PYTHONPATH")]))}
    made = subprocess.run([sys.executable, "-m", "rlsup.cli", "run", str(job), "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=240, env=environment)
    assert made.returncode == 0, made.stderr
    recorded = json.loads((run_dir / paths.IMPORT_PATHS).read_text())
    assert recorded["sys_path"] == [str(package)]
    # Handed over: the same entries, as someone else's rlsup wrote them.
    (run_dir / paths.IMPORT_PATHS).write_text(json.dumps({"sys_path": [str(package)]}))

    refused = rlsup_in(tmp_path, "enjoy", run_dir, "--episodes", "1")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert f"rlsup enjoy --trust-imports {run_dir}" in refused.stderr or "--trust-imports" in refused.stderr
    trusted = rlsup_in(tmp_path, "enjoy", "--trust-imports", run_dir, "--episodes", "1")
    assert trusted.returncode == 0, trusted.stderr


def test_a_daemon_whose_python_path_names_a_run_starts_its_worker_without_it(harness, tmp_path):
    """A PYTHONPATH holding a run directory (a user's mistake, or a run_root entry) would have Python run its
    sitecustomize.py and prefer its numpy.py in the worker and each env process: the daemon leaves it out."""
    job = harness.submit(subprocess_cartpole(harness.jobs_directory, total_steps=600))
    run_dir = Path(job.run_dir)
    markers = poison(run_dir, tmp_path)
    (run_dir / paths.IMPORT_PATHS).unlink()  # this user's own run: only the PYTHONPATH is wrong
    harness.extra_environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(run_dir),
                                                                           os.environ.get("PYTHONPATH")]))
    daemon = harness.start_daemon()  # whose own start-up Python runs the run's sitecustomize.py: not rlsup's to stop
    assert harness.wait_state(job.id, State.DONE, State.FAILED).state is State.DONE, harness.report(job.id)
    assert [marker for marker in fired(markers) if not marker.endswith(f"-{daemon.pid}")] == []


def test_a_v_trace_jobs_actors_and_their_env_processes_import_nothing_from_a_received_run(harness, tmp_path):
    path = harness.jobs_directory / "vtrace.toml"
    path.write_text(vtrace_text(total_steps=2_000, serial=False, actors=2, envs_per_actor=2, unroll_length=10,
                                batch_size=4, hidden_sizes=[16])
                    .replace("\n[env]\n", '\n[env]\nvectoriser = "subprocess"\n'))
    job = harness.submit(path)
    markers = poison(Path(job.run_dir), tmp_path)
    harness.start_daemon()
    assert harness.wait_state(job.id, State.DONE, State.FAILED).state is State.DONE, harness.report(job.id)
    assert fired(markers) == []


def test_a_v_trace_resume_typed_inside_a_received_run_starts_no_process_there(tmp_path):
    """`cd RUN; rlsup run --resume .`: multiprocessing starts V-trace's actors and its resource tracker with `-c`,
    which puts the cwd first on their sys.path, before the standard library."""
    job = tmp_path / "vtrace.toml"
    job.write_text(vtrace_text(total_steps=1_000, serial=False, actors=2, envs_per_actor=2, unroll_length=10,
                               batch_size=4, hidden_sizes=[16]))
    run_dir = tmp_path / "received"
    made = run_rlsup("run", job, "--run-dir", run_dir)
    assert made.returncode == 0, made.stderr
    markers = poison(run_dir, tmp_path)
    longer = tmp_path / "longer.toml"
    longer.write_text(job.read_text().replace("total_steps = 1000", "total_steps = 2000"))
    resumed = rlsup_in(run_dir, "run", "--resume", ".", longer)
    assert resumed.returncode == 0, resumed.stderr
    assert fired(markers) == []
