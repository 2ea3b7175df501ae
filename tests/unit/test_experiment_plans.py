"""Experiments without a daemon: --seeds parsing, [sweep] validation and expansion, pinned overrides, group rows."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from rlsup import spec as specs
from rlsup.spec import experiments
from rlsup.views import groups
from rlsup.jobs import store as store_module
from rlsup.daemon import edits
from rlsup.jobs.state import State
from rlsup.views.jobs import JobRow
from rlsup.jobs.store import Store

BASE = '[job]\nname = "cp"\nseed = 3\n[dqn]\nlr = 1e-3\n'


@pytest.mark.parametrize("text, seeds", [("1-5", (1, 2, 3, 4, 5)), ("1,4,9", (1, 4, 9)), ("1-3,7", (1, 2, 3, 7)),
                                         (" 0 - 1 , 5 ", (0, 1, 5)), ("4", (4,))])
def test_seeds_are_ranges_and_lists(text: str, seeds: tuple) -> None:
    assert experiments.parse_seeds(text) == seeds


@pytest.mark.parametrize("text, fragment", [("", "'' is not a seed"), ("1-", "'1-' is not a seed"),
                                            ("a,2", "'a' is not a seed"), ("-3", "'-3' is not a seed"),
                                            ("5-1", "runs backwards; write 1-5"), ("1-3,2", "seed 2 is given twice"),
                                            ("0-5000", "more than 1000 seeds"),
                                            # Arabic-Indic and full-width digits are digits to \d, not seeds
                                            ("\u0661-\u0663", "is not a seed"), ("\uff11", "is not a seed")])
def test_bad_seeds_are_one_sentence_naming_the_argument(text: str, fragment: str) -> None:
    with pytest.raises(experiments.SeedsError) as raised:
        experiments.parse_seeds(text)
    message = str(raised.value)
    assert message.startswith(f"--seeds {text!r}: ") and fragment in message and "\n" not in message


def test_a_sweep_expands_to_variants_times_seeds_named_readably() -> None:
    text = BASE + '[sweep]\n"dqn.lr" = [1e-4, 3e-4]\ndqn.gamma = [0.9, 0.99]\n'
    sweep = specs.sweep_of(text)
    assert sweep.fields == (("dqn.lr", (1e-4, 3e-4)), ("dqn.gamma", (0.9, 0.99)))
    planned = experiments.plan(sweep, (1, 2), "cp")
    assert [job.name for job in planned][:3] == ["cp-lr0.0001-gamma0.9-s1", "cp-lr0.0001-gamma0.9-s2",
                                                 "cp-lr0.0001-gamma0.99-s1"]
    assert len(planned) == 8 and len({job.name for job in planned}) == 8
    assert planned[-1].values == {"dqn.lr": 3e-4, "dqn.gamma": 0.99, "job.seed": 2}
    spec = experiments.variant_spec(specs.loads(text), planned[-1])
    assert (spec.dqn.lr, spec.dqn.gamma, spec.job.seed) == (3e-4, 0.99, 2)


def test_a_linked_field_takes_its_leaders_position_and_adds_no_variant_and_no_name() -> None:
    # Each game its own entropy cost: the link follows the games, two of which share a value.
    games = '"env.id" = ["MinAtar/Asterix-v1", "MinAtar/Breakout-v1", "MinAtar/Freeway-v1"]'
    text = (BASE.replace("dqn", "vtrace").replace('name = "cp"', 'name = "cp"\nalgo = "vtrace"') + "[sweep]\n"
            + '"vtrace.entropy_cost" = { follows = "env.id", values = [0.01, 0.03, 0.01] }\n' + games
            + '\n"vtrace.lr" = [1e-3, 6e-4]\n')
    sweep = specs.sweep_of(text, file="games.toml")
    assert sweep.count() == 6 and sweep.names == ("env.id", "vtrace.lr", "vtrace.entropy_cost")
    planned = experiments.plan(sweep, (1,), "m")
    assert [(job.values["env.id"], job.values["vtrace.lr"], job.values["vtrace.entropy_cost"]) for job in planned] == [
        ("MinAtar/Asterix-v1", 1e-3, 0.01), ("MinAtar/Asterix-v1", 6e-4, 0.01),
        ("MinAtar/Breakout-v1", 1e-3, 0.03), ("MinAtar/Breakout-v1", 6e-4, 0.03),
        ("MinAtar/Freeway-v1", 1e-3, 0.01), ("MinAtar/Freeway-v1", 6e-4, 0.01)]
    assert planned[2].name == "m-idMinAtar-Breakout-v1-lr0.001-s1"
    spec = experiments.variant_spec(specs.loads(text, file="games.toml"), planned[4])
    assert (spec.env.id, spec.vtrace.entropy_cost) == ("MinAtar/Freeway-v1", 0.01)


def test_without_seeds_each_variant_keeps_the_files_seed_and_without_a_sweep_there_is_one_job() -> None:
    assert [job.name for job in experiments.plan(specs.sweep_of(BASE + '[sweep]\n"dqn.lr" = [1e-4]\n'), None,
                                                 "cp")] == ["cp-lr0.0001"]
    assert experiments.plan(specs.Sweep(), None, "cp") == [experiments.PlannedJob("cp", {})]
    labels = experiments.field_labels(["dqn.lr", "vtrace.lr", "dqn.gamma"])
    assert labels == {"dqn.lr": "dqn.lr", "vtrace.lr": "vtrace.lr", "dqn.gamma": "gamma"}


@pytest.mark.parametrize("value, shown", [(1e-4, "0.0001"), (3e-4, "0.0003"), (0.99, "0.99"), (100.0, "100"),
                                          (2.5e-5, "0.000025"), (1e-3, "0.001"), (0.0023, "0.0023"), (-0.5, "-0.5"),
                                          (1.5e7, "15000000"), (True, "true"), ([64, 64], "64x64"),
                                          ("atari", "atari")])
def test_values_are_named_compactly(value, shown: str) -> None:
    assert experiments.compact(value) == shown


def test_every_number_of_a_sweep_is_named_in_one_format_that_sorts_by_value() -> None:
    # 1e-3 was named lr1e-3 beside lr0.0023: two formats in one list, and names that sorted 1e-3, 1e-4, 5e-4.
    values = [1e-5, 3e-5, 1e-4, 5e-4, 1e-3, 0.0023, 0.01, 0.5]
    sweep = specs.sweep_of(BASE + f'[sweep]\n"dqn.lr" = [{", ".join(map(repr, reversed(values)))}]\n')
    names = [job.name for job in experiments.plan(sweep, None, "cp")]
    assert all("e-" not in name for name in names), names
    assert sorted(names) == [f"cp-lr{experiments.compact(value)}" for value in values]


@pytest.mark.parametrize("sweep, fragment", [
    ('"dqn.lrr" = [1e-4]', "sweep.dqn.lrr: unknown field (did you mean 'dqn.lr'?)"),
    ('nothing.lr = [1e-4]', "sweep.nothing.lr: unknown field"),
    ('"dqn.lr" = 1e-4', "sweep.dqn.lr: must be a list of values"),
    ('"dqn.lr" = []', "sweep.dqn.lr: needs at least one value"),
    ('"dqn.lr" = [1e-4, "fast"]', "sweep.dqn.lr: value 'fast' must be a number"),
    ('"dqn.lr" = [1e-4, 1e-4]', "sweep.dqn.lr: lists 0.0001 twice"),
    ('"job.total_steps" = [100]', "sweep.job.total_steps: is a live field, and only identity fields are swept"),
    ('"job.seed" = [1, 2]', "sweep.job.seed: seeds are given by `rlsup submit --seeds 1-5`"),
    ('"replay.capacity" = [100]', "sweep.replay.capacity: fields of [[replay]] cannot be swept"),
    ('"dqn.gamma" = { follows = "dqn.lr", values = [0.9, 0.99] }\n"dqn.lr" = [1e-4]',
     "sweep.dqn.gamma: lists 2 values for the 1 of 'dqn.lr': one each, in the same order"),
    ('"dqn.gamma" = { follows = "env.id", values = [0.9] }\n"dqn.lr" = [1e-4]',
     "sweep.dqn.gamma: follows 'env.id', which is not a crossed field of this [sweep] (those are: \"dqn.lr\")"),
    ('"dqn.gamma" = { follows = "dqn.batch_size", values = [0.9] }\n"dqn.batch_size" = { follows = "dqn.lr", '
     'values = [32] }\n"dqn.lr" = [1e-4]', "sweep.dqn.gamma: follows 'dqn.batch_size', which is not a crossed"),
    ('"dqn.gamma" = { values = [0.9] }', 'sweep.dqn.gamma: a linked field is an inline table { follows = "env.id"'),
    ('"dqn.gamma" = { follows = 3, values = [0.9] }', "sweep.dqn.gamma: a linked field is an inline table"),
    ('"dqn.gamma" = { follows = "dqn.lr", values = [0.9], by = 1 }\n"dqn.lr" = [1e-4]',
     "sweep.dqn.gamma: a linked field has no key 'by'"),
    ('"dqn.gamma" = { follows = "dqn.lr", values = ["x"] }\n"dqn.lr" = [1e-4]',
     "sweep.dqn.gamma: value 'x' must be a number"),
    ('"job.total_steps" = { follows = "dqn.lr", values = [1] }\n"dqn.lr" = [1e-4]',
     "sweep.job.total_steps: is a live field"),
])
def test_a_bad_sweep_names_file_line_and_field(sweep: str, fragment: str) -> None:
    with pytest.raises(specs.SpecError) as raised:
        specs.loads(BASE + "[sweep]\n" + sweep + "\n", file="grid.toml")
    assert str(raised.value).startswith("grid.toml:7: ") and fragment in str(raised.value), str(raised.value)


def test_a_sweep_that_is_not_a_table_and_a_misspelt_table_are_refused() -> None:
    with pytest.raises(specs.SpecError, match=r"f.toml:1: sweep: must be a table \[sweep\]"):
        specs.loads("sweep = 3\n" + BASE, file="f.toml")
    with pytest.raises(specs.SpecError, match="unknown table \\(did you mean 'sweep'\\?\\)"):
        specs.loads(BASE + "[swep]\n", file="f.toml")


def test_a_variant_breaking_a_cross_field_rule_is_located_at_its_sweep_line() -> None:
    text = BASE + '[sweep]\n"env.preset" = ["classic", "atari"]\n'
    loaded = specs.loads(text, file="grid.toml")
    planned = experiments.plan(specs.sweep_of(text), None, "cp")
    with pytest.raises(specs.SpecError) as raised:
        experiments.check_variants(loaded, planned, "grid.toml", text)
    message = str(raised.value)
    assert message.startswith("grid.toml:7: env.id: in variant cp-presetatari: the atari preset needs an ALE/ id")


def job_of(store: Store, overrides: dict, state: State = State.PAUSED, experiment: str = "cp"):
    job = store.submit(name="cp-s1", spec_path=Path("/nowhere/cp.toml"), run_dir=Path("/nowhere/run"),
                       overrides=overrides, experiment=experiment)
    if state is not State.QUEUED:
        store.connection.execute("UPDATE jobs SET state = ?, started = 1 WHERE id = ?", (state.value, job.id))
    return store.job(job.id)


def test_pinned_overrides_win_over_any_edit_of_the_file_so_a_seed_edit_is_no_identity_edit(tmp_path) -> None:
    loaded = specs.loads(BASE)
    overrides = specs.pin_overrides(loaded, {"job.seed": 5, "job.name": "cp-s5"})
    current = specs.apply_overrides(loaded, overrides)
    assert (current.job.seed, current.job.name) == (5, "cp-s5")
    with Store(tmp_path) as store:
        job = job_of(store, overrides)
        assert job.experiment == "cp" and job.override_values == overrides
        edited = BASE.replace("seed = 3", "seed = 8").replace('name = "cp"', 'name = "other"')
        assert edits.decide(job, current, edits.parse(edits.SavedFile(Path("cp.toml"), edited, "x"))) is None
        longer = edits.decide(job, current, edits.parse(edits.SavedFile(Path("cp.toml"), edited + "[job]\n", "y")))
        assert isinstance(longer, edits.Refuse)  # a file that does not load is still refused
        raised = edited.replace('[job]\n', '[job]\ntotal_steps = 5000\n')
        accepted = edits.decide(job, current, edits.parse(edits.SavedFile(Path("cp.toml"), raised, "z")))
        assert isinstance(accepted, edits.Accept)
        assert [change.field for change in accepted.changes] == ["job.total_steps"]
        assert (accepted.spec.job.seed, accepted.spec.job.name, accepted.spec.job.total_steps) == (5, "cp-s5", 5000)


def test_the_experiment_column_is_added_to_an_older_database(tmp_path) -> None:
    connection = sqlite3.connect(tmp_path / "rlsup.db")
    connection.executescript(store_module.MIGRATIONS[0])
    connection.execute("PRAGMA user_version = 1")
    connection.execute("INSERT INTO jobs (name, spec_path, run_dir, state, desired, submitted, updated)"
                       " VALUES ('old', '/a.toml', '/run', 'done', 'running', 0, 0)")
    connection.commit()
    connection.close()
    with Store(tmp_path) as store:
        assert [job.experiment for job in store.jobs()] == [""]
        assert store.experiment_jobs("") == []


def row(store: Store, state: State, mean_return: float | None, eta_s: float | None, experiment: str = "cp"):
    job = store.submit(name=f"{experiment or 'lone'}-{state}", spec_path=Path("/nowhere/cp.toml"),
                       run_dir=Path("/nowhere/run"), total_steps=100, experiment=experiment)
    store.connection.execute("UPDATE jobs SET state = ?, step = 50 WHERE id = ?", (state.value, job.id))
    return JobRow(job=store.job(job.id), step=50, steps_per_second=None, mean_return=mean_return, eta_s=eta_s)


def test_a_group_row_counts_states_and_spreads_returns_over_its_jobs(tmp_path) -> None:
    with Store(tmp_path) as store:
        rows = [row(store, State.RUNNING, 10.0, 30.0), row(store, State.QUEUED, None, None),
                row(store, State.RUNNING, 20.0, 90.0), row(store, State.DONE, 5.0, None, experiment=""),
                row(store, State.PAUSED, None, None, experiment="other")]
    entries = groups.grouped(rows)
    assert [type(entry).__name__ for entry in entries] == ["GroupRow", "GroupRow", "JobRow"]
    group = entries[0]
    assert group.experiment == "cp" and group.job_ids == (1, 3, 2)
    assert group.counts == "2 running 1 queued"
    assert (group.mean_return.mean, round(group.mean_return.std, 3), group.mean_return.count) == (15.0, 7.071, 2)
    assert str(group.mean_return) == "15.0 ± 7.1" and group.eta_s == 90.0
    assert (group.step, group.total_steps) == (150, 300)
    assert groups.shown(groups.spread([])) == "–" and str(groups.spread([4.0])) == "4.0 ± –"


def test_the_json_schema_takes_a_sweep_of_identity_fields_only() -> None:
    import jsonschema
    import tomllib_compat

    validator = jsonschema.Draft202012Validator(specs.json_schema())
    grid = tomllib_compat.tomllib.loads(BASE + '[sweep]\n"dqn.lr" = [1e-4, 3e-4]\n"dqn.hidden_sizes" = [[64]]\n')
    validator.validate(grid)
    assert not validator.is_valid({"sweep": {"dqn.lr": []}})
    assert not validator.is_valid({"sweep": {"job.total_steps": [100]}})
    assert not validator.is_valid({"sweep": {"job.seed": [1, 2]}})
    validator.validate({"sweep": {"env.id": ["A", "B"], "dqn.lr": {"follows": "env.id", "values": [1e-4, 1e-4]}}})
    assert not validator.is_valid({"sweep": {"dqn.lr": {"values": [1e-4]}}})
    assert not validator.is_valid({"sweep": {"dqn.lr": {"follows": "env.id", "values": ["fast"]}}})


def test_an_experiments_eta_counts_its_queued_jobs() -> None:
    """One job running with 60 s left and three queued behind it: the experiment is not over in 60 s."""
    import tempfile

    with tempfile.TemporaryDirectory() as home, Store(Path(home)) as store:
        rows = [row(store, State.RUNNING, 10.0, 60.0)] + [row(store, State.QUEUED, None, None) for _ in range(3)] \
            + [row(store, State.PAUSED, None, None)]
    group = groups.grouped(rows)[0]
    # 50 steps left in each of 4 jobs that will run, at the 50/60 steps/s the running one makes; the paused
    # job waits for a resume, which no ETA can foresee.
    assert group.eta_s == 240.0


def test_a_sweep_list_longer_than_a_submit_queues_is_refused_at_its_line_before_its_values_are_compared() -> None:
    # Each value was compared with every one before it (a repeat check): 20,000 values took 23 s.
    values = ", ".join(str(index + 1) for index in range(50_000))
    with pytest.raises(specs.SpecError) as raised:
        specs.loads(BASE + f'[sweep]\n"dqn.batch_size" = [{values}]\n', file="long.toml")
    assert str(raised.value) == ("long.toml:7: sweep.dqn.batch_size: lists 50,000 values; one submit queues at most "
                                 "1,000 jobs")
