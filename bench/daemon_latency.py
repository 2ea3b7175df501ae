"""Pause and resume latency of CartPole DQN under the daemon, the daemon's idle CPU with a full queue,
(--warm-start) resumes with workers forked by the warm start beside fresh ones, and (--backends local,ray)
submit-to-first-step and pause-to-checkpoint on this machine vs a loopback Ray head.

    python bench/daemon_latency.py [--rounds 3] [--warm-start | --backends local,ray]

The result (bench/results_format.py) goes to --out, by default results/daemon-latency[-warm-start|-BACKENDS].json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

import results_format  # bench/ beside this script
from rlsup.run import files as runfiles
from rlsup.run.exit import read_exit
from rlsup.run.status import Phase, WorkerStatus, read_worker_status
from rlsup import client
from rlsup.jobs.state import Desired, State
from rlsup.jobs.store import Store

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "jobs" / "cartpole-dqn.toml"


def wait_for(condition, *, timeout: float = 120.0, interval: float = 0.002):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition not reached")


def long_example(directory: Path, name: str) -> Path:
    """The example job with a budget too large to finish and no evaluations in the way."""
    text = EXAMPLE.read_text().replace("total_steps = 50_000", "total_steps = 10_000_000")
    text = text.replace("every_steps = 5_000\nepisodes = 10", "every_steps = 0\nepisodes = 10")
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


def start_daemon(home: Path) -> psutil.Process:
    return psutil.Process(client.ensure_daemon(home).pid)


def measure_pause(store: Store, job_id: int) -> dict:
    """Intent written -> worker gone with a pause checkpoint (and -> the daemon records paused)."""
    job = store.job(job_id)
    worker = psutil.Process(job.pid)
    asked = time.time()
    store.set_desired(job_id, Desired.PAUSED)
    wait_for(lambda: not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE)
    exited = time.time()
    record = read_exit(Path(job.run_dir))
    assert record and record.code == 75, record
    wait_for(lambda: store.job(job_id).state is State.PAUSED)
    recorded = time.time()
    signalled = next(event.time for event in reversed(store.events(job_id, 20)) if event.to_state == "pausing")
    return {"signal": signalled - asked, "exit": exited - asked, "exit_json": record.time - asked,
            "state": recorded - asked, "step": record.step}


def measure_resume(store: Store, job_id: int, paused_step: int) -> dict:
    """Intent written -> spawned -> the resumed worker's training loop running -> a step beyond the pause."""
    run_dir = Path(store.job(job_id).run_dir)
    asked = time.time()
    store.set_desired(job_id, Desired.RUNNING)
    job = wait_for(lambda: (lambda found: found if found.pid else None)(store.job(job_id)))
    spawned = time.time()
    status = wait_for(lambda: (lambda found: found if found and found.pid == job.pid
                                and found.phase == Phase.RUNNING else None)(read_worker_status(run_dir)))
    worker_cpu = sum(psutil.Process(job.pid).cpu_times()[:2])  # its own: a forked one's imports were its server's
    # The first train record after the pause step tells when training had visibly moved on.
    record = wait_for(lambda: next((r for r in runfiles.read_metrics(run_dir)
                                    if r.get("kind") == "train" and r["step"] > paused_step and r["t"] > asked), None),
                      interval=0.02)
    return {"spawn": spawned - asked, "loop": status.time - asked, "train_record": record["t"] - asked,
            "train_record_step": record["step"] - paused_step, "worker_cpu": worker_cpu}


def latency(home: Path, directory: Path, rounds: int) -> dict[str, list[float]]:
    """Each pause's and resume's seconds from its intent, by what was reached."""
    with Store(home) as store:
        job = client.submit(long_example(directory, "latency"), home=home)
        run_dir = Path(job.run_dir)
        wait_for(lambda: ((read_worker_status(run_dir) or WorkerStatus()).step or 0) >= 3_000, timeout=300, interval=0.05)
        pauses, resumes = [], []
        for _ in range(rounds):
            pause = measure_pause(store, job.id)
            pauses.append(pause)
            resumes.append(measure_resume(store, job.id, pause["step"]))
            wait_for(lambda: ((read_worker_status(run_dir) or WorkerStatus()).step or 0) >= pause["step"] + 2_000,
                     timeout=300, interval=0.05)
        store.set_desired(job.id, Desired.KILLED)
        wait_for(lambda: store.job(job.id).state is State.KILLED)
    figures = {"pause: intent -> SIGINT sent by the daemon": [p["signal"] for p in pauses],
               "pause: intent -> worker exited with checkpoint": [p["exit"] for p in pauses],
               "pause: intent -> exit.json written": [p["exit_json"] for p in pauses],
               "pause: intent -> daemon records paused": [p["state"] for p in pauses],
               "resume: intent -> worker spawned": [r["spawn"] for r in resumes],
               "resume: intent -> training loop running (status.json)": [r["loop"] for r in resumes],
               "resume: the new worker's CPU until its loop runs": [r["worker_cpu"] for r in resumes],
               "resume: intent -> first train record after the pause": [r["train_record"] for r in resumes]}
    for label, values in figures.items():
        show(label, values, note="" if "first train record" not in label else
             f"(records every 1000 steps; first came {statistics.median(r['train_record_step'] for r in resumes):.0f}"
             " steps after the pause)")
    return figures


def show(label: str, values: list[float], note: str = "") -> None:
    milliseconds = [value * 1000 for value in values]
    text = f"median {statistics.median(milliseconds):8.1f} ms  (min {min(milliseconds):.1f}, max {max(milliseconds):.1f})"
    print(f"{label:58} {text} {note}".rstrip())


def idle_cpu(home: Path, directory: Path, seconds: float) -> dict[str, list]:
    """3 paused and 50 queued jobs that cannot start (cpu_jobs = 0): what the daemon costs at rest."""
    client.stop_daemon(home)
    (home / "daemon.toml").write_text("cpu_jobs = 0\n")
    spec = long_example(directory, "idle")
    jobs = [client.submit(spec, home=home, start_daemon=False, name=f"idle-{index}") for index in range(53)]
    with Store(home) as store:
        for job in jobs[:3]:
            store.set_desired(job.id, Desired.PAUSED)
    daemon = start_daemon(home)
    with Store(home) as store:
        wait_for(lambda: sum(j.state is State.PAUSED for j in store.jobs()) >= 3, timeout=30, interval=0.05)
        counts: dict[str, int] = {}
        for job in store.jobs():
            counts[job.state.value] = counts.get(job.state.value, 0) + 1
    time.sleep(2.0)  # let start-up settle before measuring
    before, started = daemon.cpu_times(), time.monotonic()
    time.sleep(seconds)
    after, elapsed = daemon.cpu_times(), time.monotonic() - started
    used = (after.user - before.user) + (after.system - before.system)
    print(f"idle daemon over {elapsed:.0f} s with {counts}: {used:.3f} CPU s = {100 * used / elapsed:.2f}% of one core"
          f" (user {after.user - before.user:.3f} s, system {after.system - before.system:.3f} s)")
    return {f"the daemon with {', '.join(f'{count} {state}' for state, count in counts.items())} jobs":
            [elapsed, used, 100 * used / elapsed]}


def first_step_and_pause(home: Path, spec: Path, cluster: str | None) -> dict:
    """Submit -> the worker's first status with a step; pause intent -> exit.json (after the pause checkpoint)."""
    job = client.submit(spec, home=home, cluster=cluster, copy=True)
    run_dir = Path(job.run_dir)
    status = wait_for(lambda: (lambda found: found if found and found.step else None)(
        read_worker_status(run_dir)), timeout=300, interval=0.01)
    with Store(home) as store:
        wait_for(lambda: store.job(job.id).state is State.RUNNING, timeout=60)
        asked = time.time()
        store.set_desired(job.id, Desired.PAUSED)
        record = wait_for(lambda: (lambda found: found if found and found.code == 75 else None)(
            read_exit(run_dir)), timeout=120, interval=0.005)
        wait_for(lambda: store.job(job.id).state is State.PAUSED, timeout=60, interval=0.005)
        recorded = time.time()
        store.set_desired(job.id, Desired.KILLED)
    return {"first_step": status.time - job.submitted, "checkpoint": record.time - asked,
            "paused": recorded - asked}


def backends(scratch: Path, names: list[str], rounds: int) -> dict[str, list[float]]:
    """The same job on each backend: a fresh job per round, so each start is a cold one."""
    sys.path.insert(0, str(ROOT / "tests"))
    from ray_head import RayHead

    home = scratch / "backends"
    home.mkdir(mode=0o700)
    os.environ["RLSUP_HOME"] = str(home)
    head = RayHead(num_cpus=2, num_gpus=0, python_path=str(ROOT)) if "ray" in names else None
    try:
        settings = "cpu_jobs = 1\n"
        if head is not None:
            head.wait_ready()
            settings += f'[[cluster]]\nname = "bench"\naddress = "{head.address}"\nrun_root = "{scratch / "ray-runs"}"\n'
        (home / "daemon.toml").write_text(settings)
        spec = long_example(scratch, "backend")
        figures = {}
        for name in names:
            results = [first_step_and_pause(home, spec, "bench" if name == "ray" else None) for _ in range(rounds)]
            figures |= {f"{name}: submit -> first step in status.json": [r["first_step"] for r in results],
                        f"{name}: pause intent -> pause checkpoint + exit.json": [r["checkpoint"] for r in results],
                        f"{name}: pause intent -> daemon records paused": [r["paused"] for r in results]}
        for label, values in figures.items():
            show(label, values)
        return figures
    finally:
        stop_everything(home)
        if head is not None:
            head.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="pause/resume rounds")
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--backends", metavar="NAMES", help="only compare backends, e.g. local,ray")
    parser.add_argument("--warm-start", action="store_true",
                        help="only the pause/resume rounds, with daemon.toml's warm_start false, then true")
    results_format.add_out_argument(parser, "results/daemon-latency[-warm-start|-BACKENDS].json")
    args = parser.parse_args()
    run = results_format.started("bench/daemon_latency.py")
    with tempfile.TemporaryDirectory(prefix="rlsup-bench-") as scratch:
        home, directory = Path(scratch) / "home", Path(scratch)
        home.mkdir(mode=0o700)
        os.environ["RLSUP_HOME"] = str(home)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        if args.backends:
            names = args.backends.split(",")
            write_result(args, run, f"daemon-latency-{'-'.join(names)}", [spread_table(
                "Submit and pause on each backend, a fresh job a round", backends(Path(scratch), names, args.rounds))])
            return 0
        if args.warm_start:
            sides = {}
            for warm in (False, True):
                (home / "daemon.toml").write_text(f"warm_start = {str(warm).lower()}\n")
                print(f"-- warm_start = {str(warm).lower()}")
                try:
                    sides[warm] = latency(home, directory, args.rounds)
                finally:
                    stop_everything(home)
            write_result(args, run, "daemon-latency-warm-start", [warm_table(sides, args.rounds)])
            return 0
        try:
            tables = [spread_table("Pause and resume", latency(home, directory, args.rounds))]
            tables.append(results_format.measurement(
                "The daemon at rest, cpu_jobs = 0", "home", [results_format.column("over", "s", 0),
                                                             results_format.column("its CPU", "CPU s", 3),
                                                             results_format.column("of one core", "%", 2)],
                idle_cpu(home, directory, args.idle_seconds)))
        finally:
            stop_everything(home)
        write_result(args, run, "daemon-latency", tables)
    return 0


def spread_table(name: str, figures: dict[str, list[float]]) -> dict:
    """Each figure's median, lowest and highest over the rounds, in ms."""
    column = results_format.column
    return results_format.measurement(
        name, "from", [column("median", "ms", 1), column("lowest", "ms", 1), column("highest", "ms", 1)],
        {label: [1000 * statistics.median(values), 1000 * min(values), 1000 * max(values)]
         for label, values in figures.items()}, "CartPole DQN (jobs/cartpole-dqn.toml with a budget it cannot reach).")


def warm_table(sides: dict[bool, dict[str, list[float]]], rounds: int) -> dict:
    """Each figure's median with fresh workers beside the warm start's forked ones."""
    column = results_format.column
    return results_format.measurement(
        f"Pause and resume, medians of {rounds} rounds", "from",
        [column("fresh interpreter, warm_start = false", "ms", 0), column("forked, warm_start = true", "ms", 0)],
        {label: [1000 * statistics.median(values), 1000 * statistics.median(sides[True][label])]
         for label, values in sides[False].items()}, "CartPole DQN (jobs/cartpole-dqn.toml with a budget it cannot "
        "reach).")


def write_result(args: argparse.Namespace, run: dict, name: str, tables: list[dict]) -> None:
    rows = tables[0]["rows"]
    told = next((row for row in rows if "training loop running" in row["name"]), rows[0])  # what a user waits for
    finding = f"{told['name']}: a median of {told['values'][0]:,.0f} ms" + (
        f" for a fresh interpreter, {told['values'][1]:,.0f} ms forked." if name.endswith("warm-start") else ".")
    results_format.write_figures(args, run, name, f"The daemon's latency: {tables[0]['name']}", tables, finding)


def stop_everything(home: Path) -> None:
    """Kill the daemon, its fork server and any worker of this scratch home: a bench leaves nothing running."""
    status = client.daemon_status(home)
    if status.pid:
        os.kill(status.pid, 9)
    with Store(home) as store:
        pids = {job.pid for job in store.jobs() if job.pid}
    pids |= {process.pid for process in psutil.process_iter(["cmdline"])
             if any(str(home) in part for part in process.info["cmdline"] or ())}
    for pid in pids:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, 9)
            except (ProcessLookupError, PermissionError):
                pass


if __name__ == "__main__":
    sys.exit(main())
