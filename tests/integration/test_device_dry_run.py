"""bench/device/check.sh's CPU dry run end to end: every part runs and figures.json holds every figure."""
from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

# The figures the GPU run reports, by part: what issue 28's closing note is written from.
FIGURES = {
    "cuda-tests": "exit tests passed failed skipped failures",
    "dqn": "game steps device sb3 by_num_envs",
    "vtrace": "game actors device raw_steps_per_s pipeline_no_update_steps_per_s pipeline_steps_per_s "
              "pipeline_over_raw updates_per_s",
    "env": "game envs backends by_n",
    "learning": "game actors device frames_target frames wall_s frames_per_s curve final_average",
    "probe": "cpu_model cpus pong_steps_per_s_one_process pong_steps_per_s_all_processes dqn_update_us "
             "dqn_update_pinned_us dqn_act_us",
    "update": "update_us graphed_update_us",
    "fused": "game games device frames wall_s frames_per_s training_frames_per_s gpu_utilisation",
}
DQN_FIGURES = ("rlsup_wall_s rlsup_cpu_s rlsup_updates rlsup_steps_per_s sb3_wall_s sb3_cpu_s sb3_updates "
               "sb3_steps_per_s sb3_wall_over_rlsup").split()


@pytest.mark.slow  # 38 s of CPU in all: each part starts processes that import torch
def test_the_cpu_dry_run_writes_every_figure_and_every_log(tmp_path: Path) -> None:
    result = subprocess.run(["bash", str(ROOT / "bench" / "device" / "check.sh"), "--cpu-dry-run", "--quick"],
                            capture_output=True, text=True, timeout=280, env={**os.environ, "OUT": str(tmp_path)})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert figures["missing"] == []
    assert figures["machine"]["profile"] == "cpu-quick" and figures["machine"]["gpu"] is None
    assert {name: run["exit"] for name, run in figures["parts"].items()} == dict.fromkeys(FIGURES, 0)
    for part, keys in FIGURES.items():
        assert set(keys.split()) <= set(figures[part]), part

    # Without a GPU every CUDA test is collected and skipped, none fails.
    tests = figures["cuda-tests"]
    assert tests["tests"] == tests["skipped"] >= 6 and tests["failed"] == 0
    measured = figures["dqn"]["by_num_envs"]["1"]
    assert set(DQN_FIGURES) <= set(measured) and measured["rlsup_steps_per_s"] > 0 and measured["rlsup_updates"] > 0
    assert figures["vtrace"]["raw_steps_per_s"] > 0 and figures["vtrace"]["updates_per_s"] > 0
    assert all(rate > 0 for rate in figures["env"]["by_n"]["2"].values())
    assert set(figures["env"]["by_n"]["2"]) == {"rlsup auto", "rlsup", "rlsup subp", "ALE vector"}
    probe = figures["probe"]
    assert probe["pong_steps_per_s_all_processes"] > 0 and probe["dqn_update_us"] > 0
    assert set(figures["update"]["update_us"]) == {"deterministic", "deterministic, autotuned", "free",
                                                   "free, autotuned"}
    assert figures["update"]["graphed_update_us"] == {"deterministic": "needs CUDA", "free": "needs CUDA"}
    learning = figures["learning"]
    assert learning["frames"] == learning["frames_target"] and learning["curve"][-1]["frames"] == learning["frames"]
    fused = figures["fused"]  # issue 53: MinAtar Breakout's games, acting and learning in one process
    assert fused["exit"] == 0 and fused["frames"] >= 1_000 and fused["training_frames_per_s"] > 0
    assert fused["gpu_utilisation"] is None  # sampled on a GPU only

    with tarfile.open(tmp_path / "logs.tar.gz") as logs:
        names = set(logs.getnames())
    assert {f"logs/{part}.log" for part in FIGURES} | {"logs/update-profile.txt"} <= names and "status.tsv" in names
    assert sorted(os.listdir(tmp_path)) == ["figures.json", "logs.tar.gz"]
