"""A [sweep] field given twice, in two spellings TOML keeps apart, is refused at the second one's line."""
from __future__ import annotations

from pathlib import Path

import pytest

from rlsup import cli, client, spec as specs
from rlsup.jobs.store import Store

BASE = '[job]\nname = "cp"\nseed = 3\ntotal_steps = 1000\n[env]\nid = "CartPole-v1"\n[dqn]\nlr = 1e-3\n'
# Each pair: the first list (at line 10), then the same field again, spelt otherwise, its list at line 12.
TWICE = [
    '[sweep]\n"dqn.lr" = [1e-4, 3e-4]\n[sweep.dqn]\nlr = [1e-3, 3e-3]\n',
    '[sweep]\n"dqn.lr" = [1e-4, 3e-4]\n\ndqn.lr = [1e-3, 3e-3]\n',
    '[sweep]\ndqn.lr = [1e-4, 3e-4]\n\n"dqn.lr" = [1e-3, 3e-3]\n',
]


@pytest.mark.parametrize("sweep", TWICE)
def test_a_field_swept_twice_is_refused_at_its_second_line_naming_the_first(sweep: str) -> None:
    """issue 49 item 12: "dqn.lr" = [...] beside [sweep.dqn] lr = [...] kept only the second list, so 4 jobs were
    queued, two configurations trained twice and two never."""
    text = BASE + sweep
    with pytest.raises(specs.SpecError) as raised:
        specs.sweep_of(text, file="dup.toml")
    (problem,) = raised.value.problems
    assert (problem.file, problem.line, problem.field) == ("dup.toml", 12, "sweep.dqn.lr"), problem
    assert "is swept twice: its first list is at line 10; give one list" in problem.message, problem.message
    with pytest.raises(specs.SpecError):
        specs.loads(text, file="dup.toml")  # what validate and the daemon's edit judge read


def test_validate_and_submit_refuse_the_file_in_one_line_and_queue_nothing(tmp_path: Path, rlsup_home: Path,
                                                                            capsys, monkeypatch) -> None:
    """issue 49 item 12, as a user meets it: `rlsup validate` said "4 variants checked" and submit queued 4."""
    monkeypatch.setattr(client, "ensure_daemon", lambda *arguments, **options: None)  # a queue, no daemon to run it
    path = tmp_path / "dup.toml"
    path.write_text(BASE + TWICE[0])
    for command in (["validate", str(path)], ["submit", str(path), "--seeds", "1"]):
        code = cli.main(command)
        out, err = capsys.readouterr()
        assert code == 2 and "Traceback" not in err, (command, code, out, err)
        assert f"{path}:12: sweep.dqn.lr: is swept twice" in err, (command, err)
    with Store(rlsup_home) as store:
        assert store.jobs() == []
