"""Job files: loading, errors with file:line:field, edit classes, schema and resolved TOML."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlsup import spec as specs

JOBS = Path(__file__).parents[2] / "jobs"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("job_file", sorted(JOBS.glob("*.toml")), ids=lambda path: path.name)
def test_every_example_job_validates_and_round_trips(job_file: Path) -> None:
    spec = specs.load(job_file)
    assert spec.job.name == job_file.stem
    assert specs.loads(spec.to_toml()) == spec


# A fused V-trace job the loop trains (its batch_size the default 32), lines 1-5; a case's own lines follow.
FUSED = "[job]\nalgo = 'vtrace'\n[[replay]]\nkind = 'queue'\ncapacity = 32\n"

BAD_FILES = [
    # (text, line, field, words the message must contain)
    ("[job]\nname = 'x'\ntotal_step = 10\n", 3, "job.total_step", "did you mean 'total_steps'"),
    ("[job]\n\n[dqn]\nlr = 'fast'\n", 4, "dqn.lr", "must be a number"),
    ("[job]\ntotal_steps = -5\n", 2, "job.total_steps", "at least 1"),
    ("[job]\ntotal_steps = 1.5\n", 2, "job.total_steps", "must be an integer"),
    ("[job]\nseed = true\n", 2, "job.seed", "must be an integer"),
    ("[dqn]\ndouble = 1\n", 2, "dqn.double", "true or false"),
    ("[job]\nalgo = 'ppo'\n", 2, "job.algo", "must be one of"),
    ("[envv]\nid = 'CartPole-v1'\n", 1, "envv", "did you mean 'env'"),
    ("[dqn]\nhidden_sizes = [64, 'a']\n", 2, "dqn.hidden_sizes", "every item"),
    ("[[replay]]\ncapacity = 10\nratio = 0.5\n\n[[replay]]\ncapacity = 10\nratio = 0.25\n", 3,
     "replay[0].ratio", "sum to 1"),
    ("[dqn]\nbatch_size = 32\n[[replay]]\nratio = 0.3\n[[replay]]\nratio = 0.7\n", 4,
     "replay[0].ratio", "whole number"),
    ("[job]\ntotal_steps = 10\nname = [\n", 3, "", "invalid TOML"),
    ("[job]\ntotal_steps = 10 10\n", 2, "", "invalid TOML"),
    ("[env]\npreset = 'atari'\nid = 'CartPole-v1'\n", 3, "env.id", "ALE/"),
    ("job = 3\n", 1, "job", "must be a table"),
    ("[job]\ndevice = 'cpu'\ngpus = 1\n", 3, "job.gpus", "cannot reserve"),
    ("[[replay]]\nkind = 'queue'\n", 2, "replay[0].kind", "unrolls for vtrace"),
    ("[[replay]]\ncapacity = 10\nmin_size = 11\n", 3, "replay[0].min_size", "must not exceed capacity"),
    ("[job]\nalgo = 'vtrace'\n[vtrace]\nbatch_size = 8\n[[replay]]\nkind = 'queue'\ncapacity = 4\n", 7,
     "replay[0].capacity", "at least its share"),
    ("[[replay]]\nkind = 'elite'\nelite_insertion = true\n", 3, "replay[0].elite_insertion", "vtrace"),
    # Wider than 64 bits: used to pass, then crash submit and the daemon's store writes (issue 9).
    ("[job]\ntotal_steps = 99999999999999999999\n", 2, "job.total_steps", "64 bits"),
    ("[job]\nseed = 99999999999999999999\n", 2, "job.seed", "64 bits"),
    ("[job]\npriority = -99999999999999999999\n", 2, "job.priority", "64 bits"),
    ("[job]\ntotal_steps = 9223372036854775807\n", 2, "job.total_steps", "at most"),
    # Jobs that cannot run: a negative layer width, a replay of a trillion items (issue 9).
    ("[dqn]\nhidden_sizes = [64, -1]\n", 2, "dqn.hidden_sizes", "every item must be at least 1"),
    ("[vtrace]\nhidden_sizes = [0]\n", 2, "vtrace.hidden_sizes", "every item must be at least 1"),
    ("[[replay]]\ncapacity = 1_000_000_000_000\n", 2, "replay[0].capacity", "at most"),
    # The ALE counts an episode's frames in a C int: 2**53 steps of 4 frames reached it as a TypeError.
    ("[env]\nid = 'ALE/Pong-v5'\npreset = 'atari'\nmax_episode_steps = 9007199254740992\n", 4,
     "env.max_episode_steps", "2,147,483,647 frames"),
    ("[env]\nid = 'ALE/Pong-v5'\npreset = 'atari'\nframe_skip = 1000\nmax_episode_steps = 2_147_484\n", 5,
     "env.max_episode_steps", "the ALE counts at most 2,147,483,647 frames"),
    # [env] source = "fused" (issue 53): what V-trace's one-process loop cannot train.
    (f"{FUSED}[env]\nsource = 'fused'\nnum_envs = 8\n", 8, "env.num_envs", "set batch_size, not num_envs"),
    (f"{FUSED}[env]\nsource = 'fused'\nvectoriser = 'serial'\n", 8, "env.vectoriser", "leave preset and vectoriser"),
    (f"{FUSED}[env]\nsource = 'fused'\n[vtrace]\nnormalize_rewards = true\n", 9, "vtrace.normalize_rewards",
     "not in the fused loop yet"),
    ("[job]\nalgo = 'sac'\n[env]\nsource = 'fused'\n", 4, "env.source", "algo 'sac' trains on gymnasium envs only"),
    # Wrappers a fused game never gets, for V-trace and DQN alike.
    (f"{FUSED}[env]\nsource = 'fused'\nsticky_actions = 0.25\n", 8, "env.sticky_actions", "plays by its own rules"),
    ("[env]\nsource = 'fused'\nnum_envs = 4\nmax_episode_steps = 100\n", 4, "env.max_episode_steps",
     "plays by its own rules"),
]


@pytest.mark.parametrize("text, line, field, words", BAD_FILES)
def test_bad_files_name_file_line_and_field(tmp_path: Path, text: str, line: int, field: str, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(specs.SpecError) as caught:
        specs.load(path)
    problem = caught.value.problems[0]
    assert (problem.file, problem.line, problem.field) == (str(path), line, field)
    assert words in problem.message
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "[job]\ntotal_steps = 0\nseed = -1\n[dqn]\nlrr = 1\n")
    with pytest.raises(specs.SpecError) as caught:
        specs.load(path)
    assert [problem.line for problem in caught.value.problems] == [2, 3, 5]


def test_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(specs.SpecError, match="cannot read"):
        specs.load(tmp_path / "absent.toml")


toml_scalars = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=True), st.booleans(),
                         st.text(max_size=8), st.lists(st.integers(-5, 300), max_size=3))
keys = st.sampled_from(["job", "env", "dqn", "replay", "checkpoint", "log", "eval", "total_steps", "lr",
                        "id", "ratio", "capacity", "kind", "seed", "x"])
documents = st.recursive(st.dictionaries(keys, toml_scalars, max_size=4),
                         lambda children: st.dictionaries(keys, st.one_of(children, st.lists(children, max_size=2)),
                                                          max_size=4), max_leaves=12)


def render_any(value) -> str:
    """Render nested dicts as TOML with inline tables, which tomllib accepts anywhere."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(key)} = {render_any(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(render_any(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if value != value else ("inf" if value == float("inf") else "-inf" if value < -1e308 else repr(value))
    return json.dumps(value) if isinstance(value, str) else repr(value)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_random_toml_only_ever_raises_spec_error(document: dict) -> None:
    text = "\n".join(f"{json.dumps(key)} = {render_any(value)}" for key, value in document.items())
    try:
        specs.loads(text)
    except specs.SpecError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_random_text_only_ever_raises_spec_error(text: str) -> None:
    try:
        specs.loads(text)
    except specs.SpecError:
        pass


def test_edit_classes_decide_what_an_edit_may_change() -> None:
    base = specs.JobSpec()
    live = base.replace("job", total_steps=2 * base.job.total_steps).replace("checkpoint", every_steps=7)
    assert {change.edit for change in specs.diff(base, live)} == {specs.LIVE}
    assert specs.refused(specs.diff(base, live)) == []
    identity = base.replace("dqn", lr=0.5).replace("env", id="ALE/Pong-v5").replace("job", seed=3)
    refused = specs.refused(specs.diff(base, identity))
    assert {change.field for change in refused} == {"dqn.lr", "env.id", "job.seed"}
    message = specs.refusal_message(specs.diff(base, identity))
    assert "dqn.lr: 0.0001 -> 0.5" in message and "new run" in message
    resume = base.replace("job", device="cpu")
    assert [change.edit for change in specs.diff(base, resume)] == [specs.RESUME]
    more_replays = specs.JobSpec(replay=(specs.ReplaySection(ratio=0.5), specs.ReplaySection(ratio=0.5)))
    assert specs.refused(specs.diff(base, more_replays))[0].field == "replay"


def test_an_edited_file_that_names_no_job_keeps_the_runs_name(tmp_path: Path) -> None:
    """Issue 50 item 1: `rlsup run --resume RUN longer.toml` (and the daemon's judge of a followed copy,
    source.toml) took the edited file's own name as the job's; only a [job] name field renames a run."""
    from rlsup.run import files as runfiles

    text = '[job]\nalgo = "dqn"\ntotal_steps = 100\n[env]\nid = "CartPole-v1"\n'
    runfiles.write_run_spec(tmp_path, specs.loads(text, default_name="cartpole-dqn"))
    longer = tmp_path / "source.toml"
    longer.write_text(text.replace("total_steps = 100", "total_steps = 200"))
    changes = runfiles.accept_edit(tmp_path, specs.load(longer, named_after_file=False))
    assert [str(change) for change in changes] == ["job.total_steps: 100 -> 200"]
    assert runfiles.read_run_spec(tmp_path).job.name == "cartpole-dqn"
    longer.write_text(text.replace("[job]\n", '[job]\nname = "renamed"\n'))
    assert specs.judge(runfiles.read_run_spec(tmp_path), specs.load(longer, named_after_file=False)).spec.job.name \
        == "renamed"


def test_merge_live_takes_only_live_fields() -> None:
    base = specs.JobSpec()
    edited = base.replace("job", total_steps=5, device="cpu").replace("dqn", lr=0.5)
    merged = specs.merge_live(base, edited)
    assert merged.job.total_steps == 5
    assert (merged.job.device, merged.dqn.lr) == (base.job.device, base.dqn.lr)


def test_every_field_has_a_doc_and_an_edit_class() -> None:
    import dataclasses

    for cls in list(specs.TABLES.values()) + list(specs.ARRAY_TABLES.values()):
        for f in dataclasses.fields(cls):
            assert f.metadata["doc"] and f.metadata["edit"] in specs.EDIT_CLASSES, (cls, f.name)


def test_schema_accepts_examples_and_rejects_bad_files() -> None:
    import tomllib_compat

    schema = specs.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for job_file in JOBS.glob("*.toml"):
        validator.validate(tomllib_compat.load(job_file))
    assert not validator.is_valid({"job": {"total_steps": -1}})
    assert not validator.is_valid({"dqn": {"lrr": 1}})


def test_resolved_toml_documents_each_field() -> None:
    text = specs.JobSpec().to_toml()
    assert "# Environment steps to train for; raise it to extend a run. (live)\ntotal_steps = 100000" in text


def test_every_integer_field_has_a_range_within_64_bits() -> None:
    import dataclasses
    import typing

    for cls in list(specs.TABLES.values()) + list(specs.ARRAY_TABLES.values()):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if hints[f.name] in (int, list[int]):
                assert f.metadata["minimum"] is not None and f.metadata["maximum"] is not None, (cls, f.name)
                assert -(2 ** 63) <= f.metadata["minimum"] <= f.metadata["maximum"] <= 2 ** 63 - 1, (cls, f.name)


def test_names_beyond_the_basic_multilingual_plane_round_trip() -> None:
    spec = specs.JobSpec().replace("job", name="pong 🏓 run 😀")
    text = spec.to_toml()
    assert "\\ud83d" not in text.lower()  # no surrogate escapes, which TOML forbids
    assert specs.loads(text) == spec


# Every string a job file can hold comes from UTF-8 TOML, so it holds no surrogates; "" means "the default".
toml_strings = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(name=toml_strings, env_id=toml_strings)
def test_resolved_specs_round_trip_through_their_toml(name: str, env_id: str) -> None:
    spec = specs.JobSpec().replace("job", name=name).replace("env", id=env_id)
    assert specs.loads(spec.to_toml()) == spec
