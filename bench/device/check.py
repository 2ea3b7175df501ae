"""One part of the device check into WORK/PART.json (`part`), or every part's JSON into one figures.json (`merge`).

    python bench/device/check.py part NAME --profile gpu|cpu-dry-run --work DIR --budget SECONDS
    python bench/device/check.py merge --profile gpu|cpu-dry-run --work DIR --out FILE

bench/device/check.sh runs these under `timeout`; run that, not this.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
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
    arguments = parser.parse_args()
    return run_part(arguments) if arguments.command == "part" else merge(arguments)


if __name__ == "__main__":
    from rlsup.run.exit import end_process

    sys.exit(end_process(main()))  # without torch's teardown: 0.8 s of each part's time on the CPU dry run
