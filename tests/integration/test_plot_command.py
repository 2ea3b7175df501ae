"""`rlsup plot` on two real short runs: pictures, the terminal drawing, groups, and one-line errors."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from rlsup_testing import assert_one_line_error, rlsup_command, run_rlsup, trained_runs

from rlsup import paths
from rlsup.views import plots as plotting
from rlsup.jobs.store import Store


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    return trained_runs(tmp_path_factory, seeds=(1, 2))


@pytest.mark.parametrize("suffix, header", [(".png", b"\x89PNG\r\n\x1a\n"), (".svg", b"<?xml")])
def test_a_picture_of_two_runs(runs, tmp_path, suffix, header):
    out = tmp_path / f"curves{suffix}"
    result = run_rlsup("plot", *runs, "--out", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out)
    assert out.read_bytes().startswith(header)
    if suffix == ".svg":
        text = out.read_text()
        assert "run-1" in text and "run-2" in text and "Episode return · smoothing 0.9" in text


def test_jobs_are_named_by_id_or_name_and_labelled_by_name(runs, tmp_path, rlsup_home):
    with Store(rlsup_home) as store:
        first, _ = [store.submit(name=f"seed-{index}", spec_path=run / paths.JOB_FILE, run_dir=run).id
                    for index, run in enumerate(runs, start=1)]
    out = tmp_path / "jobs.svg"
    # Jobs of no experiment stay alone under --group-by experiment.
    for grouping in ((), ("--group-by", "experiment")):
        result = run_rlsup("plot", str(first), "seed-2", *grouping, "--out", out)
        assert result.returncode == 0, result.stderr
        text = out.read_text()
        assert "seed-1" in text and "seed-2" in text and "run-1" not in text and "mean of" not in text


def test_a_group_is_one_legend_entry_with_a_band(runs, tmp_path):
    out = tmp_path / "group.svg"
    result = run_rlsup("plot", *runs, "--group-by", "all", "--metric", "eval_return", "--out", out)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert plotting.group_label("all runs", 2) in text and "run-1" not in text
    assert "Evaluation return · smoothing off" in text  # evaluations are not smoothed unless asked


def test_runs_grouped_by_env_make_one_band_per_game_foreground_runs_too(runs, tmp_path):
    """A sweep over games run seed by seed in the foreground (bench/minatar_learning.py): a band per game."""
    other = tmp_path / "run-3"
    shutil.copytree(runs[0], other)
    job = other / paths.JOB_FILE
    job.write_text(job.read_text().replace('id = "CartPole-v1"', 'id = "Acrobot-v1"'))
    out = tmp_path / "games.svg"
    result = run_rlsup("plot", *runs, other, "--group-by", "env", "--panels", "--out", out)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert plotting.group_label("CartPole-v1", 2) in text and "Acrobot-v1" in text and "run-1" not in text
    assert 'id="axes_2"' in text and 'id="axes_3"' not in text


def test_panels_give_each_line_its_own_axes_and_scale(runs, tmp_path):
    # Games of one sweep score on scales a hundred times apart: side by side, one would flatten the others.
    out = tmp_path / "panels.svg"
    result = run_rlsup("plot", *runs, "--panels", "--out", out)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert 'id="axes_1"' in text and 'id="axes_2"' in text and 'id="axes_3"' not in text
    assert "run-1" in text and "run-2" in text and 'id="legend_1"' not in text  # each panel is titled instead
    drawn = subprocess.run(rlsup_command("plot", *runs, "--panels"), capture_output=True, text=True,
                           env={**os.environ, "COLUMNS": "120", "LINES": "30"}, timeout=120)
    assert drawn.returncode == 0, drawn.stderr
    assert "run-1" in drawn.stdout and "run-2" in drawn.stdout and len(drawn.stdout.splitlines()) <= 30


def test_without_out_the_curves_are_drawn_in_the_terminal(runs):
    result = subprocess.run(rlsup_command("plot", *runs, "--smooth", "0.6"), capture_output=True, text=True,
                            env={**os.environ, "COLUMNS": "100", "LINES": "30"}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "run-1" in result.stdout and "run-2" in result.stdout and "smoothing 0.6" in result.stdout
    assert "\x1b[" not in result.stdout  # into a pipe: no colour codes
    assert len(result.stdout.splitlines()) <= 30


def test_bad_input_is_one_line_with_exit_code_2(runs, tmp_path):
    assert_one_line_error(run_rlsup("plot", runs[0], "no-such-job"), 2, "'no-such-job'")
    assert_one_line_error(run_rlsup("plot", *runs, "--metric", "retrun"), 2, "'retrun'", "eval_return")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert_one_line_error(run_rlsup("plot", *runs, "--out", blocked / "curves.png"), 2, "cannot write",
                          "curves.png")
    assert_one_line_error(run_rlsup("plot", *runs, "--out", tmp_path / "curves.gif"), 2, ".png, .svg")
    assert_one_line_error(run_rlsup("plot", *runs, "--smooth", "1.5"), 2, "--smooth 1.5")


def test_without_matplotlib_the_error_says_what_to_install(runs, tmp_path):
    # A matplotlib that cannot be imported, first on the path: as on a machine without the plot extra.
    missing = tmp_path / "no-matplotlib" / "matplotlib"
    missing.mkdir(parents=True)
    (missing / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    path = os.pathsep.join(filter(None, [str(missing.parent), os.environ.get("PYTHONPATH")]))
    result = subprocess.run(rlsup_command("plot", *runs, "--out", tmp_path / "curves.png"), capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": path}, timeout=120)
    assert_one_line_error(result, 2, "pip install 'rlsup[plot]'")
    assert not (tmp_path / "curves.png").exists()


def sweep_jobs(home: Path, runs: list[Path], tmp_path: Path) -> None:
    """A sweep of two learning rates times two seeds in the store, each job a copy of a real run."""
    with Store(home) as store:
        for lr in ("1e-3", "3e-4"):
            for seed, run in enumerate(runs, start=1):
                run_dir = tmp_path / f"sweep-lr{lr}-s{seed}"
                shutil.copytree(run, run_dir)
                overrides = {"dqn.lr": {"value": float(lr), "pinned": True}, "job.seed": {"value": seed, "pinned": True}}
                store.submit(name=run_dir.name, spec_path=run / paths.JOB_FILE, run_dir=run_dir,
                             overrides=overrides, experiment="sweep")


def test_a_sweep_is_drawn_by_variant_unless_grouped_by_experiment(runs, tmp_path, rlsup_home):
    # Averaging two learning rates into one line hid the comparison the sweep was run for.
    sweep_jobs(rlsup_home, runs, tmp_path)
    out = tmp_path / "sweep.svg"
    for grouping in ((), ("--group-by", "variant")):
        result = run_rlsup("plot", "sweep", *grouping, "--out", out)
        assert result.returncode == 0, result.stderr
        text = out.read_text()
        assert all(plotting.group_label(f"sweep dqn.lr={lr}", 2) in text for lr in ("0.001", "0.0003")), grouping
        assert plotting.group_label("sweep", 4) not in text
    result = run_rlsup("plot", "sweep", "--group-by", "experiment", "--out", out)
    assert result.returncode == 0, result.stderr
    assert plotting.group_label("sweep", 4) in out.read_text()
