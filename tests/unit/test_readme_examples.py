"""Every TOML example in the README is read by the loader it is written for, so none can go stale again."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlsup.daemon import settings_file
from rlsup.jobs.admission import judge_file

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
BASE_JOB = ROOT / "jobs" / "cartpole-dqn.toml"
# A fragment of a job file (a [sweep] or [scheduler] table) is judged as part of this example, with seeds enough
# for an experiment that decides, as `rlsup validate FILE --seeds 1-4` judges it, and a budget past the ASHA
# example's last rung (the README's fragments are for a job of a million steps or so, not CartPole's 50,000).
SEEDS = (1, 2, 3, 4)
BUDGET = "total_steps = 1_000_000"
DAEMON_TABLES = ("[[cluster]]",)
DAEMON_MARK = "# $RLSUP_HOME/daemon.toml"


def toml_examples() -> list[tuple[int, str]]:
    """(line, text) of each ```toml block of the README."""
    text = README.read_text(encoding="utf-8")
    return [(text[:found.start()].count("\n") + 2, found.group(1))
            for found in re.finditer(r"```toml\n(.*?)```", text, re.DOTALL)]


def is_daemon_settings(example: str) -> bool:
    first = next(line.strip() for line in example.splitlines() if line.strip())
    return first == DAEMON_MARK or first in DAEMON_TABLES


def test_the_readme_has_toml_examples_of_both_kinds():
    """The parametrised test below would pass on a README that lost its examples: it must find both kinds."""
    examples = [example for _, example in toml_examples()]
    assert any(is_daemon_settings(example) for example in examples)
    assert any(not is_daemon_settings(example) for example in examples)


@pytest.mark.parametrize(("line", "example"), toml_examples(), ids=lambda value: str(value)[:20])
def test_a_readme_toml_example_is_accepted_by_its_loader(line, example, tmp_path):
    """Issue 50's done-when: its PBT example perturbed `dqn.exploration_final`, a field that does not exist."""
    if is_daemon_settings(example):
        (tmp_path / "daemon.toml").write_text(example, encoding="utf-8")
        settings_file.load_settings(tmp_path)
        return
    job = tmp_path / "example.toml"
    base = re.sub(r"(?m)^total_steps = .*$", BUDGET, BASE_JOB.read_text(encoding="utf-8"), count=1)
    assert BUDGET in base, f"{BASE_JOB} has no total_steps line to raise"
    job.write_text(base + "\n" + example, encoding="utf-8")
    judge_file(job, seeds=SEEDS, home=tmp_path / "home")
