"""rlsup's fused MinAtar games (gymnax's JAX port in a JaxGames batch) against the reference MinAtar, step by step.

Each game and action set (-v0 all 6 actions, -v1 the minimal set) runs as a JaxGames batch of one game, made from
rlsup.algos.envs.jax_minatar's minatar_rules(game, version) as a job gets it: its sticky actions, its auto-reset,
its time limit and its `ends` hook. Beside it, the reference minatar.Environment(game, sticky_action_prob=0.1)
plays the same actions, and every step compares the action played after stickiness, the reward, the terminal
and truncation flags and the whole observation; each episode's first observation is compared too.

The random draws are aligned, not re-synchronised: before each step the bench recomputes from the batch's own
key (split exactly as JaxGames._build_step splits it, checked against the key the step leaves) the sticky
uniform, the game's draws and the reset draws, and the reference consumes those instead of its own: the sticky
uniform as its rand(), Breakout's ball side and Freeway's cars as their randint/rand, Asterix's and Seaquest's
spawns as the rand/randint values that give gymnax's outcome. A draw the reference makes and the port has none
for, or a port draw the reference cannot take, is a difference. No state is copied from one side to the other,
except after a difference, when the episode plays on unchecked and the reference's sticky action is resynchronised.

Policies: Breakout follows the ball (0.9), Freeway goes up (0.7), Asterix dodges the enemies closing in on its
row (0.9), which lets it live until spawns come fast enough to fill every row; otherwise actions are uniform in
the set. Asterix's spawns with at most one row free are counted: they are where gymnax's own spawn differed.

    python bench/minatar_fidelity.py [--games breakout freeway-v1 ...] [--versions 1 0] [--episodes 1000]
                                     [--seconds-per-game 600] [--seed 0]

It prints one row per game and version (episodes compared, identical, identical but for the last frame, steps
compared, the first difference) and writes the result (bench/results_format.py) to --out, by default
results/minatar-fidelity.json. tests/integration/test_minatar_fidelity.py runs a few episodes of each.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from importlib import metadata

import numpy as np
import torch

import results_format  # bench/ beside this script

GAMES = ("breakout", "asterix", "spaceinvaders", "seaquest", "freeway")
REFERENCE_NAMES = {"spaceinvaders": "space_invaders"}  # rlsup's game name -> the reference's module
STICKY_ACTIONS = 0.1  # the reference Environment's default, and the paper's
# Reference actions (of all 6) the scripted policies choose: MinAtar's action order is n l u r d f.
NOOP, LEFT, UP, RIGHT, DOWN = 0, 1, 2, 3, 4


class DrawDifference(Exception):
    """The reference asked for a draw the port did not make, or the port made one the reference cannot take."""


class DrawQueue(np.random.RandomState):
    """A reference random generator that hands out the port's draws, in order, of the kind asked for."""

    def __init__(self, purpose: str):
        super().__init__(0)
        self.purpose, self.pending = purpose, []

    def load(self, *draws: tuple[str, object]) -> None:
        self.pending = list(draws)

    def rand(self, *size):
        return self._next("rand")

    def randint(self, low, high=None, size=None):
        return self._next("randint")

    def _next(self, kind: str):
        if not self.pending:
            raise DrawDifference(f"the reference drew {kind}() for {self.purpose}, where the port drew nothing")
        expected, value = self.pending.pop(0)
        if expected != kind:
            raise DrawDifference(f"the reference drew {kind}() for {self.purpose}, where the port drew {expected}")
        return value

    def check_used(self) -> None:
        if self.pending:
            raise DrawDifference(f"the port drew {len(self.pending)} value(s) for {self.purpose} the reference left")


def port_draws_function(game: str):
    """A jitted carry -> the draws JaxGames' next step makes for game 0: its sticky uniform, the game's draws from
    its step key (as gymnax's step_env makes them) and the reset draws (as reset_env makes them)."""
    import jax
    from rlsup.algos.envs.jax_minatar import asterix_spawn_draws

    def car_draws(key):  # gymnax freeway: reset_env and a crossing in step_env
        speed_key, direction_key = jax.random.split(key)
        return {"speeds": jax.random.randint(speed_key, (8,), 1, 6),
                "directions": jax.random.choice(direction_key, jax.numpy.array([-1, 1]), (8,))}

    def seaquest_draws(key, state):  # gymnax seaquest step_env and _spawn_entities
        enemy_key, diver_key = jax.random.split(key)
        enemy_choice_key, enemy_row_key = jax.random.split(enemy_key)
        diver_direction_key, diver_row_key = jax.random.split(diver_key)
        return {"enemy_values": jax.random.uniform(enemy_choice_key, (2,)),
                "enemy_row": jax.random.randint(enemy_row_key, (), 1, 9),
                "diver_direction": jax.random.bernoulli(diver_direction_key),
                "diver_row": jax.random.randint(diver_row_key, (), 1, 9)}

    def asterix_draws(key, state):  # rlsup's mended spawn, as its step makes it on the state before the step
        left_to_right, gold, slot, spawned = asterix_spawn_draws(key, state.entities)
        return {"left_to_right": left_to_right, "gold": gold, "slot": slot, "spawned": spawned}

    step_draws = {"asterix": asterix_draws, "seaquest": seaquest_draws,
                  "freeway": lambda key, state: car_draws(key)}.get(game, lambda key, state: {})
    reset_draws = {"breakout": lambda key: {"ball_start": jax.random.choice(key, jax.numpy.array([0, 1]))},
                   "freeway": car_draws}.get(game, lambda key: {})

    def draws(carry):
        key, states, _, _ = carry
        next_key, sticky_key, step_key, reset_key = jax.random.split(key, 4)  # as JaxGames._build_step
        state = jax.tree.map(lambda leaf: leaf[0], states)
        return {"next_key": next_key, "sticky": jax.random.uniform(sticky_key, (1,))[0],
                "step": step_draws(jax.random.split(step_key, 1)[0], state),
                "reset": reset_draws(jax.random.split(reset_key, 1)[0])}

    return jax.jit(draws), jax.jit(lambda seed: reset_draws(jax.random.split(jax.random.split(
        jax.random.PRNGKey(seed))[1], 1)[0]))  # JaxGames._build_reset's first game


def uniform_below(flag, threshold: float) -> float:
    """A uniform the reference compares with `< threshold` that gives flag: the port drew the outcome, not it."""
    return threshold / 2 if flag else (1 + threshold) / 2


class Reference:
    """The reference MinAtar Environment, drawing what the port drew (draws: the port's, set before each call)."""

    def __init__(self, game: str):
        from minatar import Environment

        self.environment = Environment(REFERENCE_NAMES.get(game, game), sticky_action_prob=STICKY_ACTIONS)
        self.game, self.env = game, self.environment.env
        self.environment.random = self.sticky_queue = DrawQueue("the sticky action")
        self.env.random = self.queue = DrawQueue(game)
        self.step_draws, self.reset_draws = {}, {}
        self.crowded_spawns = 0  # Asterix: spawns with at most one row free
        for name in ("reset", "_randomize_cars", "_spawn_entity", "_spawn_enemy", "_spawn_diver"):
            if hasattr(self.env, name):
                self._feed(name, getattr(self.env, name))

    def _feed(self, name: str, original) -> None:
        """Load the port's draws for this method into the game's queue before it runs, and check it used them."""
        def fed(*arguments, **keywords):
            self.queue.purpose = f"{self.game} {name.strip('_')}"
            self.queue.load(*self.draws_for(name, *arguments, **keywords))
            result = original(*arguments, **keywords)
            self.queue.check_used()
            return result

        setattr(self.env, name, fed)

    def draws_for(self, name: str, initialize: bool = False) -> list[tuple[str, object]]:
        step, reset = self.step_draws, self.reset_draws
        if name == "reset":
            return [("randint", int(reset["ball_start"]))] if self.game == "breakout" else []
        if name == "_randomize_cars":
            cars = reset if initialize else step
            return [("randint", np.array(cars["speeds"])),  # a copy: the reference multiplies it in place
                    ("rand", np.where(np.asarray(cars["directions"]) > 0, 0.75, 0.25))]
        if name == "_spawn_enemy":
            values = step["enemy_values"]
            return [("rand", float(values[0])), ("rand", float(values[1])), ("randint", int(step["enemy_row"]))]
        if name == "_spawn_diver":
            return [("rand", uniform_below(bool(step["diver_direction"]), 1 / 2)), ("randint", int(step["diver_row"]))]
        return self.asterix_spawn(int(step["left_to_right"]), int(step["gold"]), int(step["slot"]),
                                  bool(step["spawned"]))

    def asterix_spawn(self, left_to_right: int, gold: int, slot: int, spawned: bool) -> list[tuple[str, object]]:
        """The reference's draws for the port's spawn into slot (or none, where spawned is false)."""
        free = [index for index, held in enumerate(self.env.entities) if held is None]
        self.crowded_spawns += len(free) <= 1
        draws = [("rand", uniform_below(left_to_right, 1 / 2)), ("rand", uniform_below(gold, 1 / 3))]
        if spawned and slot in free:
            return draws + [("randint", free.index(slot))]
        if not spawned and not free:  # every row taken: the reference draws the side and the kind, then skips
            return draws
        raise DrawDifference(f"asterix spawn: the port {'fills' if spawned else 'spawns nothing, leaving'} slot "
                             f"{slot}; the reference's free slots are {free}")

    def reset(self, draws: dict) -> np.ndarray:
        self.reset_draws = draws
        self.environment.reset()
        return self.environment.state()

    def act(self, action: int, sticky_uniform: float, draws: dict) -> tuple[float, bool]:
        self.step_draws = draws
        self.sticky_queue.load(("rand", sticky_uniform))
        reward, terminal = self.environment.act(action)
        self.sticky_queue.check_used()
        return float(reward), bool(terminal)


class Policy:
    """Actions as indices in the port's action set, chosen by looking at the reference game (see the docstring)."""

    def __init__(self, game: str, action_set: list[int], seed: int):
        self.game, self.action_set = game, action_set
        self.random = np.random.default_rng(seed)

    def choose(self, env) -> int:
        if self.game == "breakout" and self.random.random() < 0.9:
            target = env.ball_x + (1 if env.ball_dir in (1, 2) else -1)  # where the ball is heading
            return self.action_set.index(LEFT if target < env.pos else RIGHT if target > env.pos else NOOP)
        if self.game == "freeway" and self.random.random() < 0.7:
            return self.action_set.index(UP)
        if self.game == "asterix" and self.random.random() < 0.9:
            return self.action_set.index(self.dodge(env))
        return self.uniform()

    @staticmethod
    def dodge(env) -> int:
        """Asterix: stay while no enemy is within 2 cells of the player in its row, else step to a row without
        one (up first)."""
        def threatened(row: int) -> bool:
            return any(entity is not None and not entity[3] and entity[1] == row
                       and abs(entity[0] - env.player_x) <= 2 for entity in env.entities)

        if not threatened(env.player_y):
            return NOOP
        for action, row in ((UP, env.player_y - 1), (DOWN, env.player_y + 1)):
            if 1 <= row <= 8 and not threatened(row):
                return action
        return NOOP

    def uniform(self) -> int:
        return int(self.random.integers(len(self.action_set)))


@dataclass
class Tally:
    """One game and version's comparison."""

    name: str
    episodes: int = 0
    identical: int = 0
    final_frame_only: int = 0  # episodes identical but for the observation of their terminal step
    steps: int = 0  # steps compared, up to and including each episode's first difference
    first_difference: dict | None = None
    seconds: float = 0.0
    stopped_early: bool = False  # --seconds-per-game ran out before --episodes
    crowded_spawns: int = 0  # Asterix: spawns compared with at most one row free


def observation_difference(reference: np.ndarray, port: np.ndarray) -> str | None:
    if np.array_equal(reference, port):
        return None
    return f"observation channels {sorted(set(np.argwhere(reference != port)[:, 2].tolist()))}"


class Match:
    """The port (a JaxGames batch of one game) and the reference, stepped together."""

    def __init__(self, game: str, version: int, seed: int):
        from rlsup.algos.envs.jax_games import JaxGames
        from rlsup.algos.envs.jax_minatar import minatar_rules

        import gymnax

        from rlsup.algos.envs.jax_minatar import GYMNAX_NAMES

        rules = minatar_rules(game, version)
        self.port = JaxGames(rules, 1, seed, torch.device("cpu"))
        # gymnax's own numbering of the set (rules.step may be rlsup's wrapper of gymnax's step, not its method).
        port_game, _ = gymnax.make(GYMNAX_NAMES[game], use_minimal_action_set=version == 1)
        self.action_set = [int(action) for action in port_game.action_set]
        self.reference = Reference(game)
        reference_set = list(range(6)) if version == 0 else list(self.reference.environment.minimal_action_set())
        if self.action_set != reference_set:
            raise SystemExit(f"{game}-v{version}: the port's action set {self.action_set}, the reference's "
                             f"{reference_set}")
        self.draws, initial_reset_draws = port_draws_function(game)
        self.start = self.port.reset()[0].numpy()
        self.start_difference = observation_difference(self.reference.reset(initial_reset_draws(seed)), self.start)

    def step(self, action: int, comparing: bool) -> tuple[bool, str | None, bool]:
        """Play action in both (only in the port once not comparing): (ended, the difference, final frame only)."""
        draws = self.port.jax.device_get(self.draws(self.port.carry))  # numpy, in one transfer
        reference_outcome = None
        if comparing:
            try:
                reference_outcome = self.reference.act(self.action_set[action], float(draws["sticky"]), draws["step"])
            except DrawDifference as difference:
                reference_outcome = str(difference)
        step = self.port.step(torch.tensor([action]))
        if not np.array_equal(np.asarray(self.port.carry[0]), draws["next_key"]):
            raise SystemExit("JaxGames splits its key otherwise than this bench's copy of JaxGames._build_step")
        ended = bool(step.terminations[0] or step.truncations[0])
        played = self.action_set[int(np.asarray(self.port.carry[2])[0])]  # after stickiness; a jax index is slow
        difference, final_only = None, False
        if isinstance(reference_outcome, str):
            difference = reference_outcome
        elif reference_outcome is not None:
            difference, final_only = self.compare(step, played, *reference_outcome)
        if ended:
            self.reference.environment.last_action = played  # the same, unless this episode differed
            self.start = step.observations[0].numpy()
            self.start_difference = observation_difference(self.reference.reset(draws["reset"]), self.start)
        return ended, difference, final_only

    def compare(self, step, played: int, reward: float, terminal: bool) -> tuple[str | None, bool]:
        port_reward, port_terminal = float(step.rewards[0]), bool(step.terminations[0])
        if played != self.reference.environment.last_action:
            return f"played action: reference {self.reference.environment.last_action}, port {played}", False
        if reward != port_reward:
            return f"reward: reference {reward}, port {port_reward}", False
        if terminal != port_terminal:
            return f"terminal: reference {terminal}, port {port_terminal}", False
        if bool(step.truncations[0]):
            return "the port truncated the episode (a time limit the reference has not)", False
        observation = observation_difference(self.reference.environment.state(), step.final_observations[0].numpy())
        return observation, observation is not None and terminal


def play_episode(match: Match, policy: Policy) -> tuple[int, tuple[int, str] | None, bool]:
    """One episode: (steps compared, (step, what) of its first difference or None, differs in its last frame only)."""
    difference = (0, "first " + match.start_difference) if match.start_difference else None
    steps = final_only = 0
    while True:
        comparing = difference is None
        action = policy.choose(match.reference.env) if comparing else policy.uniform()
        ended, what, final_only = match.step(action, comparing)
        steps += comparing
        if comparing and what is not None:
            difference = (steps, what)
        if ended:
            return steps, difference, bool(final_only)


def compare_game(game: str, version: int, episodes: int, seed: int, seconds: float | None = None) -> Tally:
    """Play up to episodes episodes (or as many as fit in seconds) in both and count the identical ones."""
    tally, started = Tally(f"{game}-v{version}"), time.perf_counter()
    match = Match(game, version, seed)
    policy = Policy(game, match.action_set, seed + 1)
    while tally.episodes < episodes:
        if seconds is not None and time.perf_counter() - started > seconds:
            tally.stopped_early = True
            break
        steps, difference, final_only = play_episode(match, policy)
        tally.episodes, tally.steps = tally.episodes + 1, tally.steps + steps
        tally.identical += difference is None
        tally.final_frame_only += final_only
        # The first difference shown is the first in more than an episode's last frame, where there is one.
        if difference is not None and (tally.first_difference is None or tally.first_difference["last_frame"]
                                       and not final_only):
            tally.first_difference = {"episode": tally.episodes - 1, "step": difference[0], "what": difference[1],
                                      "last_frame": final_only}
    tally.seconds = time.perf_counter() - started
    tally.crowded_spawns = match.reference.crowded_spawns
    return tally


def difference_words(tally: Tally) -> str:
    found = tally.first_difference
    return "none" if found is None else f"episode {found['episode']}, step {found['step']}: {found['what']}"


def print_row(tally: Tally) -> None:
    print(f"{tally.name:<18}{tally.episodes:>9}{tally.identical:>11}{tally.final_frame_only:>13}{tally.steps:>11}"
          f"{tally.seconds:>8.0f}  {difference_words(tally)}"
          + (f" ({tally.crowded_spawns} spawns with at most one row free)" if tally.name.startswith("asterix") else ""),
          flush=True)


def write_result(arguments: argparse.Namespace, run: dict, tallies: list[Tally]) -> None:
    column = results_format.column
    columns = [column("episodes", "count"), column("identical", "count"), column("last frame only", "count"),
               column("steps compared", "steps"), column("seconds", "s", 0), column("first difference")]
    rows = {tally.name: [tally.episodes, tally.identical, tally.final_frame_only, tally.steps, tally.seconds,
                         difference_words(tally)] for tally in tallies}
    notes = {tally.name: f"stopped by --seconds-per-game {arguments.seconds_per_game:g} after {tally.episodes} "
             f"episodes" for tally in tallies if tally.stopped_early}
    for tally in tallies:
        if tally.name.startswith("asterix"):
            crowded = f"{tally.crowded_spawns} spawns compared with at most one row free"
            notes[tally.name] = f"{notes[tally.name]}; {crowded}" if tally.name in notes else crowded
    said = ("Each step: the action played after sticky actions, reward, terminal, truncation and the whole "
            "observation, with the port's draws fed to the reference MinAtar (see bench/minatar_fidelity.py). "
            "'last frame only': episodes identical but for the observation of their terminal step; the first "
            "difference shown is the first beyond a last frame, where there is one.")
    versions = {package: metadata.version(package) for package in ("minatar", "gymnax", "jax")}
    table = results_format.measurement("Episodes identical to the reference MinAtar", "game", columns, rows, said,
                                       settings={"seed": arguments.seed, "sticky_actions": STICKY_ACTIONS, **versions},
                                       notes=notes)
    played = sorted({tally.name.partition("-v")[0] for tally in tallies})
    games = "" if len(played) == len(GAMES) else f": {', '.join(played)}"
    title = f"rlsup's fused MinAtar games (gymnax) against the reference MinAtar, step by step{games}"
    results_format.write_figures(arguments, run, "minatar-fidelity", title, [table], finding(tallies),
                                 seeds=[arguments.seed])


def finding(tallies: list[Tally]) -> str:
    """The result's sentence: which game versions matched the reference in every episode, and how the rest did."""
    whole = [tally.name for tally in tallies if tally.identical == tally.episodes]
    others = [f"{tally.name} {tally.identical} of {tally.episodes}" + (
        f", the other {tally.final_frame_only} differing only in their last frame's observation"
        if tally.identical + tally.final_frame_only == tally.episodes else "") for tally in tallies
        if tally.name not in whole]
    return (f"{len(whole)} of {len(tallies)} game versions played every compared episode identically to the "
            f"reference" + (f" ({', '.join(whole)})" if whole else "")
            + "".join(f"; {other}" for other in others) + ".")


def game_and_versions(word: str) -> tuple[str, list[int]]:
    """--games' 'breakout' (the --versions) or 'breakout-v0' (that one): (game, [version] or [])."""
    game, _, version = word.partition("-v")
    if game not in GAMES or version not in ("", "0", "1"):
        raise argparse.ArgumentTypeError(f"{word!r}: a game of {', '.join(GAMES)}, alone or with -v0 or -v1")
    return game, [int(version)] if version else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(GAMES), type=game_and_versions, metavar="GAME[-vN]",
                        help=f"of {', '.join(GAMES)}; GAME-v0 or GAME-v1 for one version, not --versions")
    parser.add_argument("--versions", nargs="+", type=int, default=[1, 0], choices=[0, 1],
                        help="0: all 6 actions (-v0); 1: the game's minimal set (-v1)")
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per game and version")
    parser.add_argument("--seconds-per-game", type=float, default=None,
                        help="stop a game and version after the episode that passes this many seconds")
    parser.add_argument("--seed", type=int, default=0)
    results_format.add_out_argument(parser, "results/minatar-fidelity.json")
    arguments = parser.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX starts: a batch of one game, no GPU wanted
    run = results_format.started("bench/minatar_fidelity.py")
    torch.set_num_threads(1)
    print(f"{'game':<18}{'episodes':>9}{'identical':>11}{'last frame':>13}{'steps':>11}{'s':>8}  first difference")
    tallies = []
    for game, versions in arguments.games:
        for version in versions or arguments.versions:
            tallies.append(compare_game(game, version, arguments.episodes, arguments.seed, arguments.seconds_per_game))
            print_row(tallies[-1])
    write_result(arguments, run, tallies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
