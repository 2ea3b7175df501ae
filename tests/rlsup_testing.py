"""Small job files, real `rlsup` processes, and readers of what they leave behind, for every suite."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from rlsup.run import files as runfiles
from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.checkpoint.choose import latest_verified
from warm_commands import WarmProcess, warm_enough

SMALL_CARTPOLE = """
[job]
seed = {seed}
total_steps = {total_steps}
device = "{device}"
gpus = {gpus}
threads = 1
max_restarts = {max_restarts}
stop_grace_s = {stop_grace_s}

[env]
id = "CartPole-v1"

[dqn]
lr = {lr}
batch_size = 32
learning_starts = 200
train_every = 8
gradient_steps = 2
target_update_every = 100
hidden_sizes = [32, 32]
epsilon_end_step = 1_000

[[replay]]
capacity = 5_000

[checkpoint]
every_steps = {checkpoint_every}
keep = 3

[log]
every_steps = {log_every}

[eval]
every_steps = {eval_every}
episodes = 2
"""

SMALL_BREAKOUT = """
[job]
seed = 3
total_steps = {total_steps}
threads = 1

[env]
id = "ALE/Breakout-v5"
preset = "atari"
clip_rewards = true
episodic_life = true

[dqn]
batch_size = 8
learning_starts = 64
train_every = 4
target_update_every = 50
epsilon_end_step = 10_000

[[replay]]
capacity = 600

[checkpoint]
every_steps = 0

[log]
every_steps = 10
"""


def cartpole_text(*, total_steps: int = 2_000, seed: int = 7, gpus: int = 0, max_restarts: int = 3,
                  stop_grace_s: float = 60.0, checkpoint_every: int = 1000, log_every: int = 250,
                  eval_every: int = 0, lr: str = "1e-3", overlap: bool = False) -> str:
    """A CartPole DQN job small enough to train a few thousand steps in seconds."""
    text = SMALL_CARTPOLE.format(seed=seed, total_steps=total_steps, device="auto" if gpus else "cpu", gpus=gpus,
                                 max_restarts=max_restarts, stop_grace_s=stop_grace_s, lr=lr,
                                 checkpoint_every=checkpoint_every, log_every=log_every, eval_every=eval_every)
    return text.replace("[dqn]\n", "[dqn]\noverlap = true\n") if overlap else text


def cartpole_job(directory: Path, *, name: str = "cartpole", **fields) -> Path:
    path = directory / f"{name}.toml"
    path.write_text(cartpole_text(**fields))
    return path


SMALL_VTRACE = """
[job]
algo = "vtrace"
seed = {seed}
total_steps = {total_steps}
device = "cpu"
threads = 1

[env]
id = "CartPole-v1"

[vtrace]
{vtrace}{replays}
[checkpoint]
every_steps = 0
keep = 3

[log]
every_steps = {log_every}
"""


def vtrace_text(*, total_steps: int, serial: bool, seed: int = 5, log_every: int = 400,
                replays: tuple[dict, ...] = ({"kind": "queue", "capacity": 4},), **vtrace) -> str:
    """A CartPole V-trace job on the CPU with no interval checkpoints; vtrace holds its other [vtrace] fields."""
    def table(fields: dict) -> str:
        return "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())  # JSON's are TOML's

    return SMALL_VTRACE.format(seed=seed, total_steps=total_steps, log_every=log_every,
                               vtrace=table({**vtrace, "serial": serial}),
                               replays="".join(f"\n[[replay]]\n{table(replay)}" for replay in replays))


def video_start(path: Path):
    """(frame count, first frame as BGR or None) of an mp4, read back with OpenCV."""
    import cv2

    capture = cv2.VideoCapture(str(path))
    try:
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        readable, first = capture.read()
    finally:
        capture.release()
    return count, first if readable else None


def breakout_job(directory: Path, *, total_steps: int, name: str = "breakout") -> Path:
    path = directory / f"{name}.toml"
    path.write_text(SMALL_BREAKOUT.format(total_steps=total_steps))
    return path


def path_hiding(directory: Path, package: str) -> str:
    """A PYTHONPATH under which importing package fails as if it were not installed (for child processes)."""
    (directory / package).mkdir(parents=True, exist_ok=True)
    (directory / package / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    return os.pathsep.join([str(directory), os.environ.get("PYTHONPATH", "")])


def rlsup_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "rlsup.cli", *map(str, arguments)]


def run_rlsup(*arguments: str, timeout: float = 240, cold: bool = False) -> subprocess.CompletedProcess:
    """`rlsup ARGS` to its end; a torch command forked warm (warm_commands.py) unless cold: a test of start-up."""
    process = start_rlsup(*arguments, cold=cold)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """A directory that build() fills once per test session, shared by every xdist worker that asks for it.

    The first to ask builds it, holding a lock the others wait on; a build that failed half-way is built again
    by the next. Every test gets the same directory, so a test reads it or copies it (copy_run), never writes.
    """
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "built-once"
    shared.mkdir(exist_ok=True)
    directory, built = shared / name, shared / f"{name}.built"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, by a crash too
        if not built.exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            build(directory)
            built.touch()
    return directory


def trained_to_budget(job: Path, run_dir: Path) -> Path:
    """run_dir, after `rlsup run` of job into it ended well."""
    result = run_rlsup("run", job, "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    return run_dir


def finished_cartpole(tmp_path_factory, total_steps: int) -> Path:
    """A small CartPole run trained to its budget, a checkpoint every 500 steps: built once, shared (built_once)."""
    def train(directory: Path) -> None:
        trained_to_budget(cartpole_job(directory, total_steps=total_steps, checkpoint_every=500), directory / "run")

    return built_once(tmp_path_factory, f"finished-cartpole-{total_steps}", train) / "run"


def copy_run(source: Path, tmp_path: Path) -> Path:
    """A copy of a run, as a colleague's run is received."""
    run_dir = tmp_path / "run"
    shutil.copytree(source, run_dir)
    return run_dir


def assert_one_line_error(result: subprocess.CompletedProcess, code: int, *fragments: str) -> None:
    """The command failed with code and one line on stderr, no traceback, holding every fragment."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def start_rlsup(*arguments: str, cold: bool = False, new_session: bool = False) -> subprocess.Popen | WarmProcess:
    """`rlsup ARGS` started, its output on pipes: a torch command forked from the tests' warm server when its
    environment allows (warm_commands.py), else, or when cold, a fresh `python -m rlsup.cli` as a user runs it."""
    words, environment = [str(argument) for argument in arguments], os.environ.copy()
    if not cold and warm_enough(words, environment):
        return WarmProcess(words, environment, new_session)
    return subprocess.Popen(rlsup_command(*words), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environment, start_new_session=new_session)


def start_in_own_session(*arguments: str, cold: bool = False) -> subprocess.Popen | WarmProcess:
    """`rlsup ARGS` as the leader of its own process group, so a test can Ctrl-C the whole group."""
    return start_rlsup(*arguments, cold=cold, new_session=True)


@contextlib.contextmanager
def group_killed_on_exit(process: subprocess.Popen):
    """The process, whose whole process group is SIGKILLed on the way out if it still runs (a failed test)."""
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=30)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a dead child its parent has not reaped)."""
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    return False


def wait_for(condition: Callable[[], object], *, timeout: float = 120, interval: float = 0.02,
             what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def gpus_given(run_dir: str | Path, pid: int) -> str | None:
    """CUDA_VISIBLE_DEVICES as worker pid has it, from its line in worker.log (None until it has written it):
    the daemon forks its workers, and a fork's /proc/PID/environ shows its fork server's environment."""
    log = Path(run_dir) / "worker.log"
    found = re.search(rf"\(pid {pid}; CUDA_VISIBLE_DEVICES='([^']*)'\)", log.read_text()) if log.exists() else None
    return found.group(1) if found else None


def screen_shown(app, kind: type) -> bool:
    """Whether the app shows a screen of this kind with its widgets mounted: a screen is on the stack (and
    app.screen) before they are, and a query in that gap finds nothing (NoMatches)."""
    return isinstance(app.screen, kind) and app.screen.is_mounted


def trained_runs(tmp_path_factory, seeds: tuple[int, ...], total_steps: int = 1_500) -> list[Path]:
    """Run directories of short real CartPole runs (`rlsup run`), one per seed, with evaluations: built once
    and shared (built_once)."""
    def train(directory: Path) -> None:
        for seed in seeds:
            job = cartpole_job(directory, name=f"seed-{seed}", seed=seed, total_steps=total_steps, eval_every=500)
            trained_to_budget(job, directory / f"run-{seed}")

    name = f"trained-cartpole-{total_steps}-seeds-{'-'.join(map(str, seeds))}"
    directory = built_once(tmp_path_factory, name, train)
    return [directory / f"run-{seed}" for seed in seeds]


def metric_steps(run_dir: Path, kind: str) -> list[int]:
    return [record["step"] for record in runfiles.read_metrics(run_dir) if record["kind"] == kind]


def pause_when(process: subprocess.Popen, run_dir: Path, *, train_step: int) -> None:
    """SIGINT the worker once its metrics show training past train_step, as a user's Ctrl-C would."""
    wait_for(lambda: any(step >= train_step for step in metric_steps(run_dir, "train")) or process.poll() is not None,
             what=f"a train record past step {train_step}")
    assert process.poll() is None, f"the run ended before it could be paused: {process.communicate()}"
    process.send_signal(signal.SIGINT)


def pause_then_resume(job: Path, run_dir: Path, *, train_step: int, total_steps: int) -> None:
    """`rlsup run` paused by SIGINT past train_step, then resumed to its end by `rlsup run --resume`."""
    from rlsup.run.exit import EXIT_PAUSED, read_exit

    process = start_rlsup("run", job, "--run-dir", run_dir)
    pause_when(process, run_dir, train_step=train_step)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_PAUSED, stderr
    assert train_step <= read_exit(run_dir).step < total_steps
    result = run_rlsup("run", "--resume", run_dir)
    assert result.returncode == 0, result.stderr


def final_fingerprint(run_dir: Path) -> str:
    entry = latest_verified(run_dir)
    assert entry is not None, f"no verified checkpoint in {run_dir}"
    return entry.fingerprint


def checkpoint_reasons(run_dir: Path) -> list[tuple[int, str]]:
    return [(entry.step, entry.reason) for entry in list_checkpoints(run_dir)]


@contextlib.contextmanager
def small_filesystem(mountpoint: Path, size: str):
    """A real tmpfs of the given size mounted at mountpoint (made here) for the with-block; skips the test
    where mounting is not permitted (not root, or no CAP_SYS_ADMIN in a container)."""
    import pytest

    mountpoint.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mountpoint)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a {size} tmpfs to fill up here: {mounted.stderr.strip() or 'mount failed'}")
    try:
        yield mountpoint
    finally:
        # Lazy: a worker killed a moment ago may still hold a file open there.
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)


def train_seeds(job: Path, seeds: tuple[int, ...], directory: Path, timeout: float) -> list[Path]:
    """Train the example once per seed, side by side, exactly as `rlsup run` does for a user."""
    run_dirs, processes = [], []
    for seed in seeds:
        job_copy = directory / f"seed-{seed}.toml"
        job_copy.write_text(re.sub(r"(?m)^seed\s*=.*$", f"seed = {seed}", job.read_text(), count=1))
        run_dirs.append(directory / f"run-{seed}")
        processes.append(start_rlsup("run", job_copy, "--run-dir", run_dirs[-1]))
    for process in processes:
        _, stderr = process.communicate(timeout=timeout)
        assert process.returncode == 0, stderr
    return run_dirs


def train_seeds_until(job: Path, seeds: tuple[int, ...], directory: Path, timeout: float,
                      passed: Callable[[list[Path]], bool]) -> list[Path]:
    """Train the seeds one after another, stopping once passed(the runs so far) holds.

    A learning test asserts what one of its seeds does; a second seed trained only when the first fails
    fails the test exactly as often as training both would, at the cost of one run nearly every time."""
    run_dirs: list[Path] = []
    for seed in seeds:
        run_dirs += train_seeds(job, (seed,), directory, timeout)
        if passed(run_dirs):
            break
    return run_dirs


# ---------------------------------------------------------------------------------------------
# Stop signals at a command's start-up (the `rlsup run` and `rlsup enjoy` / `export` tests share these)

# What CPython itself prints when SIGINT lands while it imports `site`, before the `rlsup` script runs;
# seen under load at 50 ms. No program can install a handler that early.
INTERPRETER_START_UP_INTERRUPTED = "Fatal Python error: init_import_site"


@contextlib.contextmanager
def interrupts_at_their_default() -> Iterator[None]:
    """Children started inside begin with SIGINT at its default, as a terminal's foreground job does.

    A test run that is itself a script's background job ignores SIGINT, and its children inherit that: a
    SIGINT that reaches one before its first line (CPython's own start-up) is then discarded by the kernel,
    which no program can prevent (the loss CI saw at 0.0 s). A handler of ours is reset to the default in
    the child, where an inherited SIG_IGN is kept.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupted_before_python_ran(returncode: int, stderr: str) -> bool:
    """The signal came before rlsup's first line, and ended the process as it ends any program: killed by
    its default action, or CPython's own start-up cut. rlsup itself never ends by SIGINT (75 or 130)."""
    return returncode == -signal.SIGINT or stderr.startswith(INTERPRETER_START_UP_INTERRUPTED)


def past_first_line(pid: int) -> bool:
    """rlsup's first line has run in the process: its main thread holds SIGINT (rlsup/cli/__init__.py), or,
    once main() took over, catches SIGTERM (CPython catches SIGINT from its own start-up, but never SIGTERM)."""
    status = Path(f"/proc/{pid}/status").read_text()

    def has(field: str, number: int) -> bool:
        mask = int(re.search(rf"^{field}:\s*([0-9a-f]+)$", status, re.MULTILINE).group(1), 16)
        return bool(mask >> (number - 1) & 1)

    return has("SigBlk", signal.SIGINT) or has("SigCgt", signal.SIGTERM)


PLUGINS = Path(__file__).parent / "plugins"


def install_plugin(site: Path, package: str, entry_point: str = "", group: str = "") -> None:
    """What `pip install` of a test plugin (tests/plugins/PACKAGE) leaves in site-packages, with its entry
    point ("name = module:ALGORITHM") in one of rlsup's groups (by default its algorithms') when it declares one."""
    from rlsup.spec.registry import ENTRY_POINT_GROUP

    shutil.copytree(PLUGINS / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    dist_info = site / f"{package}-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package.replace('_', '-')}\nVersion: 0.1\n")
    if entry_point:
        (dist_info / "entry_points.txt").write_text(f"[{group or ENTRY_POINT_GROUP}]\n{entry_point}\n")


def forge_status(run_dir: Path, pid: int, seconds: float, **fields) -> None:
    """Write a status.json in the name of the worker pid, as anyone who can write the run can, over and over for
    seconds: the worker rewrites its own about once a second, and the daemon reads it four times a second."""
    from rlsup.run.status import Phase, WorkerStatus, write_worker_status

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        write_worker_status(Path(run_dir), WorkerStatus(pid=pid, phase=Phase.RUNNING, time=time.time(), **fields))
        time.sleep(0.02)


def recorded_play(run_dir: Path, episodes: int = 5, *, seed: int | None = None, epsilon: float = 0.5):
    """Every observation enjoy's greedy policy met while playing through enjoy's own code path, and its action
    (an action number, or a continuous action's vector): two arrays, one row a step.

    Some steps are random (evaluation's epsilon, never asking the policy), so that a briefly trained policy meets
    states where its greedy action differs: one action throughout would prove little. seed: the job's by default.
    """
    import numpy as np

    from rlsup.algos.evaluate import play_episodes
    from rlsup.enjoy import load_policy

    spec = runfiles.read_run_spec(run_dir)
    policy, _ = load_policy(run_dir, "latest")
    observations, actions = [], []

    def recording(batch):
        chosen = policy(batch)
        observations.append(batch[0].copy())
        actions.append(np.array(chosen[0]))
        return chosen

    play_episodes(recording, spec.env, seed=spec.job.seed if seed is None else seed, episodes=episodes,
                  epsilon=epsilon)
    return np.stack(observations), np.stack(actions)
