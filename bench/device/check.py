"""One part of the device check into WORK/PART.json (`part`), every part's JSON into one figures.json (`merge`), or a
figures.json that came back into a result file (`result`, here, after the device run).

    python bench/device/check.py part NAME --profile gpu|cpu-dry-run --work DIR --budget SECONDS
    python bench/device/check.py merge --profile gpu|cpu-dry-run --work DIR --out FILE
    python bench/device/check.py result FIGURES.json [--out results/device-GPU.json] [--note WORDS]

bench/device/check.sh runs the first two under `timeout`; run that, not them. `result` writes the figures in
bench/results_format.py's form (a table a part), with the device machine that figures.json names.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from parts import FIGURE_KEYS, PARTS, PROFILES, machine  # bench/device/ beside this script


def run_part(arguments: argparse.Namespace) -> int:
    figures = PARTS[arguments.name](PROFILES[arguments.profile], arguments.work, arguments.budget)
    (arguments.work / f"{arguments.name}.json").write_text(json.dumps(figures, indent=1, default=str))
    print(f"{arguments.name}: {json.dumps(figures, default=str)}")
    return 0


def part_runs(work: Path) -> dict[str, dict]:
    """Each part check.sh ran: its exit code and seconds (status.tsv: name, exit code, seconds)."""
    runs = {}
    for line in (work / "status.tsv").read_text().splitlines() if (work / "status.tsv").exists() else []:
        name, code, seconds = line.split("\t")
        runs[name] = {"exit": int(code), "seconds": float(seconds), "timed_out": int(code) in (124, 137)}
    return runs


def merge(arguments: argparse.Namespace) -> int:
    """figures.json: the machine, each part's run and figures (null where a part wrote none), and the keys
    any part that ran left out."""
    runs = part_runs(arguments.work)
    figures: dict = {"machine": machine(arguments.profile), "parts": runs}
    missing = []
    for name, keys in FIGURE_KEYS.items():
        path = arguments.work / f"{name}.json"
        figures[name] = json.loads(path.read_text()) if path.exists() else None
        if name in runs:
            missing += [f"{name}.{key}" for key in keys if key not in (figures[name] or {})]
    figures["missing"] = missing
    arguments.out.write_text(json.dumps(clean(figures), indent=1))
    for name, run in runs.items():
        state = "timed out" if run["timed_out"] else "ok" if run["exit"] == 0 else f"failed ({run['exit']})"
        print(f"{name:>11}: {state} in {run['seconds']:.0f} s")
    print(f"figures: {arguments.out}" + (f"; missing: {', '.join(missing)}" if missing else ""))
    return 0 if runs and not missing and all(run["exit"] == 0 for run in runs.values()) else 1


def write_result(arguments: argparse.Namespace) -> int:
    """figures.json as a result: a table of each part's figures (nested ones by their dotted key), and one of the
    parts' runs."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for results_format
    import results_format

    figures = json.loads(arguments.figures.read_text())
    device, probe = figures["machine"], figures.get("probe") or {}
    column = results_format.column
    tables = [results_format.measurement("The parts' runs", "part", [column("exit code", "count"),
                                                                      column("wall", "s", 0)],
                                         {name: [run["exit"], run["seconds"]] for name, run in figures["parts"].items()})]
    tables += [results_format.measurement(name, "figure", [column("value")], flat(figures[name]))
               for name in FIGURE_KEYS if figures.get(name)]
    gpu = device["gpu"] or "the CPU (dry run)"
    run = results_format.run_section("bench/device/check.sh", ["bash", "bench/device/check.sh"] + (
        ["--cpu-dry-run"] if device["profile"] == "cpu-dry-run" else []), None, [])
    run |= {"rlsup_commit": None, "date": time.strftime("%Y-%m-%d", time.gmtime(device["time"]))}
    data = {"format": results_format.FORMAT, "title": f"The device check on {gpu}", "job": None, "learner": "rlsup",
            "run": run, "machine": {"cpu": probe.get("cpu_model"), "cores": device["cpus"], "gpu": device["gpu"],
                                    "torch": device["torch"], "note": f"Python {device['python']}, CUDA "
                                                                      f"{device['cuda']}, profile {device['profile']}"},
            "provenance": {"kind": "measured", "note": (
                "measured by bench/device/check.sh on the machine below, and written from its figures.json "
                f"({arguments.figures.name}) by bench/device/check.py result; figures.json does not record the commit. "
                + arguments.note).strip()},
            "seeds": [], "measurements": tables}
    word = results_format.game_word(gpu.removeprefix("NVIDIA "))
    out = arguments.out or results_format.RESULTS / f"device-{word}.json"
    results_format.write(out, data)
    print(f"result: {out}")
    return 0


def flat(figures: dict, prefix: str = "") -> dict[str, list]:
    """Each figure by its dotted key, as one value: numbers as they are, yes/no, lists as their JSON."""
    rows = {}
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows |= flat(value, f"{name}.")
        elif isinstance(value, bool):
            rows[name] = ["yes" if value else "no"]
        elif value is None or isinstance(value, (int, float)):
            rows[name] = [value]
        else:
            rows[name] = [value if isinstance(value, str) else json.dumps(value)]
    return rows


def clean(value):
    """NaN and infinity as null: figures.json is strict JSON."""
    if isinstance(value, dict):
        return {key: clean(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clean(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    part = commands.add_parser("part")
    part.add_argument("name", choices=list(PARTS))
    part.add_argument("--budget", type=float, required=True, help="seconds check.sh gives this part")
    merged = commands.add_parser("merge")
    merged.add_argument("--out", type=Path, required=True)
    for command in (part, merged):
        command.add_argument("--profile", choices=list(PROFILES), required=True)
        command.add_argument("--work", type=Path, required=True)
    result = commands.add_parser("result")
    result.add_argument("figures", type=Path)
    result.add_argument("--out", type=Path, help="the result file (default: results/device-GPU.json)")
    result.add_argument("--note", default="", help="said in the result's provenance")
    arguments = parser.parse_args()
    return {"part": run_part, "merge": merge, "result": write_result}[arguments.command](arguments)


if __name__ == "__main__":
    from rlsup.run.exit import end_process

    sys.exit(end_process(main()))  # without torch's teardown: 0.8 s of each part's time on the CPU dry run
