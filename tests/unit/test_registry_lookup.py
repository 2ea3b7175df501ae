"""The algorithm registry: built-in entries, register(), entry-point discovery and its refusals."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rlsup.spec import registry
from rlsup.algos.contract import Trainer


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations and discoveries of one test stay in it."""
    monkeypatch.setattr(registry, "_algorithms", dict(registry._algorithms))
    monkeypatch.setattr(registry, "_discovered", False)


def test_each_built_in_names_parts_that_exist_and_its_loss() -> None:
    for algorithm in registry.BUILT_IN:
        # A TrainerFactory: a trainer class, or a function choosing one (vtrace's, by [env] source).
        trainer = registry.load_attribute(algorithm.trainer)
        assert callable(trainer) and callable(registry.load_attribute(algorithm.policy))
        assert registry.get(algorithm.name) is algorithm
    assert registry.loss_metric_names()[:2] == ("loss", "total_loss")


@pytest.mark.parametrize("algo", ["dqn", "vtrace"])
def test_each_built_in_trainer_satisfies_the_declared_contract(algo: str) -> None:
    import torch

    from rlsup.spec import JobSpec

    spec = JobSpec().replace("job", algo=algo)
    trainer = registry.get(algo).build_trainer(spec, torch.device("cpu"))
    try:
        assert isinstance(trainer, Trainer)
        assert (trainer.step, trainer.episodes, trainer.device) == (0, 0, torch.device("cpu"))
    finally:
        trainer.close()


def test_register_adds_an_algorithm_and_refuses_a_taken_name(fresh_registry: None) -> None:
    tiny = registry.Algorithm("tiny", "tiny:Trainer", "tiny:policy", "td_loss")
    registry.register(tiny)
    registry.register(tiny)  # the same entry again is harmless
    assert registry.get("tiny") is tiny and registry.loss_metric_names()[-1] == "td_loss"
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.Algorithm("dqn", "elsewhere:Trainer", "elsewhere:policy", "loss"))


def test_an_unknown_name_lists_the_choices() -> None:
    with pytest.raises(registry.UnknownAlgorithm, match="must be one of 'dqn', 'vtrace', 'sac', not 'ppo'"):
        registry.get("ppo")


def test_a_broken_plugin_is_skipped_with_a_warning(fresh_registry: None, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    dist_info = tmp_path / "broken-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\nbroken = no_such_module:ALGORITHM\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="rlsup.spec.registry"):
        assert registry.algorithm_names() == ("dqn", "vtrace", "sac")
    assert "ignoring the algorithm plugin broken = no_such_module:ALGORITHM" in caplog.text
