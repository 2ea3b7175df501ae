"""The spec's newer parts: old spellings, one refusal wording, overrides, env-state fields and shared rules."""
from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import pytest

from rlsup import spec as specs

ELITE = "[job]\nalgo = 'vtrace'\n[[replay]]\nkind = 'elite'\n{lines}\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(text)
    return path


def test_the_old_spelling_of_alpha_loads_with_one_warning_naming_file_and_line(tmp_path: Path) -> None:
    old = write(tmp_path, ELITE.format(lines="capacity = 50\nalfa_annealing_factor = 3.0"))
    new = specs.loads(ELITE.format(lines="capacity = 50\nalpha_annealing_factor = 3.0"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        assert specs.load(old) == new
        assert specs.load(old) == new  # loaded again (the daemon reloads edited files): no second warning
    [warning] = caught
    assert issubclass(warning.category, specs.SpecDeprecation)
    assert (warning.filename, warning.lineno) == (str(old), 6)
    assert "replay[0].alfa_annealing_factor" in str(warning.message)
    assert "alpha_annealing_factor" in str(warning.message).split(":", 1)[1]
    assert new.replay[0].alpha_annealing_factor == 3.0


def test_the_new_spelling_loads_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = specs.loads(ELITE.format(lines="alpha_annealing_factor = 0.5"))
    assert spec.replay[0].alpha_annealing_factor == 0.5


def test_both_spellings_together_are_an_error_naming_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, ELITE.format(lines="alpha_annealing_factor = 2.0\nalfa_annealing_factor = 3.0"))
    with pytest.raises(specs.SpecError) as caught:
        specs.load(path)
    [problem] = caught.value.problems
    assert (problem.file, problem.line, problem.field) == (str(path), 6, "replay[0].alfa_annealing_factor")
    assert "keep only alpha_annealing_factor" in problem.message


def test_an_old_spelling_with_a_bad_value_is_located_at_its_own_line(tmp_path: Path) -> None:
    path = write(tmp_path, ELITE.format(lines="alfa_annealing_factor = 'fast'"))
    with pytest.raises(specs.SpecError) as caught:
        specs.load(path)
    assert (caught.value.problems[0].line, caught.value.problems[0].field) == (5, "replay[0].alfa_annealing_factor")


def test_the_schema_marks_the_old_spelling_deprecated() -> None:
    replay = specs.json_schema()["properties"]["replay"]["items"]["properties"]
    assert replay["alfa_annealing_factor"]["deprecated"] is True
    assert "deprecated" not in replay["alpha_annealing_factor"]


# -- one refusal wording --------------------------------------------------------------------------


def test_one_refusal_wording_located_when_the_file_is_known() -> None:
    text = "[job]\nseed = 3\n[dqn]\nlr = 0.5\n"
    changes = specs.diff(specs.JobSpec(), specs.loads(text))
    assert specs.refusal_message(changes) == ("job.seed: 0 -> 3: defines what the run learns, refused\n"
                                              "dqn.lr: 0.0001 -> 0.5: defines what the run learns, refused\n"
                                              "start a new run to use them")
    located = specs.identity_message("job.toml", text, changes)
    assert located == ("job.toml:2: job.seed: 0 -> 3: defines what the run learns, refused\n"
                       "job.toml:4: dqn.lr: 0.0001 -> 0.5: defines what the run learns, refused\n"
                       "start a new run to use them; the job goes on with its current spec")
    more = specs.diff(specs.JobSpec(), specs.JobSpec(replay=(specs.ReplaySection(ratio=0.5),) * 2))
    assert specs.identity_message("job.toml", "", more).startswith("job.toml: replay: 1 tables -> 2 tables")


def test_one_judgement_of_an_edited_spec_for_a_started_run_and_for_one_never_started() -> None:
    """judge() is what the daemon's edits, `rlsup run --resume` and the drift column each ask (issue 25, fact 4)."""
    run = specs.JobSpec().replace("dqn", network="mlp")  # what its "auto" resolved to
    edited = specs.JobSpec().replace("dqn", lr=0.5).replace("job", total_steps=5, device="cpu")
    started = specs.judge(run, edited)
    assert [change.field for change in started.refused] == ["dqn.lr"]
    assert [change.field for change in started.applied] == ["job.total_steps", "job.device"]
    assert [change.field for change in started.changes] == ["job.total_steps", "job.device", "dqn.lr"]
    # The refused field and the file's "auto" stay as the run has them; the rest is taken.
    assert (started.spec.dqn.lr, started.spec.dqn.network, started.spec.job.total_steps) == (run.dqn.lr, "mlp", 5)
    assert not started.new_identity
    fresh = specs.judge(run, edited, started=False)  # nothing learned yet: the file may still say what the run is
    assert fresh.refused == () and fresh.applied == fresh.changes and fresh.spec == edited and fresh.new_identity
    live = specs.judge(run, specs.JobSpec().replace("job", total_steps=5))
    assert live.refused == () and live.spec == run.replace("job", total_steps=5) and not live.new_identity
    assert specs.judge(run, specs.JobSpec()).changes == ()


def test_field_path_inverts_dotted_and_line_of_falls_back_to_the_table() -> None:
    for path in [("dqn", "lr"), ("replay", 0, "capacity"), ("replay", 12, "ratio"), ("job",)]:
        assert specs.field_path(specs.dotted(path)) == path
    lines = specs.locate_keys("[[replay]]\nratio = 0.5\n[[replay]]\nkind = 'elite'\n")
    assert specs.line_of(lines, ("replay", 1, "ratio")) == 3
    assert specs.line_of(lines, ("replay", 0, "ratio")) == 2
    assert specs.line_of(lines, ("dqn", "lr")) is None


# -- overrides ----------------------------------------------------------------------------------


def test_overrides_win_until_the_file_changes_the_value_they_replaced() -> None:
    loaded = specs.JobSpec().replace("job", name="../evil", priority=1)
    overrides = specs.make_overrides(loaded, priority=5)
    assert overrides == {"job.name": {"file": "../evil", "value": "evil"},
                         "job.priority": {"file": 1, "value": 5}}
    applied = specs.apply_overrides(loaded, overrides)
    assert (applied.job.name, applied.job.priority) == ("evil", 5)
    edited = loaded.replace("job", priority=9)
    assert specs.apply_overrides(edited, overrides).job.priority == 9


def test_an_override_out_of_range_is_a_spec_error_naming_the_option() -> None:
    with pytest.raises(specs.SpecError, match="--priority: job.priority: must fit in 64 bits"):
        specs.make_overrides(specs.JobSpec(), priority=2 ** 70)


def test_file_digest_tells_bytes_apart() -> None:
    assert specs.file_digest(b"a") == specs.file_digest(b"a") != specs.file_digest(b"b")
    assert len(specs.file_digest(b"")) == 64


# -- fields and rules ---------------------------------------------------------------------------


def test_env_state_fields_are_every_env_field_but_those_outside_the_game_and_its_wrappers() -> None:
    # num_envs counts envs; imports only registers ids; image_layout reorders observations after the stack;
    # vectoriser only says where each env is stepped; source changes the trainer itself, an identity change.
    outside = ("num_envs", "imports", "image_layout", "vectoriser", "source")
    names = [f.name for f in dataclasses.fields(specs.EnvSection)]
    assert specs.env_state_fields() == tuple(name for name in names if name not in outside)
    # The list envs.py kept by hand before the flag: env states saved under it still compare equal.
    assert specs.env_state_fields() == ("id", "preset", "sticky_actions", "clip_rewards", "episodic_life",
                                        "noop_max", "frame_skip", "frame_stack", "max_episode_steps", "fire_reset")


def test_share_rules_are_one_function_for_files_and_for_built_replays() -> None:
    replays = [specs.ReplaySection(kind="queue", capacity=4, ratio=0.5), specs.ReplaySection(ratio=0.5)]
    [violation] = specs.share_violations(replays, 16)
    assert (violation.path, violation.table) == (("replay", 0, "capacity"), 0)
    assert "capacity 4 is below its share of 8" in violation.message
    assert specs.whole_shares(replays, 16) == [8, 8]
    tiny = [specs.ReplaySection(ratio=1e-12), specs.ReplaySection(ratio=1 - 1e-12)]
    assert any("at least 1" in violation.message for violation in specs.share_violations(tiny, 8))


@pytest.mark.parametrize(("algo", "expected"), [
    ("vtrace", specs.ReplaySection(kind="queue", capacity=12)),  # plain IMPALA: one batch of fresh unrolls
    ("dqn", specs.ReplaySection()),                             # a uniform replay of 100,000 transitions
])
def test_a_job_without_replays_gets_its_algorithms_default(tmp_path: Path, algo: str, expected) -> None:
    path = write(tmp_path, f'[job]\nalgo = "{algo}"\n[env]\nid = "CartPole-v1"\n[vtrace]\nbatch_size = 12\n'
                           f'[dqn]\nbatch_size = 12\n')
    spec = specs.load(path)
    assert spec.replay == (expected,)
    # The run's resolved job.toml holds it, so a later change of the default cannot change a run.
    resolved = write(tmp_path, spec.to_toml())
    assert "[[replay]]" in resolved.read_text() and specs.load(resolved) == spec
