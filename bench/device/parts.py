"""The device check's parts, each measuring through the benches' own functions and returning its figures as a dict."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench")]  # the benches import each other as scripts beside one another

# Two sizes of every part: the GPU machine's (16 cores, one GPU) and the CPU dry run's, which only proves
# that each part runs end to end and writes its figures (a few seconds each on two shared cores).
PROFILES = {
    "gpu": {
        "device": "cuda",
        # Test by test over 6 processes (the suite's loadfile would run a module's tests in one).
        "pytest": ["-n", "6", "--dist", "load"],
        "dqn": dict(game="ALE/Pong-v5", steps=8_000, learning_starts=2_000, buffer=20_000, envs=[1, 8], threads=1),
        "vtrace": dict(game="ALE/Pong-v5", actors=14, envs_per_actor=4, unroll=20, batch=32, seconds=8.0,
                       threads=1),
        # N = 64 did not fit the part's time on the H200 machine; 16 and 32 took about 50 s.
        "env": dict(game="ALE/Pong-v5", envs=[16, 32], seconds=2.0, repeats=1, threads=16),
        "learning": dict(actors=14, frames=5_000_000, log_every=50_000, checkpoint_every=1_000_000),
        "probe": dict(seconds=3.0, processes=16, updates=300, actions=500),
        # Issue 53's goal: 200k frames/s (PureJaxRL's PPO did 222k on an A40).
        "fused": dict(games=1024, unroll=20, frames=50_000_000, log_every=200_000),
    },
    "cpu-dry-run": {
        "device": "cpu",
        "pytest": ["-n", "0"],
        "dqn": dict(game="ALE/Pong-v5", steps=200, learning_starts=100, buffer=1_000, envs=[1], threads=1),
        "vtrace": dict(game="ALE/Pong-v5", actors=2, envs_per_actor=2, unroll=5, batch=4, seconds=0.5, threads=1),
        "env": dict(game="ALE/Pong-v5", envs=[2], seconds=0.3, repeats=1, threads=2),
        "learning": dict(actors=2, frames=2_000, log_every=400, checkpoint_every=0),
        "probe": dict(seconds=0.3, processes=2, updates=5, actions=10),
        "fused": dict(games=8, unroll=5, frames=4_000, log_every=400),
    },
}
# The suite's dry run (tests/integration/test_device_dry_run.py): one actor where the dry run has two, and
# shorter measurements, since every actor process is seconds of torch import on a loaded 2-core machine.
PROFILES["cpu-quick"] = {**PROFILES["cpu-dry-run"],
                         "dqn": {**PROFILES["cpu-dry-run"]["dqn"], "steps": 120, "learning_starts": 60},
                         "vtrace": {**PROFILES["cpu-dry-run"]["vtrace"], "actors": 1, "seconds": 0.2},
                         "env": {**PROFILES["cpu-dry-run"]["env"], "seconds": 0.1},
                         "learning": {**PROFILES["cpu-dry-run"]["learning"], "actors": 1, "frames": 400,
                                      "log_every": 100},
                         "probe": dict(seconds=0.1, processes=1, updates=3, actions=5),
                         "fused": dict(games=4, unroll=5, frames=1_000, log_every=200)}
# The ALE vector env (C++ threads) is the reference; "rlsup auto" is what a job gets by default.
ENV_BACKENDS = ["rlsup auto", "rlsup", "rlsup subp", "ALE vector"]
LEARNING_JOB = ROOT / "jobs" / "minatar-breakout-vtrace.toml"
# Seconds the learning part keeps for start-up (14 actors importing torch) and the final checkpoint: 9 s
# on the H200 machine (2026-11-28), doubled.
LEARNING_MARGIN_S = 20
FUSED_JOB = ROOT / "jobs" / "minatar-vtrace-fused.toml"
# The fused part's start-up (JAX's import and compile) and final checkpoint: a guess, not yet measured on a GPU.
FUSED_MARGIN_S = 25


def cuda_tests(profile: dict, work: Path, budget_s: float) -> dict:
    """`pytest -m cuda` on tests/cuda: counts from its JUnit report, and each failure's first line."""
    report = work / "cuda-tests.xml"
    command = [sys.executable, "-m", "pytest", "-m", "cuda", str(ROOT / "tests" / "cuda"), *profile["pytest"],
               "-p", "no:cacheprovider", "-rs", f"--junitxml={report}"]
    exit_code = subprocess.run(command, cwd=ROOT).returncode
    suite = next(ElementTree.parse(report).getroot().iter("testsuite"))
    failures = [f"{case.get('name')}: {first_line(problem.get('message') or problem.tag)}"
                for case in suite.iter("testcase") for problem in case if problem.tag in ("failure", "error")]
    tests, skipped = int(suite.get("tests")), int(suite.get("skipped"))
    failed = int(suite.get("failures")) + int(suite.get("errors"))
    return {"exit": exit_code, "tests": tests, "passed": tests - skipped - failed, "failed": failed,
            "skipped": skipped, "failures": failures}


def dqn(profile: dict, work: Path, budget_s: float) -> dict:
    """bench/dqn_throughput.py: whole `rlsup run` processes against stable-baselines3, per num_envs."""
    import dqn_throughput

    settings = profile["dqn"]
    arguments = argparse.Namespace(**{"transitions_per_update": 4,
                                      **{key: value for key, value in settings.items() if key != "envs"}},
                                   device=profile["device"])
    have_sb3 = module_available("stable_baselines3")
    by_num_envs = {}
    for num_envs in settings["envs"]:
        directory = Path(tempfile.mkdtemp(prefix=f"dqn-{num_envs}-", dir=work))
        # Each run is told as it ends: a part stopped by its budget still says how far it got.
        ours = told(f"rlsup num_envs {num_envs}", dqn_throughput.rlsup_timing(arguments, num_envs, directory,
                                                                                overlap=False))
        overlapped = told(f"rlsup overlap num_envs {num_envs}",
                          dqn_throughput.rlsup_timing(arguments, num_envs, directory, overlap=True))
        theirs = told(f"sb3 num_envs {num_envs}",
                      dqn_throughput.sb3_timing(arguments, num_envs, directory) if have_sb3 else None)
        by_num_envs[str(num_envs)] = {
            "rlsup_wall_s": ours.wall, "rlsup_cpu_s": ours.cpu, "rlsup_updates": ours.updates,
            "rlsup_steps_per_s": settings["steps"] / ours.wall,
            "overlap_wall_s": overlapped.wall, "overlap_steps_per_s": settings["steps"] / overlapped.wall,
            "sb3_wall_s": theirs and theirs.wall, "sb3_cpu_s": theirs and theirs.cpu,
            "sb3_updates": theirs and theirs.updates, "sb3_steps_per_s": theirs and settings["steps"] / theirs.wall,
            "sb3_wall_over_rlsup": theirs and theirs.wall / ours.wall}
        print(f"dqn num_envs {num_envs}: {by_num_envs[str(num_envs)]}", flush=True)
    return {**settings, "device": profile["device"], "sb3": "measured" if have_sb3 else "not installed",
            "by_num_envs": by_num_envs}


def told(what: str, timing):
    print(f"  {what}: {timing}", flush=True)
    return timing


def vtrace(profile: dict, work: Path, budget_s: float) -> dict:
    """bench/vtrace_throughput.py: raw actor loops, the pipeline without and with the learner's update."""
    import vtrace_throughput

    settings = profile["vtrace"]
    arguments = argparse.Namespace(**settings, device=profile["device"])
    spec = vtrace_throughput.bench_spec(arguments)
    raw = vtrace_throughput.raw_rate(spec, settings["seconds"])
    machinery = vtrace_throughput.pipeline_rates(spec, settings["seconds"], train=False)
    full = vtrace_throughput.pipeline_rates(spec, settings["seconds"], train=True)
    return {**settings, "device": profile["device"], "raw_steps_per_s": raw,
            "learner_waited_s_per_update": full.waited, "batch_assembly_s_per_update": full.assembly,
            "learner_cpu_s_per_update": full.learner_cpu,
            "pipeline_no_update_steps_per_s": machinery.steps_per_second,
            "pipeline_steps_per_s": full.steps_per_second, "pipeline_over_raw": full.steps_per_second / raw,
            "updates_per_s": full.updates_per_second, "updates_per_s_no_update": machinery.updates_per_second}


def env(profile: dict, work: Path, budget_s: float) -> dict:
    """bench/env_throughput.py: agent steps/s of rlsup's vectorisers and the ALE vector env, per N."""
    import torch

    import env_throughput

    settings = profile["env"]
    arguments = argparse.Namespace(**settings, backends=ENV_BACKENDS)
    torch.set_num_threads(1)
    probe = env_throughput.make_vector_env(env_throughput.env_settings(settings["game"]), [env_throughput.SEED])
    policy = env_throughput.Policy(probe.observation_shape, probe.num_actions)
    probe.close()
    by_n = {}
    for count in settings["envs"]:
        measured = env_throughput.medians(arguments, count, policy)
        by_n[str(count)] = {name: found and found.rate for name, found in measured.items()}
        print(f"env N {count}: {by_n[str(count)]}", flush=True)
    return {**settings, "backends": ENV_BACKENDS, "by_n": by_n}


def budgeted_spec(job: Path, profile: dict, frames: int, budget_s: float, margin_s: float, log_every: int):
    """A V-trace job on the profile's device for frames, stopped by [job] max_wall_s within the part's budget
    (margin_s kept for start-up and the final checkpoint), without evaluations."""
    from rlsup import spec as specs

    spec = specs.load(job).replace("job", device=profile["device"], total_steps=frames,
                                   max_wall_s=max(10.0, budget_s - margin_s))
    spec = spec.replace("vtrace", lr_end_step=frames).replace("eval", every_steps=0)
    return spec.replace("log", every_steps=log_every)


def run_spec(spec, work: Path, name: str) -> tuple[int, float, Path]:
    """`rlsup run` of spec, written to work/NAME.toml: its exit code, its wall seconds and its run directory."""
    job, run_dir = work / f"{name}.toml", work / f"{name}-run"
    job.write_text(spec.to_toml())
    began = time.monotonic()
    command = [sys.executable, "-m", "rlsup.cli", "run", str(job), "--run-dir", str(run_dir)]
    exit_code = subprocess.run(command).returncode
    return exit_code, time.monotonic() - began, run_dir


def learning(profile: dict, work: Path, budget_s: float) -> dict:
    """MinAtar Breakout V-trace on the machine's actors and device, stopped by [job] max_wall_s within the
    part's budget, its 100-episode training average beside the MinAtar paper's curves."""
    import minatar_learning
    from minatar_paper import paper_value
    from rlsup.run import files as runfiles

    settings = profile["learning"]
    frames = settings["frames"]
    spec = budgeted_spec(LEARNING_JOB, profile, frames, budget_s, LEARNING_MARGIN_S, settings["log_every"])
    spec = spec.replace("vtrace", actors=settings["actors"])
    spec = spec.replace("checkpoint", every_steps=settings["checkpoint_every"])
    exit_code, wall_s, run_dir = run_spec(spec, work, "learning")
    records = runfiles.read_metrics(run_dir)
    episodes = [(record["step"], record["return"]) for record in records if record["kind"] == "episode"]
    reached = max((record["step"] for record in records if "step" in record), default=0)
    marks = minatar_learning.marks_for("Breakout", reached)
    curve = [{"frames": mark, "rlsup": minatar_learning.moving_average_at(episodes, mark),
              "paper_ac": paper_value("Breakout", "AC", mark),
              "paper_dqn": paper_value("Breakout", "DQN", mark)} for mark in marks]
    return {"job": LEARNING_JOB.name, "game": spec.env.id, "actors": settings["actors"], "device": profile["device"],
            "exit": exit_code, "frames_target": frames, "frames": reached, "wall_s": wall_s,
            "frames_per_s": reached / wall_s, "episodes": len(episodes), "curve": curve,
            "final_average": minatar_learning.moving_average_at(episodes, reached)}


def fused(profile: dict, work: Path, budget_s: float) -> dict:
    """MinAtar Breakout V-trace on a fused source (games, acting and learning on the device in one process), stopped
    by [job] max_wall_s within the part's budget: frames/s, and the GPU's utilisation sampled as it trains."""
    import dataclasses

    from rlsup.run import files as runfiles

    settings = profile["fused"]
    frames, games = settings["frames"], settings["games"]
    spec = budgeted_spec(FUSED_JOB, profile, frames, budget_s, FUSED_MARGIN_S, settings["log_every"])
    spec = spec.replace("vtrace", batch_size=games, unroll_length=settings["unroll"])
    spec = dataclasses.replace(spec.replace("checkpoint", every_steps=0),
                               replay=(dataclasses.replace(spec.replay[0], capacity=games),))
    sampler = UtilisationSampler(profile["device"])
    with sampler:
        exit_code, wall_s, run_dir = run_spec(spec, work, "fused")
    trains = [record for record in runfiles.read_metrics(run_dir) if record["kind"] == "train"]
    reached = trains[-1]["step"] if trains else 0
    # Training alone: from the first train record to the last, start-up (JAX's compile) and the checkpoint left out.
    training = None
    if len(trains) > 1:
        training = (trains[-1]["step"] - trains[0]["step"]) / (trains[-1]["t"] - trains[0]["t"])
    return {"job": FUSED_JOB.name, "game": spec.env.id, "games": games, "unroll": settings["unroll"],
            "device": profile["device"], "exit": exit_code, "frames": reached, "wall_s": wall_s,
            "frames_per_s": reached / wall_s, "training_frames_per_s": training,
            "gpu_utilisation": sampler.summary(),
            "final_mean_return": trains[-1].get("mean_return") if trains else None}


class UtilisationSampler:
    """The GPU's utilisation (NVML's percent of time a kernel ran), sampled every half second in a thread while
    the block runs; nothing on a CPU."""

    def __init__(self, device: str):
        self.device, self.samples, self._stop = device, [], None

    def __enter__(self):
        import threading

        if self.device.startswith("cuda") and module_available("pynvml"):
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        while not self._stop.wait(0.5):
            self.samples.append(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)

    def __exit__(self, *exception) -> None:
        if self._stop is not None:
            self._stop.set()
            self._thread.join()

    def summary(self) -> dict | None:
        """Mean and median percent over the samples, and how many: None where none was taken."""
        if not self.samples:
            return None
        ordered = sorted(self.samples)
        return {"mean": sum(ordered) / len(ordered), "median": ordered[len(ordered) // 2], "samples": len(ordered)}


def probe(profile: dict, work: Path, budget_s: float) -> dict:
    """What bounds the benches on this machine: its CPU's raw Pong rate in one process and in all at once, and
    one Pong DQN update and one action on the device, in microseconds."""
    from device_probe import cpu_model, dqn_timings, raw_pong_rates

    settings = profile["probe"]
    figures = {"cpu_model": cpu_model(), "cpus": os.cpu_count(), "load_before": os.getloadavg()}
    figures["pong_steps_per_s_one_process"] = raw_pong_rates(settings["seconds"], 1)[0]
    print(f"probe: {figures}", flush=True)
    rates = raw_pong_rates(settings["seconds"], settings["processes"])
    figures.update(processes=settings["processes"], pong_steps_per_s_all_processes=sum(rates))
    print(f"probe: {settings['processes']} processes: {sum(rates):.0f} steps/s", flush=True)
    figures.update(dqn_timings(profile["device"], settings["updates"], settings["actions"]))
    return figures


def update(profile: dict, work: Path, budget_s: float) -> dict:
    """Where a Pong DQN update's time goes on the device: per-update microseconds with and without deterministic
    kernels and cuDNN's autotuner, the same step replayed as one CUDA graph, and torch.profiler's kernel table
    (update-profile.txt in the logs)."""
    from device_probe import update_breakdown

    return update_breakdown(profile["device"], profile["probe"]["updates"], work / "logs" / "update-profile.txt")


def machine(profile_name: str) -> dict:
    """What the figures were measured on."""
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"profile": profile_name, "python": sys.version.split()[0], "torch": torch.__version__,
            "cuda": torch.version.cuda, "gpu": gpu, "cpus": os.cpu_count(), "time": time.time()}


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:300]


def module_available(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


PARTS = {"cuda-tests": cuda_tests, "dqn": dqn, "vtrace": vtrace, "env": env, "learning": learning, "probe": probe,
         "update": update, "fused": fused}
# Each part's figures, by key: tests/integration/test_device_dry_run.py checks the dry run wrote them all.
FIGURE_KEYS = {
    "cuda-tests": ["exit", "tests", "passed", "failed", "skipped", "failures"],
    "dqn": ["game", "steps", "device", "sb3", "by_num_envs"],
    "vtrace": ["game", "actors", "device", "raw_steps_per_s", "pipeline_no_update_steps_per_s",
               "pipeline_steps_per_s", "pipeline_over_raw", "updates_per_s"],
    "env": ["game", "envs", "backends", "by_n"],
    "learning": ["game", "actors", "device", "frames_target", "frames", "wall_s", "frames_per_s", "curve",
                 "final_average"],
    "probe": ["cpu_model", "cpus", "pong_steps_per_s_one_process", "pong_steps_per_s_all_processes",
              "dqn_update_us", "dqn_update_pinned_us", "dqn_act_us"],
    "update": ["update_us", "graphed_update_us"],
    "fused": ["game", "games", "device", "frames", "wall_s", "frames_per_s", "training_frames_per_s",
              "gpu_utilisation"],
}

