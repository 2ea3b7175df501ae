"""An example job over many seeds, two at a time: final greedy mean, best evaluation, steps to solve, wall time.

Each seed is a whole `rlsup run` process on a copy of the job file with only `[job] seed` changed, as a
user would run it; the final greedy mean is `rlsup enjoy` of the final checkpoint over 20 episodes on
seeds no training or evaluation stream used. With --baseline, stable-baselines3 trains the same
settings in its own process per seed (DQN only: stable-baselines3 has no V-trace learner; it has no
double DQN either, so compare jobs with double = false).

    pip install -e '.[bench]'
    python bench/learning_seeds.py jobs/cartpole-dqn.toml --seeds 1-20 [--baseline] [--parallel 2]

--other-floats trains every seed on another floating-point path than this machine's own, as another CPU
would: MKL's CPU-independent code path (MKL_CBWR=COMPATIBLE) and torch's unvectorised kernels
(ATEN_CPU_CAPABILITY=default). Each of the two alone changed a 4,000-step CartPole DQN run's fingerprint
here, and torch's AVX2 kernels instead of AVX-512 did not, so a learning test's failure rate on CI's CPUs
is derived from both runs of the bench, this machine's and --other-floats.

--steps and --set change the job before the seeds run (a shorter budget, a faster schedule), e.g.
    python bench/learning_seeds.py jobs/minatar-breakout-dqn.toml --seeds 1-12 --steps 50000 --solved 5 \\
        --set dqn.epsilon_end_step=25_000 --set eval.every_steps=10_000 --set checkpoint.every_steps=10_000

The result (bench/results_format.py) goes to --out, by default results/JOB.json for the job as written and
results/JOB-CHANGES.json with --set, --steps or --other-floats; with --baseline, stable-baselines3's seeds go
to a result of their own beside it (OUT-sb3.json), which the first names as its comparison.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import results_format  # bench/ beside this script

from rlsup.run import files as runfiles
from rlsup import spec as specs

FINAL_EPISODES = 20
# Enjoy's seeds sit far from any job seed, so the final check plays starts no evaluation saw.
FINAL_SEED_OFFSET = 1_000_000
# What --other-floats sets for every process it starts: another CPU's rounding, on this one.
OTHER_FLOATS = {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default"}
SEED_LINE = re.compile(r"^seed\s*=.*$", re.MULTILINE)


@dataclass
class SeedResult:
    learner: str
    seed: int
    final_mean: float | None
    best_evaluation: float | None
    first_solved_step: int | None
    wall_s: float
    problem: str = ""
    best_checkpoint_mean: float | None = None  # enjoy --checkpoint best, over the same 20 episodes
    evaluations: list = field(default_factory=list)  # (step, mean) of every evaluation


def parse_seeds(text: str) -> list[int]:
    """'1-20', '1,4,9' or a mix: '1-3,7'."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds.extend(range(int(low), int(high or low) + 1))
    return seeds


def job_text_with_seed(job: Path, seed: int) -> str:
    text = job.read_text()
    if not SEED_LINE.search(text):
        text = text.replace("[job]", f"[job]\nseed = {seed}", 1)
    return SEED_LINE.sub(f"seed = {seed}", text, count=1)


def run_rlsup_seed(job: Path, seed: int, directory: Path, solved: float) -> SeedResult:
    """One whole `rlsup run` process (start-up and checkpoints included), then `rlsup enjoy` of its end."""
    job_copy = directory / f"seed-{seed}.toml"
    job_copy.write_text(job_text_with_seed(job, seed))
    run_dir = directory / f"run-{seed}"
    environment = {**os.environ, "RLSUP_HOME": str(directory / "home")}
    started = time.perf_counter()
    trained = subprocess.run([sys.executable, "-m", "rlsup.cli", "run", str(job_copy), "--run-dir", str(run_dir)],
                             capture_output=True, text=True, env=environment)
    wall = time.perf_counter() - started
    evaluations = [record for record in runfiles.read_metrics(run_dir) if record["kind"] == "eval"]
    curve = [(record["step"], record["mean"]) for record in evaluations]
    best, first = evaluation_summary(curve, solved)
    if trained.returncode != 0:
        return SeedResult("rlsup", seed, None, best, first, wall, trained.stderr.strip().splitlines()[-1:][0], curve)
    final, problem = enjoy_mean(run_dir, "latest", seed, environment)
    best_checkpoint, _ = enjoy_mean(run_dir, "best", seed, environment)
    return SeedResult("rlsup", seed, final, best, first, wall, problem, best_checkpoint, curve)


def enjoy_mean(run_dir: Path, checkpoint: str, seed: int, environment: dict) -> tuple[float | None, str]:
    """`rlsup enjoy` of one checkpoint over the final episodes: (mean, "") or (None, the error)."""
    played = subprocess.run([sys.executable, "-m", "rlsup.cli", "enjoy", str(run_dir), "--checkpoint", checkpoint,
                             "--episodes", str(FINAL_EPISODES), "--seed", str(FINAL_SEED_OFFSET + seed), "--json"],
                            capture_output=True, text=True, env=environment)
    if played.returncode != 0:
        return None, played.stderr.strip()[-200:]
    return json.loads(played.stdout)["mean"], ""


def evaluation_summary(evaluations: list[tuple[int, float]], solved: float) -> tuple[float | None, int | None]:
    best = max((mean for _, mean in evaluations), default=None)
    first = next((step for step, mean in evaluations if mean >= solved), None)
    return best, first


BASELINE_SCRIPT = r"""
import json, sys, time
import numpy as np, torch, gymnasium as gym
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import BaseCallback

settings = json.loads(sys.argv[1])
torch.set_num_threads(settings["threads"])

def greedy_mean(model, seed, episodes):
    env, returns = gym.make(settings["env"]), []
    for episode in range(episodes):
        observation, _ = env.reset(seed=seed + episode)
        done, total = False, 0.0
        while not done:
            action, _ = model.predict(observation, deterministic=True)
            observation, reward, terminated, truncated, _ = env.step(int(action))
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))

class Evaluate(BaseCallback):
    def __init__(self):
        super().__init__()
        self.evaluations = []
    def _on_step(self):
        if settings["eval_every"] and self.num_timesteps % settings["eval_every"] == 0:
            seed = settings["seed"] * 7919 + self.num_timesteps
            self.evaluations.append((self.num_timesteps, greedy_mean(self.model, seed, settings["eval_episodes"])))
        return True

dqn = settings["dqn"]
lr, lr_end, lr_end_step, total = dqn["lr"], dqn.get("lr_end"), dqn.get("lr_end_step"), settings["total_steps"]
def learning_rate(progress_remaining):
    # SB3 passes the fraction of the budget left; rlsup's schedule is in absolute steps.
    if lr_end is None:
        return lr
    fraction = min((1.0 - progress_remaining) * total / lr_end_step, 1.0)
    return lr + fraction * (lr_end - lr)

model = DQN("MlpPolicy", gym.make(settings["env"]), learning_rate=learning_rate, buffer_size=settings["capacity"],
            learning_starts=dqn["learning_starts"], batch_size=dqn["batch_size"], tau=dqn["tau"],
            gamma=dqn["gamma"], train_freq=dqn["train_every"], gradient_steps=dqn["gradient_steps"],
            target_update_interval=dqn["target_update_every"], n_steps=dqn["n_step"],
            exploration_fraction=dqn["epsilon_end_step"] / total, exploration_initial_eps=dqn["epsilon_start"],
            exploration_final_eps=dqn["epsilon_end"], max_grad_norm=dqn["max_grad_norm"] or 1e9,
            policy_kwargs={"net_arch": dqn["hidden_sizes"]}, seed=settings["seed"], device="cpu")
callback = Evaluate()
model.learn(total_timesteps=total, callback=callback)
final = greedy_mean(model, settings["final_seed"], settings["final_episodes"])
print(json.dumps({"evaluations": callback.evaluations, "final": final}))
"""


def run_baseline_seed(job: Path, seed: int, directory: Path, solved: float) -> SeedResult:
    """stable-baselines3's DQN with the job's settings, in a process of its own, timed whole."""
    spec = specs.load(job)
    settings = {"env": spec.env.id, "seed": seed, "threads": spec.job.threads, "total_steps": spec.job.total_steps,
                "capacity": spec.replay[0].capacity, "dqn": dataclass_dict(spec.dqn),
                "eval_every": spec.eval.every_steps, "eval_episodes": spec.eval.episodes,
                "final_seed": FINAL_SEED_OFFSET + seed, "final_episodes": FINAL_EPISODES}
    started = time.perf_counter()
    # stable-baselines3's logger makes a folder in the temporary directory: let it be the bench's own.
    result = subprocess.run([sys.executable, "-c", BASELINE_SCRIPT, json.dumps(settings)],
                            capture_output=True, text=True, env={**os.environ, "TMPDIR": str(directory)})
    wall = time.perf_counter() - started
    if result.returncode != 0:
        return SeedResult("sb3", seed, None, None, None, wall, result.stderr.strip().splitlines()[-1])
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    curve = [tuple(pair) for pair in outcome["evaluations"]]
    best, first = evaluation_summary(curve, solved)
    return SeedResult("sb3", seed, outcome["final"], best, first, wall, evaluations=curve)


def dataclass_dict(section) -> dict:
    return {name: getattr(section, name) for name in section.__dataclass_fields__}


def print_table(results: list[SeedResult], solved: float) -> None:
    print(f"{'learner':8} {'seed':>4} {'final mean':>10} {'best eval':>9} {'best ckpt':>9} "
          f"{'first >= %g' % solved:>14} {'wall s':>7}")
    for result in sorted(results, key=lambda row: (row.learner, row.seed)):
        print(f"{result.learner:8} {result.seed:>4} {show(result.final_mean):>10} {show(result.best_evaluation):>9} "
              f"{show(result.best_checkpoint_mean):>9} "
              f"{result.first_solved_step if result.first_solved_step is not None else '-':>14} "
              f"{result.wall_s:>7.1f}  {result.problem}")
    for learner in sorted({result.learner for result in results}):
        rows = [result for result in results if result.learner == learner]
        finals = [result.final_mean for result in rows if result.final_mean is not None]
        solved_count = sum(final >= solved for final in finals)
        bests = [result.best_checkpoint_mean for result in rows if result.best_checkpoint_mean is not None]
        best_note = f"best checkpoint on {sum(best >= solved for best in bests)}/{len(rows)}; " if bests else ""
        print(f"{learner}: final >= {solved:g} on {solved_count}/{len(rows)} seeds; {best_note}"
              f"median final {statistics.median(finals) if finals else float('nan'):.1f}; "
              f"median wall {statistics.median(result.wall_s for result in rows):.1f} s")


def show(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def changed_job(job: Path, steps: int | None, settings: list[str], directory: Path) -> Path:
    """The job with its budget and any 'table.field=value' settings changed, written beside the runs."""
    if steps is None and not settings:
        return job
    spec = specs.load(job)
    if steps is not None:
        spec = spec.replace("job", total_steps=steps)
    for setting in settings:
        name, _, text = setting.partition("=")
        table, _, field_name = name.partition(".")
        if not dataclasses.is_dataclass(getattr(spec, table, None)):
            raise SystemExit(f"--set {name}: [{table}] is not a table --set can change (an array of tables such as "
                             "[[replay]] is changed in a copy of the job file)")
        try:
            value = tomllib.loads(f"value = {text}")["value"]  # TOML's syntax
        except tomllib.TOMLDecodeError:
            raise SystemExit(f"--set {setting}: {text!r} is not a TOML value (a string is quoted: "
                             f"{name}='\"{text}\"')") from None
        spec = spec.replace(table, **{field_name: value})
    changed = directory / job.name
    changed.write_text(spec.to_toml())
    return changed


# SeedResult's fields -> the result format's measures; the measures taken at the end of the budget are at its mark.
MEASURED_AT_END = {"final_mean": "final_greedy", "best_checkpoint_mean": "best_checkpoint_greedy",
                   "best_evaluation": "best_evaluation"}
MEASURED_ONCE = {"first_solved_step": "first_solved_step", "wall_s": "wall_s"}


def result_tables(results: list[SeedResult], group: str, env_id: str, budget: int) -> list[dict]:
    """One learner's seeds as the result format's tables: the figures at the end, once, and every evaluation."""
    by_seed = {result.seed: result for result in sorted(results, key=lambda result: result.seed)}

    def table(measure: str, marks: list[dict]) -> dict:
        return {"group": group, "env": env_id, "measure": measure, "marks": marks}

    tables = [table(measure, [results_format.mark(budget, {seed: getattr(result, name)
                                                           for seed, result in by_seed.items()})])
              for name, measure in MEASURED_AT_END.items()]
    tables += [table(measure, [results_format.mark(None, {seed: getattr(result, name)
                                                          for seed, result in by_seed.items()})])
               for name, measure in MEASURED_ONCE.items()]
    steps = sorted({step for result in results for step, _ in result.evaluations})
    if steps:
        tables.append(table("greedy_eval", [results_format.mark(step, {seed: dict(result.evaluations).get(step)
                                                                       for seed, result in by_seed.items()})
                                            for step in steps]))
    return tables


def write_results(out: Path, results: list[SeedResult], arguments: argparse.Namespace, spec: specs.JobSpec,
                  run: dict) -> None:
    """rlsup's seeds to out, and stable-baselines3's (if any) to OUT-sb3.json, which rlsup's names."""
    group = "another CPU's rounding (--other-floats)" if arguments.other_floats else "this machine's rounding"
    seeds = parse_seeds(arguments.seeds)
    title = f"{arguments.job.stem}: seeds {arguments.seeds}, {spec.job.total_steps:,} steps each"
    comparisons = []
    baseline = [result for result in results if result.learner == "sb3"]
    if baseline:
        import stable_baselines3

        peer_out = out.with_name(f"{out.stem}-sb3.json")
        results_format.write(peer_out, results_format.measured(
            f"{title}: stable-baselines3", arguments.job, f"stable-baselines3 {stable_baselines3.__version__} DQN",
            run, seeds, result_tables(baseline, group, spec.env.id, spec.job.total_steps), solved=arguments.solved,
            note=arguments.note))
        comparisons.append({"label": "stable-baselines3 DQN, the same settings", "result": peer_out.stem})
    mine = [result for result in results if result.learner == "rlsup"]
    results_format.write(out, results_format.measured(
        title, arguments.job, "rlsup", run, seeds, result_tables(mine, group, spec.env.id, spec.job.total_steps),
        comparisons, solved=arguments.solved, note=arguments.note))
    print(f"result: {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", type=Path)
    parser.add_argument("--seeds", default="1-20", help="e.g. 1-20 or 1,4,9")
    parser.add_argument("--parallel", type=int, default=2, help="seeds trained at once")
    parser.add_argument("--solved", type=float, default=475.0, help="the mean return that counts as solved")
    parser.add_argument("--baseline", action="store_true", help="also stable-baselines3, where the algorithm exists")
    parser.add_argument("--out", type=Path, help="the result file (default: results/JOB.json, or "
                        "results/JOB-CHANGES.json with --set, --steps or --other-floats)")
    parser.add_argument("--other-floats", action="store_true",
                        help="train on MKL's CPU-independent path and torch's unvectorised kernels, as on another CPU")
    parser.add_argument("--steps", type=int, help="the budget per seed (default: the job's)")
    parser.add_argument("--set", action="append", default=[], metavar="TABLE.FIELD=VALUE",
                        help="change one field of the job first, e.g. dqn.epsilon_end_step=25000")
    results_format.add_note_argument(parser)
    arguments = parser.parse_args()
    seeds = parse_seeds(arguments.seeds)
    overrides = arguments.set + ([f"job.total_steps={arguments.steps}"] if arguments.steps else [])
    run = results_format.run_section("bench/learning_seeds.py", ["python", *sys.argv], arguments.job, overrides)
    if arguments.other_floats:
        os.environ.update(OTHER_FLOATS)  # every run, enjoy and baseline process started below inherits them
    algorithm = specs.load(arguments.job).job.algo
    with tempfile.TemporaryDirectory(prefix="rlsup-seeds-") as directory, \
            ThreadPoolExecutor(arguments.parallel) as pool:
        job = changed_job(arguments.job, arguments.steps, arguments.set, Path(directory))
        tasks = [pool.submit(run_rlsup_seed, job, seed, Path(directory), arguments.solved)
                 for seed in seeds]
        if arguments.baseline and algorithm == "dqn":
            tasks += [pool.submit(run_baseline_seed, job, seed, Path(directory), arguments.solved)
                      for seed in seeds]
        results = []
        for task in tasks:
            results.append(task.result())
            row = results[-1]
            print(f"  {row.learner} seed {row.seed}: final {show(row.final_mean)}, best {show(row.best_evaluation)}, "
                  f"{row.wall_s:.0f} s", file=sys.stderr, flush=True)
        spec = specs.load(job)  # as changed, before its directory goes
    print_table(results, arguments.solved)
    out = arguments.out or results_format.default_out(
        arguments.job.stem, overrides + (["other-floats"] if arguments.other_floats else []))
    write_results(out, results, arguments, spec, run)


if __name__ == "__main__":
    main()
