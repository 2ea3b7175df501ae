"""rlsup's fused MinAtar games against the reference MinAtar, a few episodes of each (bench/minatar_fidelity.py
runs a thousand): every step's action, reward, flags and observation are the reference's when it draws what the
port drew. And a JaxGames batch resumes bit for bit from its state_dict, which refuses a wrong-shaped part."""
from __future__ import annotations

import copy
import functools
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("gymnax")
pytest.importorskip("minatar")
sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
import minatar_fidelity  # noqa: E402

# (game, version, episodes): most of the time is compiling each game's step (the bench plays 1,000 of each).
# Freeway's 2,501-step episode took 13-31 s against the reference: test_freeway_ends_itself checks its end alone.
CASES = [("breakout", 1, 10), ("breakout", 0, 5), ("spaceinvaders", 1, 5), ("asterix", 1, 3), ("seaquest", 1, 3)]


@functools.cache
def tally(game: str, version: int, episodes: int) -> minatar_fidelity.Tally:
    return minatar_fidelity.compare_game(game, version, episodes, seed=0)


@pytest.mark.parametrize(("game", "version", "episodes"), CASES)
def test_every_step_is_the_reference_games(game: str, version: int, episodes: int) -> None:
    found = tally(game, version, episodes)
    assert found.episodes == episodes and found.steps >= episodes
    assert found.identical == episodes, minatar_fidelity.difference_words(found)


def test_freeway_ends_itself_after_2501_steps_as_the_reference_does() -> None:
    """The reference's Freeway terminates after 2,501 actions; gymnax's only truncated at its time limit (2,500)."""
    from rlsup.algos.envs.jax_minatar import freeway_v1

    games = freeway_v1(4, 0, torch.device("cpu"))
    games.reset()
    noop = torch.zeros(4, dtype=torch.int64)
    for step in range(1, 2_501):
        result = games.step(noop)
        assert not (result.terminations.any() or result.truncations.any()), f"ended at step {step}"
    result = games.step(noop)
    assert result.terminations.all() and not result.truncations.any()


def outcome(step) -> list[np.ndarray]:
    """A step's tensors as numpy copies (they share the JAX buffers that the next step replaces)."""
    return [tensor.numpy().copy() for tensor in (step.observations, step.rewards, step.terminations,
                                                 step.truncations, step.final_observations)]


def test_a_state_dict_resumes_bit_for_bit_and_refuses_a_wrong_shape() -> None:
    from rlsup.algos.envs.jax_minatar import breakout_v1

    cpu = torch.device("cpu")
    actions = torch.randint(0, 3, (300, 64), generator=torch.Generator().manual_seed(0))
    first = breakout_v1(64, 1, cpu)
    first.reset()
    played = []
    for step in range(300):
        if step == 100:
            saved = copy.deepcopy(first.state_dict())
        result = first.step(actions[step])
        if step >= 100:
            played.append(outcome(result))
    assert sum(int(terminations.sum()) for _, _, terminations, _, _ in played) > 0, "no episode ended: no reset"

    second = breakout_v1(64, 2, cpu)
    assert not np.array_equal(second.state_dict()["key"], saved["key"])
    second.load_state_dict(saved)
    for step in range(100, 300):
        for part, (resumed, original) in enumerate(zip(outcome(second.step(actions[step])), played[step - 100])):
            assert np.array_equal(resumed, original), f"step {step}, part {part}"

    name, leaf = next(iter(saved["states"].items()))
    wrong = copy.deepcopy(saved)
    wrong["states"][name] = np.zeros((63, *leaf.shape[1:]), leaf.dtype)
    with pytest.raises(ValueError, match=re.escape(name)):
        second.load_state_dict(wrong)
    wrong = copy.deepcopy(saved)
    wrong["previous_actions"] = np.zeros(65, np.int32)
    with pytest.raises(ValueError, match="previous_actions"):
        second.load_state_dict(wrong)


@pytest.mark.parametrize("free_slot", [None, 3])
def test_an_asterix_spawn_fills_the_free_row_or_none_as_the_reference_does(free_slot: int | None) -> None:
    """The reference spawns into a free row, chosen uniformly, and spawns nothing when all 8 are taken. gymnax's
    slot search never looked at its permutation's first slot: with every row taken it wrote an empty entity over
    one (in every game), and with one row free it did so one spawn in 8 (of 64 games, about 8)."""
    from rlsup.algos.envs.jax_minatar import asterix_v1

    count = 64
    games = asterix_v1(count, 0, torch.device("cpu"))
    games.reset()
    state = copy.deepcopy(games.state_dict())
    states = state["states"]
    # An enemy in every row at the left edge, far from the player (5, 5); no entity moves this step; a spawn is due.
    crowded = np.zeros((count, 8, 5), np.int32)
    crowded[:, :, 1], crowded[:, :, 2], crowded[:, :, 4] = np.arange(1, 9), 1, 1
    if free_slot is not None:
        crowded[:, free_slot] = 0
    states[".entities"], states[".spawn_timer"], states[".move_timer"] = crowded, np.zeros(count, np.int32), \
        np.full(count, 3, np.int32)
    games.load_state_dict(state)
    result = games.step(torch.zeros(count, dtype=torch.int64))
    assert not result.terminations.any()
    after = games.state_dict()["states"][".entities"]
    assert (after[:, :, 4] == 1).all(axis=1).sum() == count, "a spawn emptied a row it should have left"
    if free_slot is None:
        np.testing.assert_array_equal(after, crowded)
    else:
        others = [slot for slot in range(8) if slot != free_slot]
        np.testing.assert_array_equal(after[:, others], crowded[:, others])
        assert (after[:, free_slot, 1] == free_slot + 1).all()
