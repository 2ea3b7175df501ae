"""Results are data: every results/*.json holds to bench/results_format.py and names a bench that exists, the
docs/results pages are a fresh render of them, each example job file names its claim in one line pointing to its
result, with no measurement table of its own, and no hand-written page states a bench's figure without linking
the result it is rendered on."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import render_results  # noqa: E402
import results_format  # noqa: E402

JOBS = sorted((ROOT / "jobs").glob("*.toml"))
RESULTS = results_format.load_all()
# A header names its example and how to train and measure it; a longer run of comment lines is a lab notebook.
MAX_COMMENT_BLOCK = 10
# A figure with decimals (9.60, 0.03): a claim line holds a few, a measurement table holds them row after row.
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+")
MAX_FIGURE_LINES = 2
# Where the measurement notes stood before they became results: the header the rule must refuse.
NOTEBOOK = "54f84b3^:jobs/minatar-vtrace.toml"
CLAIM_LINES = 5  # a claim line sits near the top: within the header's first lines
# The hand-written pages, whose bench figures live on the results pages they link.
PAGES = [*sorted((ROOT / "docs" / "guides").glob("*.md")), *(ROOT / "docs" / name for name in
                                                           ("architecture.md", "index.md", "quickstart.md"))]
# A figure of time, speed, a ratio or a share (0.5-0.9 s, 255 ms, 1,396 steps/s, 1.27x, 26%, 1.2 times)...
FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:[-–]\d[\d,]*(?:\.\d+)?)? ?"
                    r"(?:x\b|×|%|ms\b|µs\b|s\b|steps/s|frames/s|MB\b|times\b)")
# ...is a bench's where it is a measured ratio or its paragraph says it was measured; a setting (a lock's 10 s,
# a slice of 50 ms) is neither.
RATIO = re.compile(r"(?<![\w.])\d+\.\d+(?:x\b|×)")
ATTRIBUTED = re.compile(r"measured (?:by|on|with)|bench/\w+\.py", re.IGNORECASE)
# The pages before their figures moved to the results pages: the rule must refuse them.
FIGURES_MOVED = "a8bd0ef^"


def measurement_table(text: str) -> list[str]:
    """Why a job file's comments read as a measurement table: a block of over MAX_COMMENT_BLOCK comment lines,
    or more than MAX_FIGURE_LINES comment lines with two or more decimal figures each."""
    found, block, figure_lines = [], 0, 0
    for number, line in enumerate(text.splitlines(), 1):
        comment = line.lstrip().startswith("#")
        block = block + 1 if comment else 0
        if block == MAX_COMMENT_BLOCK + 1:
            found.append(f"line {number}: a block of more than {MAX_COMMENT_BLOCK} comment lines")
        if comment and len(DECIMAL.findall(line)) >= 2:
            figure_lines += 1
            if figure_lines == MAX_FIGURE_LINES + 1:
                found.append(f"line {number}: more than {MAX_FIGURE_LINES} comment lines of figures")
    return found


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_every_result_holds_to_the_format(name: str) -> None:
    data = RESULTS[name]
    assert results_format.schema_errors(data) == []
    assert results_format.problems(data, set(RESULTS)) == []


def test_the_committed_pages_are_a_fresh_render() -> None:
    """The pages cannot drift from the data: `python bench/render_results.py` after any change to results/."""
    pages = render_results.render_pages(RESULTS)
    committed = {path.name: path.read_text() for path in render_results.PAGES.glob("*.md")}
    assert sorted(committed) == sorted(pages), "render again: python bench/render_results.py"
    for file_name, text in pages.items():
        assert committed[file_name] == text, f"docs/results/{file_name} differs from a fresh render"
    plots = {path.stem for path in render_results.PAGES.glob("*.svg")}
    assert plots == {name for name, data in RESULTS.items() if render_results.plottable(data)}


def test_a_changed_result_changes_its_page() -> None:
    """The comparison above can fail: a figure edited in the data shows on the rendered page."""
    data = RESULTS["minatar-vtrace"]
    first, *others = data["tables"]
    changed = {**data, "tables": [{**first, "marks": [*first["marks"][:-1], {**first["marks"][-1], "mean": 99.99}]},
                                  *others]}
    assert "**99.99**" in render_results.render_page("minatar-vtrace", changed, RESULTS, plotted=True)
    assert "**99.99**" not in render_results.render_page("minatar-vtrace", data, RESULTS, plotted=True)


@pytest.mark.parametrize("job", JOBS, ids=lambda path: path.stem)
def test_every_job_file_names_its_claim_and_its_result(job: Path) -> None:
    """One `# Claim:` line near the top: "none yet" with no result, or a result of this job as written."""
    text = job.read_text()
    claims = [line for line in text.splitlines() if line.startswith("# Claim:")]
    assert len(claims) == 1, f"{job.name}: one '# Claim:' line, not {len(claims)}"
    assert claims[0] in text.splitlines()[:CLAIM_LINES], f"{job.name}: the claim line sits in its first lines"
    named = render_results.CLAIMED_RESULT.search(claims[0])
    if named is None:
        assert claims[0].startswith("# Claim: none"), f"{job.name}: a claim names its result: {claims[0]}"
        return
    assert named["name"] in RESULTS, f"{job.name}: no results/{named['name']}.json"
    result = RESULTS[named["name"]]
    assert result["job"] == f"jobs/{job.name}" and result["learner"] == "rlsup", named["name"]
    assert result["run"]["overrides"] == [], f"results/{named['name']}.json is of a changed job, not this file"
    assert result["run"]["settings_sha256"] == results_format.settings_digest(job), (
        f"{job.name}'s settings are not those results/{named['name']}.json measured: measure again")


@pytest.mark.parametrize("job", JOBS, ids=lambda path: path.stem)
def test_no_job_file_holds_a_measurement_table(job: Path) -> None:
    assert measurement_table(job.read_text()) == []


def test_the_rule_refuses_the_notebook_headers_it_replaced() -> None:
    old = subprocess.run(["git", "-C", str(ROOT), "show", NOTEBOOK], capture_output=True, text=True)
    if old.returncode != 0:
        pytest.skip(f"no git history here to read {NOTEBOOK} from")
    assert len(measurement_table(old.stdout)) == 2


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_every_result_names_a_bench_that_exists(name: str) -> None:
    bench = RESULTS[name]["run"]["bench"]
    assert bench.startswith("bench/") and (ROOT / bench).is_file(), f"results/{name}.json: no {bench}"


def test_a_changed_measurement_changes_its_page() -> None:
    """A speed result's figure edited in the data shows on its page, and a row short of a value is refused."""
    data = RESULTS["env-throughput-pong"]
    first, *others = data["measurements"]
    row = {**first["rows"][0], "values": [98765, *first["rows"][0]["values"][1:]]}
    changed = {**data, "measurements": [{**first, "rows": [row, *first["rows"][1:]]}, *others]}
    assert "| 98,765 |" in render_results.render_page("env-throughput-pong", changed, RESULTS, plotted=False)
    assert "98,765" not in render_results.render_page("env-throughput-pong", data, RESULTS, plotted=False)
    short = {**data, "measurements": [{**first, "rows": [{**row, "values": row["values"][:-1]}]}]}
    assert results_format.problems(short) and not results_format.problems(data)


def bench_figures(text: str) -> list[str]:
    """The paragraphs of a page that state a bench's figure and link no result page (code left out; a list
    belongs to the line that introduces it with a colon)."""
    paragraphs: list[str] = []
    for block in re.split(r"\n\s*\n", re.sub(r"```.*?```", "", text, flags=re.DOTALL)):
        if paragraphs and paragraphs[-1].rstrip().endswith(":"):
            paragraphs[-1] += "\n" + block
        else:
            paragraphs.append(block)
    found = []
    for paragraph in paragraphs:
        prose = re.sub(r"`[^`]*`", "", paragraph)
        if FIGURE.search(prose) and (RATIO.search(prose) or ATTRIBUTED.search(paragraph)) \
                and not re.search(r"\]\([./]*results/", paragraph):
            found.append(" ".join(paragraph.split())[:100])
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.stem)
def test_no_page_states_a_bench_figure_without_its_result(page: Path) -> None:
    """A bench's figure lives in results/ and on its rendered page; a guide keeps the finding and links it."""
    assert bench_figures(page.read_text()) == []


def test_the_figure_rule_refuses_the_pages_it_replaced() -> None:
    flagged = []
    for page in PAGES:
        old = subprocess.run(["git", "-C", str(ROOT), "show", f"{FIGURES_MOVED}:{page.relative_to(ROOT)}"],
                             capture_output=True, text=True)
        if old.returncode != 0:
            pytest.skip(f"no git history here to read {FIGURES_MOVED} from")
        flagged += [page.stem for _ in bench_figures(old.stdout)]
    assert sorted(set(flagged)) == ["algorithms", "clusters", "environments", "experiments", "gpu", "jobs",
                                    "quickstart"]


def test_a_bench_does_not_replace_another_benchs_result_of_the_same_job(tmp_path: Path) -> None:
    """learning_seeds.py and minatar_learning.py both name a job's result results/JOB.json by default: the second
    to run on one job would have replaced the first's figures with its own."""
    import json
    first = json.loads((ROOT / "results" / "minatar-breakout-dqn.json").read_text())
    path = tmp_path / "minatar-breakout-dqn.json"
    results_format.write(path, first)
    results_format.write(path, first)  # the same bench again: a new measurement replaces its last
    other = {**first, "run": {**first["run"], "bench": "bench/another_bench.py"}}
    with pytest.raises(SystemExit, match=r"holds a result of bench/.*: give --out"):
        results_format.write(path, other)
    assert json.loads(path.read_text()) == first
