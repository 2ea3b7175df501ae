"""Every example in the README and the hand-written docs pages is checked against the code, so none can go stale."""
from __future__ import annotations

import contextlib
import io
import re
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomli_w
from markdown.extensions.toc import slugify

from rlsup.cli.parser import build_parser
from rlsup.daemon import settings_file
from rlsup.jobs.admission import judge_file
from rlsup.spec import toml_text

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# Written from the code's declarations and from results/*.json at build time, not by hand: their own tests
# (tests/docs/test_site.py) and generators answer for them.
GENERATED = ("reference", "results")
BASE_JOB = "jobs/cartpole-dqn.toml"
# A fragment of a job file is judged as part of an example job, with seeds enough for an experiment that
# decides, as `rlsup validate FILE --seeds 1-4` judges it, and a budget past the ASHA example's last rung (the
# fragments are for a job of a million steps or so, not CartPole's 50,000).
SEEDS = (1, 2, 3, 4)
BUDGET = 1_000_000
DAEMON_MARK = "# $RLSUP_HOME/daemon.toml"
DAEMON_TABLES = ("[[cluster]]",)
# A fragment's first line may name the example it belongs to: `# added to jobs/cartpole-vtrace.toml`.
NAMED_BASE = re.compile(r"^#.*?\b(jobs/[\w.-]+\.toml)\b")
JOB_FILE_NAME = re.compile(r"(?<![\w/.-])jobs/[\w.-]+\.toml\b")
SHELLS = ("bash", "sh", "shell", "console")
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<language>[\w-]*)[^\n]*\n(?P<body>.*?)^[ \t]*```[ \t]*$",
                   re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


@dataclass(frozen=True)
class Example:
    """A fenced block of a page: where it starts (its first line of content) and what it holds."""

    page: Path
    line: int
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """The README and every hand-written page of docs/, found by glob so that a new page is covered unasked."""
    written = [page for page in sorted(DOCS.rglob("*.md")) if page.relative_to(DOCS).parts[0] not in GENERATED]
    return [README, *written]


def examples(page: Path) -> list[Example]:
    text = page.read_text(encoding="utf-8")
    return [Example(page, text[:block.start("body")].count("\n") + 1, block["language"],
                    textwrap.dedent(block["body"])) for block in FENCE.finditer(text)]


def all_examples(language: tuple[str, ...]) -> list[Example]:
    return [example for page in pages() for example in examples(page) if example.language in language]


# --- TOML: each block read by the loader it is written for ---------------------------------------------------

def is_daemon_settings(example: str) -> bool:
    first = next(line.strip() for line in example.splitlines() if line.strip())
    return first == DAEMON_MARK or first in DAEMON_TABLES


def is_whole_job_file(data: dict) -> bool:
    return "job" in data and "env" in data


def with_fragment(base: dict, fragment: dict) -> dict:
    """base with fragment's keys in force, table by table (a [[replay]] list replaces the base's)."""
    merged = dict(base)
    for key, value in fragment.items():
        both_tables = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = with_fragment(merged[key], value) if both_tables else value
    return merged


def job_text(example: Example, data: dict) -> str:
    """The job file an example stands for: itself when whole, else its fragment inside the example it names."""
    if is_whole_job_file(data):
        return example.text
    named = NAMED_BASE.match(example.text.lstrip())
    base = toml_text.loads((ROOT / (named[1] if named else BASE_JOB)).read_text(encoding="utf-8"))
    job = base.setdefault("job", {})
    job["total_steps"] = max(job.get("total_steps", 0), BUDGET)
    return tomli_w.dumps(with_fragment(base, data))


def test_the_docs_have_toml_examples_of_both_kinds():
    """The parametrised test below would pass on pages that lost their examples: it must find both kinds."""
    texts = [example.text for example in all_examples(("toml",))]
    assert any(is_daemon_settings(text) for text in texts)
    assert any(not is_daemon_settings(text) for text in texts)


@pytest.mark.parametrize("example", all_examples(("toml",)), ids=lambda example: example.where)
def test_a_toml_example_is_accepted_by_its_loader(example, tmp_path):
    """Issue 50's done-when: the README's PBT example perturbed `dqn.exploration_final`, a field that does not
    exist, and nothing noticed."""
    try:
        data = toml_text.loads(example.text)
        if is_daemon_settings(example.text):
            (tmp_path / "daemon.toml").write_text(example.text, encoding="utf-8")
            settings_file.load_settings(tmp_path)
            return
        job = tmp_path / "example.toml"
        job.write_text(job_text(example, data), encoding="utf-8")
        judge_file(job, seeds=SEEDS, home=tmp_path / "home")
    except Exception as error:  # any refusal: say which example, not only the temporary file
        pytest.fail(f"{example.where}: {type(error).__name__}: {error}")


# --- Commands: each `rlsup` line parsed by rlsup's own parser --------------------------------------------------

@dataclass(frozen=True)
class CommandLine:
    where: str
    words: tuple[str, ...]  # after `rlsup`


def logical_lines(example: Example) -> list[tuple[int, str]]:
    """(line, text) of each command of a shell block: continuations joined, a console's output left out."""
    found: list[tuple[int, str]] = []
    pending = ""
    for offset, line in enumerate(example.text.splitlines()):
        if example.language == "console" and not pending:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        start = example.line + offset if not pending else start
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        found.append((start, pending + line))
        pending = ""
    return found


def rlsup_commands(text: str) -> list[tuple[str, ...]]:
    """The words after `rlsup` of each command in a shell line (`a && rlsup list | head`, `<(rlsup ...)`)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # shlex would cut `a#b` at its #; a shell starts a comment only at a word's start
    tokens = list(lexer)
    comment = next((index for index, token in enumerate(tokens) if token.startswith("#")), len(tokens))
    commands, current = [], []
    for token in [*tokens[:comment], ";"]:
        if set(token) <= set("();<>|&"):
            while current and re.fullmatch(r"[A-Za-z_]\w*=.*", current[0]):  # VAR=value rlsup ...
                current.pop(0)
            if current and current[0] == "rlsup":
                commands.append(tuple(current[1:]))
            current = []
        else:
            current.append(token)
    return commands


def command_lines(page: Path | None = None) -> list[CommandLine]:
    shells = [example for example in all_examples(SHELLS) if page in (None, example.page)]
    return [CommandLine(f"{example.page.relative_to(ROOT)}:{line}", words)
            for example in shells for line, text in logical_lines(example) for words in rlsup_commands(text)]


def test_the_readme_and_the_guides_have_command_examples():
    """The parametrised test below would pass on pages that lost their commands: both must have some."""
    assert command_lines(README)
    assert [command for command in command_lines() if "docs/guides/" in command.where]


@pytest.mark.parametrize("command", command_lines(), ids=lambda command: command.where)
def test_an_rlsup_command_example_is_accepted_by_the_parser(command):
    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(list(command.words))
        except SystemExit as leaving:  # argparse's usage errors, and --help (which leaves with 0)
            if leaving.code not in (0, None):
                pytest.fail(f"{command.where}: rlsup {shlex.join(command.words)}: {said.getvalue().strip()}")


# --- Names and links ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_job_file_a_page_names_exists(page):
    text = page.read_text(encoding="utf-8")
    missing = [f"{page.relative_to(ROOT)}:{text[:found.start()].count(chr(10)) + 1}: {found[0]}"
               for found in JOB_FILE_NAME.finditer(text) if not (ROOT / found[0]).is_file()]
    assert not missing, "no such job file:\n" + "\n".join(missing)


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as mkdocs (and, for plain headings, GitHub) make them."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slugify(heading, "-") for heading in re.findall(r"^#{1,6} +(.+?) *$", text, re.MULTILINE)}


def test_every_link_of_the_readme_leads_somewhere():
    """The README is read on GitHub, outside the site's link check: each of its links is one click to a page
    and a section that exist."""
    text = README.read_text(encoding="utf-8")
    broken = []
    for link in LINK.finditer(text):
        target = link["target"]
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        page = ROOT / path if path else README
        if not page.exists() or (anchor and anchor not in anchors(page)):
            broken.append(f"README.md:{text[:link.start()].count(chr(10)) + 1}: {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_readme_stays_a_front_door():
    """Issue 51: the README is under 150 lines, its detail on the site's pages."""
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines < 150, f"README.md has {lines} lines; move detail into docs/"


def test_ci_runs_the_readmes_test_command():
    """.ci/run runs exactly the README's test command: the two must change together."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = [line.strip() for line in ci.splitlines() if "pytest" in line and not line.lstrip().startswith("#")]
    assert command, ".ci/run runs no pytest"
    shells = [example.text for example in examples(README) if example.language in SHELLS]
    assert any(command[-1] in text for text in shells), f"the README's commands do not hold .ci/run's {command[-1]!r}"
