"""A [scheduler] table: each bad one is refused in one line naming file, line and field, before anything is queued."""
from __future__ import annotations

import pytest
from rlsup_testing import cartpole_text

from rlsup import client
from rlsup.jobs import admission
from rlsup import spec as specs
from rlsup.cli import main as cli_main
from rlsup.decisions.asha import AshaSettings
from rlsup.decisions.pbt import PbtSettings
from rlsup.jobs import standings
from rlsup.jobs.store import Store
from rlsup.spec.scheduler_table import from_json, settings_json

ASHA = '[scheduler]\nkind = "asha"\nmetric = "eval_return"\nrungs = [600, 1_200]\nkeep = 0.34\n'
PBT = '[scheduler]\nkind = "pbt"\ninterval = 500\nquantile = 0.25\nperturb = { "dqn.lr" = [0.8, 1.25] }\n'


def scheduler_problems(tmp_path, table: str, *, members: int = 4) -> list[str]:
    """The problems submit finds, as the lines a user reads."""
    path = tmp_path / "job.toml"
    text = cartpole_text(total_steps=2_000) + "\n" + table
    path.write_text(text)
    try:
        loaded = specs.load(path)
        admission.scheduler_of(path, text, loaded, members=members)
    except specs.SpecError as error:
        return str(error).splitlines()
    return []


def line_of(tmp_path, key: str) -> int:
    """The line of key in the [scheduler] table."""
    text = (tmp_path / "job.toml").read_text().splitlines()
    start = text.index("[scheduler]")
    return next(number for number, line in enumerate(text, 1) if number > start and line.startswith(key))


@pytest.mark.parametrize("table, old, new, field, words", [
    (ASHA, 'kind = "asha"', 'kind = "hyperband"', "scheduler.kind", "must be one of 'asha', 'pbt'"),
    (ASHA, "rungs = [600, 1_200]", "rungs = [600, 600]", "scheduler.rungs", "must increase"),
    (ASHA, "rungs = [600, 1_200]", "rungs = [600, 5_000]", "scheduler.rungs", "not below the job's total_steps"),
    (ASHA, "keep = 0.34", "keep = 1.0", "scheduler.keep", "between 0 and 1"),
    (ASHA, "keep = 0.34", "keep = 0", "scheduler.keep", "between 0 and 1"),
    (ASHA, 'metric = "eval_return"', 'metric = "loss"', "scheduler.metric", "no job records 'loss'"),
    (ASHA, "keep = 0.34", "keep = 0.34\neta = 3", "scheduler.eta", "is not a key of an ASHA [scheduler]"),
    (PBT, "interval = 500", "interval = 2_000", "scheduler.interval", "not below the job's total_steps"),
    (PBT, "quantile = 0.25", "quantile = 0.6", "scheduler.quantile", "at most 0.5"),
    (PBT, '"dqn.lr" = [0.8, 1.25]', '"dqn.lr" = []', "scheduler.perturb", "must list factors above 0"),
    (PBT, '"dqn.lr" = [0.8, 1.25]', '"dqn.lr" = [0.8, -1]', "scheduler.perturb", "must list factors above 0"),
])
def test_each_bad_table_is_one_located_line(tmp_path, table, old, new, field, words) -> None:
    [problem] = scheduler_problems(tmp_path, table.replace(old, new))
    where = f"{tmp_path / 'job.toml'}:{line_of(tmp_path, field.split('.')[-1])}: {field}: "
    assert problem.startswith(where) and words in problem, problem


def test_perturbing_a_field_a_fork_refuses_is_named_at_its_line(tmp_path) -> None:
    table = PBT.replace('"dqn.lr" = [0.8, 1.25]', '"env.sticky_actions" = [0.8, 1.25]')
    [problem] = scheduler_problems(tmp_path, table)
    assert problem.startswith(f"{tmp_path / 'job.toml'}:{line_of(tmp_path, 'perturb')}: scheduler.perturb: ")
    assert "env.sticky_actions: a PBT member is a fork, and a fork refuses it" in problem
    [problem] = scheduler_problems(tmp_path, PBT.replace('"dqn.lr"', '"dqn.hidden_sizes"'))
    assert "dqn.hidden_sizes: is not a number field" in problem


def test_a_perturbed_field_that_does_not_exist_gets_a_suggestion(tmp_path) -> None:
    """Issue 50 item 11: an unknown perturb field said only that it was no number field, where a [sweep] or a
    table's unknown field says "did you mean"; the suggestion is of number fields, the ones PBT perturbs."""
    [problem] = scheduler_problems(tmp_path, PBT.replace('"dqn.lr"', '"dqn.epsilon_final"'))
    assert "scheduler.perturb: dqn.epsilon_final: unknown field (did you mean 'dqn.epsilon_end'?)" in problem
    [problem] = scheduler_problems(tmp_path, PBT.replace('"dqn.lr"', '"dqn.lrr"'))
    assert "(did you mean 'dqn.lr'?)" in problem


def test_a_scheduler_needs_an_experiment(tmp_path) -> None:
    [alone] = scheduler_problems(tmp_path, ASHA, members=1)
    assert "decides among an experiment's members" in alone and "--seeds" in alone
    [alone] = scheduler_problems(tmp_path, PBT, members=1)
    table_line = (tmp_path / "job.toml").read_text().splitlines().index("[scheduler]") + 1
    assert alone.startswith(f"{tmp_path / 'job.toml'}:{table_line}: scheduler: "), alone
    assert scheduler_problems(tmp_path, PBT) == []


def test_a_good_table_reads_back_from_the_store_as_it_was_written(tmp_path) -> None:
    assert scheduler_problems(tmp_path, ASHA) == []
    settings = specs.scheduler_of((tmp_path / "job.toml").read_text(), specs.load(tmp_path / "job.toml"),
                                  fork_refuses=lambda name: None)
    assert settings == AshaSettings((600, 1_200), 0.34, "eval_return")
    assert from_json(settings_json(settings)) == settings
    pbt = PbtSettings(500, 0.25, {"dqn.lr": (0.8, 1.25)}, "return")
    assert from_json(settings_json(pbt)) == pbt and from_json("{") is None


def test_submit_refuses_a_bad_table_in_one_line_and_queues_nothing(tmp_path, rlsup_home, capsys) -> None:
    path = tmp_path / "job.toml"
    path.write_text(cartpole_text(total_steps=2_000) + "\n" + ASHA.replace("keep = 0.34", "keep = 3"))
    code = cli_main(["submit", str(path), "--seeds", "1-4"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "scheduler.keep" in err, err
    assert "Traceback" not in err


def test_more_seeds_join_a_deciding_experiment_only_with_its_own_scheduler(tmp_path, rlsup_home, capsys) -> None:
    path = tmp_path / "job.toml"
    path.write_text(cartpole_text(total_steps=2_000) + "\n" + ASHA)
    client.submit_experiment(path, seeds=(1, 2), start_daemon=False)
    client.submit_experiment(path, seeds=(3, 4), experiment="job", start_daemon=False)  # joins at rung 1
    path.write_text(cartpole_text(total_steps=2_000) + "\n" + ASHA.replace("keep = 0.34", "keep = 0.5"))
    capsys.readouterr()
    assert cli_main(["submit", str(path), "--seeds", "5-6", "--experiment", "job"]) == 2
    err = capsys.readouterr().err
    assert "experiment job decides with another [scheduler]" in err and len(err.strip().splitlines()) == 1, err
    with Store() as store:
        assert len(store.experiment_jobs("job")) == 4
        assert standings.scheduler(store, "job") == AshaSettings((600, 1_200), 0.34, "eval_return")


def test_the_json_schema_takes_both_kinds_of_scheduler_and_refuses_what_loading_refuses(tmp_path) -> None:
    import jsonschema
    import tomllib_compat

    validator = jsonschema.Draft202012Validator(specs.json_schema())
    for table in (ASHA, PBT):
        validator.validate(tomllib_compat.tomllib.loads(table))
    for table, old, new in ((ASHA, 'kind = "asha"', 'kind = "hyperband"'), (ASHA, "keep = 0.34", "keep = 1.5"),
                            (ASHA, "rungs = [600, 1_200]", "rungs = []"), (PBT, "interval = 500", "interval = 0"),
                            (PBT, "quantile = 0.25", "quantile = 0.75"), (ASHA, "keep = 0.34", "keep = 0.34\neta = 3"),
                            (PBT, '"dqn.lr" = [0.8, 1.25]', '"dqn.lr" = []')):
        assert not validator.is_valid(tomllib_compat.tomllib.loads(table.replace(old, new))), new
