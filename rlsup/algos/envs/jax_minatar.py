"""MinAtar's five games as fused games, through gymnax's JAX port: the paper's sticky actions (0.1), its full and
minimal action sets (-v0, -v1), and no step limit, as gymnasium's MinAtar/ ids play the reference games."""
from __future__ import annotations

import torch

from rlsup.algos.envs.actions import ActionSpace
from rlsup.algos.envs.jax_games import JAX_EXTRA, JaxGameRules, JaxGames, import_jax
from rlsup.algos.envs.sources import EnvError

# As the reference MinAtar's Environment (sticky_action_prob) and the paper (Young & Tian 2019) play them.
STICKY_ACTIONS = 0.1
GYMNAX_NAMES = {"asterix": "Asterix-MinAtar", "breakout": "Breakout-MinAtar", "freeway": "Freeway-MinAtar",
                "seaquest": "Seaquest-MinAtar", "spaceinvaders": "SpaceInvaders-MinAtar"}


def minatar_rules(game: str, version: int) -> JaxGameRules:
    """The gymnax port of one MinAtar game: version 0 with all 6 actions, 1 with the game's minimal set."""
    import_jax()  # first: a machine without JAX is told so, not that gymnax is missing
    try:
        import gymnax
    except ImportError:
        raise EnvError(f"fused MinAtar games run on gymnax's JAX port, which is not installed: {JAX_EXTRA}") from None
    import jax.numpy as jnp

    env, params = gymnax.make(GYMNAX_NAMES[game], use_minimal_action_set=version == 1)
    # gymnax's own time limit (1,000 steps; Freeway's 2,500) is none of the paper's: step_env never reads it, and
    # so that no game does, it is as far off as an int32 allows.
    params = params.replace(max_steps_in_episode=jnp.iinfo(jnp.int32).max)
    step = {"seaquest": seaquest_step, "asterix": asterix_step}.get(game, lambda env: env.step_env)(env)
    return JaxGameRules(env.reset_env, step, params, ActionSpace(int(env.num_actions)),
                        sticky_actions=STICKY_ACTIONS, ends=freeway_ends if game == "freeway" else None)


def seaquest_step(env):
    """gymnax's Seaquest step with the reference's last frame: surfacing with no diver ends the game, and gymnax
    refilled the oxygen on that step where the reference keeps what was left (bench/minatar_fidelity.py found the
    oxygen bar of the last observation differing in 818 of 1,000 episodes; nothing else differed)."""
    import jax.numpy as jnp

    def step(key, state, action, params):
        observation, stepped, reward, terminated, info = env.step_env(key, state, action, params)
        without_divers = (stepped.sub_y == 0) & ~state.surface & (state.diver_count == 0)
        stepped = stepped.replace(oxygen=jnp.where(without_divers, state.oxygen, stepped.oxygen))
        return env.get_obs(stepped, params), stepped, reward, terminated, info

    return step


def asterix_step(env):
    """gymnax's Asterix step with the reference's spawn (asterix_spawn), made before gymnax's step, whose own spawn
    is then not due: its timer reads as just restarted, as gymnax leaves it after spawning."""
    import jax.numpy as jnp

    def step(key, state, action, params):
        due = state.spawn_timer == 0
        spawned = state.replace(entities=jnp.where(due, asterix_spawn(key, state.entities), state.entities),
                                spawn_timer=jnp.where(due, state.spawn_speed, state.spawn_timer))
        return env.step_env(key, spawned, action, params)  # spawn_speed is never below 1: no second spawn

    return step


def asterix_spawn(key, entities):
    """The entities after a spawn as the reference makes it (asterix_spawn_draws), the new one at the left edge
    moving right or at the right edge moving left."""
    import jax.numpy as jnp

    left_to_right, gold, slot, spawned = asterix_spawn_draws(key, entities)
    entity = jnp.array([(1 - left_to_right) * 9, slot + 1, left_to_right, gold, 1], dtype=entities.dtype)
    return jnp.where(spawned, entities.at[slot].set(entity), entities)


def asterix_spawn_draws(key, entities):
    """A spawn's draws as the reference makes them: (left_to_right, gold, slot, spawned), into a free row chosen
    uniformly, or none when all 8 are taken. gymnax's search (while_sample_slots) skips its permutation's first
    slot, so with every row taken it wrote an empty entity over one, and with one row free it did so for one spawn
    in 8. This draws what gymnax draws and looks at the slots in its order, its first slot last: the same spawn
    wherever gymnax's was right."""
    import jax
    import jax.numpy as jnp

    key_direction, key_gold, key_slot = jax.random.split(key, 3)  # as gymnax's spawn_entity
    left_to_right = jax.random.choice(key_direction, jnp.array([1, 0]))
    gold = jax.random.choice(key_gold, jnp.array([1, 0]), p=jnp.array([1 / 3, 2 / 3]))
    order = jnp.roll(jax.random.permutation(key_slot, jnp.arange(8)), -1)
    free = entities[order, 4] == 0
    return left_to_right, gold, order[jnp.argmax(free)], free.any()


def freeway_ends(state) -> bool:
    """The reference's Freeway ends itself after 2,501 actions (terminate_timer 2,500); gymnax's reports it only
    as its time limit, a truncation after 2,500."""
    return state.time > FREEWAY_STEPS


FREEWAY_STEPS = 2_500


def _factory(game: str, version: int):
    def make(num_envs: int, seed: int, device: torch.device) -> JaxGames:
        return JaxGames(minatar_rules(game, version), num_envs, seed, device)

    make.__name__ = f"{game}_v{version}"
    make.__doc__ = f"MinAtar {game} (-v{version}) as a fused game of num_envs on device."
    return make


asterix_v0, asterix_v1 = _factory("asterix", 0), _factory("asterix", 1)
breakout_v0, breakout_v1 = _factory("breakout", 0), _factory("breakout", 1)
freeway_v0, freeway_v1 = _factory("freeway", 0), _factory("freeway", 1)
seaquest_v0, seaquest_v1 = _factory("seaquest", 0), _factory("seaquest", 1)
spaceinvaders_v0, spaceinvaders_v1 = _factory("spaceinvaders", 0), _factory("spaceinvaders", 1)
