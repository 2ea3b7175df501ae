"""The one definition of a result file (results/NAME.json): what was run, where, on which seeds, and its figures.

A result is what one bench printed, as data: the job file it ran (with the digest of its settings and any
changes made to them), the rlsup commit, the machine, the seeds, and tables of figures, one per group (a game,
a float path) and measure, with each seed's value and their mean at each mark (so many frames, or none for a
figure taken once). Comparisons (the MinAtar paper's curves, a peer library's result) are named, never
copied: the paper's values are read from bench/minatar_paper.py and a peer's from its own result file.
A speed, latency or scheduler bench's figures are measurements instead: named tables of named rows against
named columns with units, measured side by side in one run (agent steps/s by vectoriser and env count, a
command's seconds with and without a change), with the bench's finding in a sentence.
provenance says whether the figures were measured by the bench that wrote the file or transcribed from an
earlier record of its printed output, and from which. bench/render_results.py renders docs/results/ from
these files; tests/docs/test_results_pages.py holds every file to SCHEMA and to problems().
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tomllib
from datetime import date
from pathlib import Path
from typing import NamedTuple

from minatar_paper import GAMES, paper_value  # bench/ beside this module

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
FORMAT = "rlsup-result/1"
PAPER_AGENTS = ("DQN", "AC")
PAPER_DIGITS = 1  # the paper's values are read off its figure, to about 2%
# The largest gap between a stated mean and the mean of its stated seeds: two-decimal rounding of each.
MEAN_TOLERANCE = 0.011
# Decimals a bench keeps of each figure: returns of whole episodes averaged, far finer than the runs' spread.
DIGITS = 4



class Measure(NamedTuple):
    name: str  # a table column's name
    description: str  # one sentence for the page
    x: str | None  # what its marks count; None: taken once per seed, at no mark
    digits: int  # decimals shown


MEASURES = {
    "training_mean_100": Measure("training mean", "the mean return of the last 100 training episodes that ended "
                                 "by the mark (epsilon-greedy for DQN, sampled from the policy for V-trace): the "
                                 "MinAtar paper's measure", "frames", 2),
    "greedy_eval": Measure("greedy evaluation", "the mean return of the job's [eval] at the mark: greedy actions, "
                           "the [eval]'s episodes", "steps", 2),
    "final_greedy": Measure("final greedy mean", "`rlsup enjoy` of the final checkpoint: the mean return of 20 "
                            "greedy episodes on seeds no training or evaluation used", "steps", 1),
    "best_checkpoint_greedy": Measure("best checkpoint's greedy mean", "`rlsup enjoy --checkpoint best`: the same "
                                      "20 greedy episodes played by the checkpoint of the best evaluation", "steps", 1),
    "best_evaluation": Measure("best evaluation", "the highest [eval] mean of the run", "steps", 1),
    "first_solved_step": Measure("first solved at (step)", "the step of the first [eval] mean at or above the "
                                 "result's solved threshold", None, 0),
    "wall_s": Measure("wall time (s)", "the seed's wall time: its whole `rlsup run` process (and, for a peer, its "
                      "training)", None, 0),
}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_MARK = {
    "type": "object", "additionalProperties": False, "required": ["x"],
    "anyOf": [{"required": [statistic]} for statistic in ("seeds", "mean", "median", "min", "solved")],
    "properties": {
        "x": {"type": ["integer", "null"], "minimum": 0},
        "seeds": {"type": "object", "propertyNames": {"pattern": "^[0-9]+$"},
                  "additionalProperties": _NUMBER_OR_NULL},
        "mean": _NUMBER_OR_NULL, "median": _NUMBER_OR_NULL, "min": _NUMBER_OR_NULL, "max": _NUMBER_OR_NULL,
        "solved": {"type": "object", "additionalProperties": False, "required": ["count", "of"],
                   "properties": {"count": {"type": "integer", "minimum": 0}, "of": {"type": "integer", "minimum": 1}}},
        "note": {"type": "string"},
    },
}
_TABLE = {
    "type": "object", "additionalProperties": False, "required": ["group", "measure", "marks"],
    "properties": {
        "group": {"type": "string", "minLength": 1},
        "env": {"type": ["string", "null"]},
        "settings": {"type": "object"},
        "measure": {"enum": sorted(MEASURES)},
        "marks": {"type": "array", "minItems": 1, "items": _MARK},
        "curve": {"type": "array", "items": {"type": "array", "minItems": 2, "maxItems": 2,
                                              "items": {"type": "number"}}},
    },
}
# A measurement's units: a column holds numbers in one of these, or words (unit None: a variant's name, a range).
UNITS = ("s", "ms", "µs", "CPU s", "steps/s", "frames/s", "updates/s", "steps", "frames", "x", "%", "MB", "MB/s", "MiB",
         "return", "count")
_COLUMN = {"type": "object", "additionalProperties": False, "required": ["name", "unit"],
           "properties": {"name": {"type": "string", "minLength": 1}, "unit": {"enum": [*UNITS, None]},
                          "digits": {"type": "integer", "minimum": 0}}}
_ROW = {"type": "object", "additionalProperties": False, "required": ["name", "values"],
        "properties": {"name": {"type": "string", "minLength": 1},
                       "values": {"type": "array", "items": {"type": ["number", "string", "null"]}},
                       "note": {"type": "string"}}}
_MEASUREMENT = {
    "type": "object", "additionalProperties": False, "required": ["name", "rows_are", "columns", "rows"],
    "properties": {
        "name": {"type": "string", "minLength": 1},  # the table's heading on the page
        "description": {"type": "string"},  # how it was measured: durations, repeats, what ran beside it
        "rows_are": {"type": "string", "minLength": 1},  # the header of the rows' names
        "settings": {"type": "object"},
        "columns": {"type": "array", "minItems": 1, "items": _COLUMN},
        "rows": {"type": "array", "minItems": 1, "items": _ROW},
    },
}
_COMPARISON = {
    "type": "object", "additionalProperties": False, "required": ["label"],
    "oneOf": [{"required": ["paper"]}, {"required": ["result"]}],
    "properties": {"label": {"type": "string"}, "paper": {"enum": list(PAPER_AGENTS)},
                   "result": {"type": "string", "pattern": "^[a-z0-9][a-z0-9.-]*$"}},
}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "rlsup benchmark result", "type": "object", "additionalProperties": False,
    "required": ["format", "title", "job", "learner", "run", "machine", "provenance", "seeds"],
    "anyOf": [{"required": ["tables"]}, {"required": ["measurements"]}],
    "properties": {
        "format": {"const": FORMAT},
        "title": {"type": "string", "minLength": 1},
        "job": {"type": ["string", "null"], "pattern": "^jobs/[a-z0-9-]+\\.toml$"},
        "learner": {"type": "string", "minLength": 1},
        "run": {"type": "object", "additionalProperties": False,
                "required": ["bench", "command", "settings_sha256", "overrides", "rlsup_commit", "date"],
                "properties": {"bench": {"type": "string"}, "command": {"type": "string"},
                               "settings_sha256": {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$"},
                               "overrides": {"type": "array", "items": {"type": "string"}},
                               "rlsup_commit": {"type": ["string", "null"]},
                               "date": {"type": ["string", "null"], "format": "date"}}},
        "machine": {"type": "object", "additionalProperties": False, "required": ["cpu", "cores", "gpu", "torch"],
                    "properties": {"cpu": {"type": ["string", "null"]}, "cores": {"type": ["integer", "null"]},
                                   "gpu": {"type": ["string", "null"]}, "torch": {"type": ["string", "null"]},
                                   "note": {"type": "string"}}},
        "provenance": {"type": "object", "additionalProperties": False, "required": ["kind", "note"],
                       "properties": {"kind": {"enum": ["measured", "transcribed"]},
                                      "note": {"type": "string", "minLength": 1}}},
        "seeds": {"type": "array", "items": {"type": "integer"}},  # none for a measurement no seed decides
        "solved": _NUMBER_OR_NULL,
        "tables": {"type": "array", "minItems": 1, "items": _TABLE},
        "comparisons": {"type": "array", "items": _COMPARISON},
        "measurements": {"type": "array", "minItems": 1, "items": _MEASUREMENT},
        "finding": {"type": "string", "minLength": 1},  # what the measurements say, in a sentence
    },
}


def schema_errors(data: dict) -> list[str]:
    """Where data breaks SCHEMA, one line each (jsonschema, from the test extra, does the checking)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    return [f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}"
            for error in sorted(validator.iter_errors(data), key=lambda error: list(map(str, error.path)))]


def problems(data: dict, known_results: set[str] | None = None) -> list[str]:
    """What SCHEMA cannot say: means agree with their seeds, seeds are the result's, comparisons exist."""
    found = measurement_problems(data)
    seeds = {str(seed) for seed in data["seeds"]}
    for table in data.get("tables", []):
        for mark in table["marks"]:
            where = f"{table['group']} {table['measure']} at {mark['x']}"
            if not set(mark.get("seeds", {})) <= seeds:
                found.append(f"{where}: seeds {sorted(set(mark['seeds']) - seeds)} are not the result's seeds")
            values = [value for value in mark.get("seeds", {}).values() if value is not None]
            if "mean" in mark and mark["mean"] is not None and len(values) == len(mark.get("seeds", {})) > 0 \
                    and abs(statistics.fmean(values) - mark["mean"]) > MEAN_TOLERANCE:
                found.append(f"{where}: mean {mark['mean']} is not the mean of its seeds ({statistics.fmean(values):.4f})")
    for comparison in data.get("comparisons", []):
        if "result" in comparison and known_results is not None and comparison["result"] not in known_results:
            found.append(f"comparison {comparison['label']!r}: no results/{comparison['result']}.json")
    return found


def measurement_problems(data: dict) -> list[str]:
    """Each measurement's rows have a value a column, and its rows and columns distinct names."""
    found = []
    for table in data.get("measurements", []):
        columns = [column["name"] for column in table["columns"]]
        rows = [row["name"] for row in table["rows"]]
        for kind, names in (("column", columns), ("row", rows)):
            if len(set(names)) < len(names):
                found.append(f"{table['name']}: a {kind} name twice")
        found += [f"{table['name']}, {row['name']}: {len(row['values'])} values for {len(columns)} columns"
                  for row in table["rows"] if len(row["values"]) != len(columns)]
    return found


def comparison_values(comparison: dict, table: dict, results: dict[str, dict],
                      paper_marks: list[int] | None = None) -> dict[int | None, float]:
    """x -> the comparison's figure for this table's group and measure, where it has one: a peer's at its own
    marks, the paper's at the table's (or at paper_marks)."""
    if "paper" in comparison:
        if table["measure"] != "training_mean_100" or table["group"] not in GAMES:
            return {}
        marks = paper_marks if paper_marks is not None else [mark["x"] for mark in table["marks"]]
        return {x: value for x in marks if (value := paper_value(table["group"], comparison["paper"], x)) is not None}
    other = compared_table(comparison, table, results)
    return {mark["x"]: mark_figure(mark) for mark in other["marks"] if mark_figure(mark) is not None} if other else {}


def compared_table(comparison: dict, table: dict, results: dict[str, dict]) -> dict | None:
    """The table of a compared result with this table's group and measure, if it has one."""
    return next((other for other in results[comparison["result"]].get("tables", [])
                 if other["group"] == table["group"] and other["measure"] == table["measure"]), None)


def mark_figure(mark: dict) -> float | None:
    """A mark's headline figure: its mean, else its median."""
    return mark.get("mean") if mark.get("mean") is not None else mark.get("median")


def applicable(data: dict, table: dict, results: dict[str, dict]) -> list[tuple[str, dict, int]]:
    """(label, x -> value, decimals to show) of each comparison with a figure for this table."""
    found = [(comparison["label"], comparison_values(comparison, table, results),
              PAPER_DIGITS if "paper" in comparison else MEASURES[table["measure"]].digits)
             for comparison in data.get("comparisons", [])]
    return [(label, values, digits) for label, values, digits in found if values]


def is_curve(table: dict) -> bool:
    """A table of a measure taken at several marks (a curve), not once per seed."""
    return MEASURES[table["measure"]].x is not None and (len(table["marks"]) > 1 or "curve" in table)


def settings_digest(job: Path) -> str:
    """sha256 of a job file's settings as TOML reads them: the same through any edit of its comments."""
    settings = tomllib.loads(job.read_text())
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


def machine() -> dict:
    """This machine: CPU model, cores, the GPU torch sees (or None), torch's version."""
    import torch

    cpu = platform.processor() or None
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        cpu = names[0].strip() if names else cpu
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu, "torch": torch.__version__}


def rlsup_commit() -> str | None:
    """The checkout's commit, with '+changes' when tracked files differ from it; None outside a git clone."""
    def git(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(ROOT), *arguments], capture_output=True, text=True)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return None
    changed = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("+changes" if changed else "")


def run_section(bench: str, command: list[str], job: Path | None, overrides: list[str]) -> dict:
    """The result's "run": the bench, its command line, the job's settings digest and changes, commit, date."""
    return {"bench": bench, "command": " ".join(command), "settings_sha256": settings_digest(job) if job else None,
            "overrides": overrides, "rlsup_commit": rlsup_commit(), "date": date.today().isoformat()}


def mark(x: int | None, per_seed: dict[int, float | None]) -> dict:
    """One mark of a table: each seed's value and the mean of those known."""
    rounded = {str(seed): None if value is None else round(value, DIGITS) for seed, value in per_seed.items()}
    known = [value for value in per_seed.values() if value is not None]
    return {"x": x, "seeds": rounded, "mean": round(statistics.fmean(known), DIGITS) if known else None}


def measured(title: str, job: Path | None, learner: str, run: dict, seeds: list[int], tables: list[dict],
             comparisons: list[dict] = (), solved: float | None = None, note: str = "") -> dict:
    """A result this bench measured on this machine just now; note adds what the bench cannot see."""
    said = f"measured by {run['bench']} on the machine below, from the commit it started at; the figures are its " \
           "printed ones." + (f" {note}" if note else "")
    return {"format": FORMAT, "title": title, "job": job_name(job), "learner": learner, "run": run,
            "machine": machine(), "provenance": {"kind": "measured", "note": said},
            "seeds": seeds, "solved": solved, "tables": tables, "comparisons": list(comparisons)}


def measured_figures(title: str, run: dict, measurements: list[dict], finding: str | None = None,
                     learner: str = "rlsup", job: Path | None = None, seeds: list[int] = (), note: str = "") -> dict:
    """A speed, latency or scheduler bench's result, measured on this machine just now: its measurement
    tables (measurement()) and its finding in a sentence."""
    said = f"measured by {run['bench']} on the machine below, from the commit it started at; the figures are its " \
           "printed ones." + (f" {note}" if note else "")
    return {"format": FORMAT, "title": title, "job": job_name(job), "learner": learner, "run": run,
            "machine": machine(), "provenance": {"kind": "measured", "note": said}, "seeds": list(seeds),
            "measurements": measurements, **({"finding": finding} if finding else {})}


def column(name: str, unit: str | None = None, digits: int | None = None) -> dict:
    """A measurement's column: its name, its unit (one of UNITS; None for words), the decimals shown."""
    return {"name": name, "unit": unit, **({"digits": digits} if digits is not None else {})}


def measurement(name: str, rows_are: str, columns: list[dict], rows: dict[str, list], description: str = "",
                settings: dict | None = None, notes: dict[str, str] | None = None) -> dict:
    """A measurement table: row name -> its values, one a column (None where the bench has none), each rounded to
    DIGITS decimals; notes: row name -> what else the row needs said."""
    def cell(value):
        return round(value, DIGITS) if isinstance(value, float) else value

    return {"name": name, **({"description": description} if description else {}), "rows_are": rows_are,
            **({"settings": settings} if settings else {}), "columns": columns,
            "rows": [{"name": row, "values": [cell(value) for value in values],
                      **({"note": (notes or {})[row]} if row in (notes or {}) else {})} for row, values in rows.items()]}


def started(bench: str, job: Path | None = None, overrides: list[str] = ()) -> dict:
    """The result's "run" as a bench starts: its command line (less its --note, which the provenance says) and the
    commit it runs."""
    arguments = list(sys.argv)
    if "--note" in arguments[:-1]:
        del arguments[arguments.index("--note"):arguments.index("--note") + 2]
    return run_section(bench, ["python", *(argument if argument.startswith("-") else shlex.quote(argument)
                                           for argument in arguments)], job, list(overrides))


def write_figures(arguments, run: dict, name: str, title: str, measurements: list[dict], finding: str | None = None,
                  job: Path | None = None, seeds: list[int] = ()) -> Path:
    """Write a speed, latency or scheduler bench's result to its --out, or to results/NAME.json, and say where."""
    out = arguments.out or RESULTS / f"{name}.json"
    write(out, measured_figures(title, run, measurements, finding, job=job, seeds=seeds, note=arguments.note))
    print(f"result: {out}")
    return out


def span(values: list[float], digits: int = 2) -> str:
    """The range of figures as a sentence says it: '0.97-1.08', or '1.08' where they agree."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low}-{high}"


def game_word(game: str) -> str:
    """A game's words in a result's name: ALE/Pong-v5 -> pong, MinAtar/Breakout-v1 -> minatar-breakout."""
    name = re.sub(r"-v\d+$", "", game.removeprefix("ALE/"))
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def add_out_argument(parser, default: str) -> None:
    """--out (the result file; default says which) and --note, for a bench that writes a result."""
    parser.add_argument("--out", type=Path, help=f"the result file (default: {default})")
    add_note_argument(parser)


def add_note_argument(parser) -> None:
    """--note, the words a bench's user adds to its result's provenance."""
    parser.add_argument("--note", default="", help="said in the result's provenance: what else ran on the machine, "
                        "anything the bench cannot see")


def job_name(job: Path | None) -> str | None:
    """'jobs/NAME.toml' for an example job, as results name it; None for none. A job file elsewhere (a copy)
    is named by its path as given."""
    if job is None:
        return None
    resolved = job.resolve()
    return f"jobs/{resolved.name}" if resolved.parent == ROOT / "jobs" else str(job)


def default_out(stem: str, overrides: list[str]) -> Path:
    """results/STEM.json for a job as written; with changes, their words in the name, so no run of a changed
    job replaces the result of the job as written."""
    words = "-".join(re.sub(r"[^a-z0-9]+", "-", override.lower()).strip("-") for override in overrides)
    return RESULTS / (f"{stem}-{words}.json" if words else f"{stem}.json")


def write(path: Path, data: dict) -> None:
    """Write a result, refusing one that breaks the format (where jsonschema is installed to say so)."""
    try:
        errors = schema_errors(data)
    except ImportError:  # the bench extra has no jsonschema; tests/docs/test_results_pages.py checks every file
        errors = []
    errors += problems(data)
    if errors:
        raise SystemExit(f"{path}: not a valid result: " + "; ".join(errors))
    other = bench_of(path)
    if other not in (None, data["run"]["bench"]):  # two benches' default names meet at results/JOB.json
        raise SystemExit(f"{path} holds a result of {other}, not of {data['run']['bench']}: give --out another file")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def bench_of(path: Path) -> str | None:
    """The bench that wrote the result at path; None where there is none, or nothing readable to keep."""
    try:
        return json.loads(path.read_text())["run"]["bench"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load_all(directory: Path = RESULTS) -> dict[str, dict]:
    """Every result file in directory: name (the file's stem) -> its data."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}
