"""The device check's probe: the machine's raw Atari rate per process and in all, and a DQN update and action timed on its device."""
from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PONG_JOB = ROOT / "jobs" / "pong-dqn.toml"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def pong_rate(seconds: float) -> float:
    """Agent steps/s of one ALE Pong env (frame skip 4) with random actions: the env alone, no policy."""
    import ale_py
    import gymnasium

    gymnasium.register_envs(ale_py)
    env = gymnasium.make("ALE/Pong-v5")
    env.reset(seed=0)
    steps, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            env.reset()
    rate = steps / (time.perf_counter() - began)
    env.close()
    return rate


def raw_pong_rates(seconds: float, processes: int) -> list[float]:
    """Each of `processes` processes' Pong rate, all stepping at once (spawned: no torch state is forked)."""
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        return pool.map(pong_rate, [seconds] * processes)


def dqn_timings(device_name: str, updates: int, actions: int) -> dict:
    """Microseconds per DQN update of jobs/pong-dqn.toml's Nature CNN at its batch size, from pageable numpy
    batches (what the trainer passes today) and from pinned tensors; and per greedy action of 1 and 8 envs."""
    import numpy as np
    import torch

    from rlsup.algos.device import make_cuda_deterministic
    from rlsup.replay.storage import TransitionBatch

    learner, pageable, per_call_us = update_rig(device_name)
    make_cuda_deterministic(learner.device)
    pinned = pageable
    if learner.device.type == "cuda":
        pinned = [TransitionBatch(**{key: torch.from_numpy(value).pin_memory() for key, value in vars(batch).items()})
                  for batch in pageable]
    figures = {"device": str(learner.device), "batch_size": len(pageable[0].actions),
               "dqn_update_us": per_call_us(lambda: learner.update(pageable[learner.updates % 8], 0), updates),
               "dqn_update_pinned_us": per_call_us(lambda: learner.update(pinned[learner.updates % 8], 0), updates),
               "dqn_act_us": {}}
    generator = np.random.default_rng(1)
    for envs in (1, 8):
        observations = generator.integers(0, 255, (envs, *pageable[0].observations.shape[1:]), dtype=np.uint8)
        figures["dqn_act_us"][str(envs)] = per_call_us(lambda: learner.greedy_actions(observations), actions)
    print(f"probe: {figures}", flush=True)
    return figures


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def update_breakdown(device_name: str, updates: int, profile_path: Path) -> dict:
    """Microseconds per Pong DQN update with deterministic kernels (as workers run) and without, with cuDNN's
    autotuner on and off; and a torch.profiler table of the deterministic update's kernels at profile_path."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    figures: dict = {}
    learner, batches, timer = update_rig(device_name)
    for deterministic in (True, False):
        for benchmark in (False, True):
            torch.use_deterministic_algorithms(deterministic, warn_only=True)
            torch.backends.cudnn.benchmark = benchmark
            name = f"{'deterministic' if deterministic else 'free'}{', autotuned' if benchmark else ''}"
            figures[name] = timer(lambda: learner.update(batches[learner.updates % len(batches)], 0), updates)
            print(f"update {name}: {figures[name]:.0f} us", flush=True)
    graphed = {}
    for deterministic in (True, False):
        torch.use_deterministic_algorithms(deterministic, warn_only=True)
        torch.backends.cudnn.benchmark = False
        name = "deterministic" if deterministic else "free"
        graphed[name] = graphed_update_us(learner, batches, timer, updates)
        print(f"graphed update {name}: {graphed[name]}", flush=True)
    torch.use_deterministic_algorithms(True, warn_only=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as profiled:
        for index in range(20):
            learner.update(batches[index % len(batches)], 0)
        synchronize(learner.device)
    sort = "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
    table = profiled.key_averages().table(sort_by=sort, row_limit=25)
    profile_path.write_text(table)
    print(table[:6000], flush=True)
    return {"update_us": figures, "graphed_update_us": graphed}


def graphed_update_us(learner, batches, timer, updates: int):
    """Microseconds per update of a copy of the learner's networks, its step (DQN's loss, Adam) captured as one
    CUDA graph and replayed after the batch is copied into its static tensors: what an update costs when the
    host launches it at once. The capture follows torch's whole-network example (warm-up on a side stream,
    a capturable optimizer). A string says why not, where it cannot run."""
    import copy

    import torch
    from torch.nn import functional

    if learner.device.type != "cuda":
        return "needs CUDA"
    device = learner.device
    online, target = copy.deepcopy(learner.online), copy.deepcopy(learner.target)
    names = ("observations", "actions", "returns", "next_observations", "discounts")
    static = {name: torch.as_tensor(getattr(batches[0], name)).to(device) for name in names}
    optimizer = torch.optim.Adam(online.parameters(), lr=torch.tensor(learner.settings.lr, device=device),
                                 capturable=True)

    def step() -> None:
        chosen = online(static["observations"]).gather(1, static["actions"].long().unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            targets = static["returns"] + static["discounts"] * target(static["next_observations"]).max(1).values
        functional.smooth_l1_loss(chosen, targets).backward()
        optimizer.step()

    count = [0]

    def replay() -> None:
        batch = batches[count[0] % len(batches)]
        count[0] += 1
        for name in names:
            static[name].copy_(torch.as_tensor(getattr(batch, name)))
        graph.replay()

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                optimizer.zero_grad(set_to_none=True)
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            step()
        return timer(replay, updates)
    except Exception as error:  # the probe reports why, and the other figures still come back
        return f"failed: {type(error).__name__}: {str(error)[:300]}"


def update_rig(device_name: str):
    """A Pong DQN learner on the device, 8 random batches for it, and a timer of calls in microseconds."""
    import os

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import numpy as np
    import torch

    from rlsup import spec as specs
    from rlsup.algos.device import select_device
    from rlsup.algos.dqn_learner import DqnLearner
    from rlsup.algos.nets import q_network_of
    from rlsup.replay.storage import TransitionBatch

    spec = specs.load(PONG_JOB)
    device = select_device(device_name)
    torch.set_num_threads(spec.job.threads)
    shape, num_actions, batch_size = (spec.env.frame_stack, 84, 84), 6, spec.dqn.batch_size
    learner = DqnLearner(spec.dqn, q_network_of(spec.dqn, shape, num_actions), device)
    generator = np.random.default_rng(0)
    batches = [TransitionBatch(observations=generator.integers(0, 255, (batch_size, *shape), dtype=np.uint8),
                               actions=generator.integers(0, num_actions, batch_size),
                               returns=generator.standard_normal(batch_size).astype(np.float32),
                               next_observations=generator.integers(0, 255, (batch_size, *shape), dtype=np.uint8),
                               discounts=np.full(batch_size, 0.99, np.float32), indices=np.arange(batch_size))
               for _ in range(8)]

    def per_call_us(call, count: int) -> float:
        for _ in range(max(2, count // 10)):
            call()
        synchronize(device)
        began = time.perf_counter()
        for _ in range(count):
            call()
        synchronize(device)
        return (time.perf_counter() - began) / count * 1e6

    return learner, batches, per_call_us
