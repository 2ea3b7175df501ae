"""Which algorithms `[job] algo` may name: built-ins and plugins, described by data so that no torch is imported.

Each Algorithm names its parts by "module:attribute" strings, loaded only when a worker builds a trainer
or `rlsup enjoy` builds a policy; spec validation and the TUI read the names and metrics alone. A third
algorithm comes as its own module plus one registration: `register()` in-process, or an entry point in
the group ENTRY_POINT_GROUP naming its Algorithm, which every process (the worker subprocess included)
discovers, as pytest and Flake8 discover their plugins. The module an entry point names must import
without torch: spec validation loads it.

It lives in spec/ because validating a job file needs it (which algorithms exist, what their replays
hold); the parts it names live above, in algos/ or a plugin, and are reached by name only: the Trainer
and Policy it returns are algos/contract.py's, typed Any here so that spec/ imports nothing above it.
"""
from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from rlsup.spec.fields import JobSpec

ENTRY_POINT_GROUP = "rlsup.algorithms"
# An env's actions: Discrete(n) from 0, or a Box vector with finite bounds (algos/envs/actions.py tells them apart).
ACTION_KINDS = ("discrete", "continuous")

log = logging.getLogger("rlsup.spec.registry")


class UnknownAlgorithm(ValueError):
    """[job] algo names no registered algorithm."""


@dataclass(frozen=True)
class Algorithm:
    """One algorithm: its name in [job] algo, where its parts live, and what its train records call its loss."""

    name: str
    trainer: str      # "module:attribute" of a TrainerFactory: (spec, device) -> Trainer
    policy: str       # "module:attribute" of a PolicyFactory: (spec, trainer state) -> greedy Policy
    loss_metric: str  # the key of the loss in its `train` records, which the TUI plots
    description: str = ""
    replay_item: str = "transitions"  # what its [[replay]] tables hold: "transitions" or "unrolls"
    # "module:attribute" of (spec, trainer state) -> a torch module from a batch of observations to greedy
    # actions, which `rlsup export` writes; "" for an algorithm that cannot be exported.
    greedy_network: str = ""
    # The action spaces it trains (ACTION_KINDS): an env of another kind is refused when its job is checked.
    action_kinds: tuple[str, ...] = ("discrete",)
    # The [env] sources it trains on: "gymnasium" env objects, and "fused" games on the learner's device.
    env_sources: tuple[str, ...] = ("gymnasium",)

    def build_trainer(self, spec: JobSpec, device: torch.device) -> Any:
        return load_attribute(self.trainer)(spec, device)

    def policy_from_checkpoint(self, spec: JobSpec, trainer_state: dict[str, Any]) -> Any:
        """The greedy CPU policy of a checkpoint (its "trainer" state), for enjoy and exports."""
        return load_attribute(self.policy)(spec, trainer_state)

    def greedy_network_from_checkpoint(self, spec: JobSpec, trainer_state: dict[str, Any]) -> Any:
        """The greedy policy of a checkpoint as a torch module, for `rlsup export`."""
        if not self.greedy_network:
            raise UnknownAlgorithm(f"algorithm {self.name!r} names no greedy_network, so it cannot be exported")
        return load_attribute(self.greedy_network)(spec, trainer_state)


BUILT_IN = (
    Algorithm("dqn", "rlsup.algos.dqn:DqnTrainer", "rlsup.algos.dqn:policy_from_checkpoint", "loss",
              "Deep Q-learning (double, n-step)", greedy_network="rlsup.algos.dqn:greedy_network",
              env_sources=("gymnasium", "fused")),
    Algorithm("vtrace", "rlsup.algos.fused_vtrace:build_trainer", "rlsup.algos.impala:policy_from_checkpoint", "total_loss",
              "actor/learner V-trace (IMPALA)", replay_item="unrolls",
              greedy_network="rlsup.algos.impala:greedy_network", action_kinds=("discrete", "continuous"),
              env_sources=("gymnasium", "fused")),
    Algorithm("sac", "rlsup.algos.sac:SacTrainer", "rlsup.algos.sac:policy_from_checkpoint", "q_loss",
              "soft actor-critic (twin Q, tuned temperature)", greedy_network="rlsup.algos.sac:greedy_network",
              action_kinds=("continuous",)),
)

_algorithms: dict[str, Algorithm] = {algorithm.name: algorithm for algorithm in BUILT_IN}
_discovered = False


def load_attribute(reference: str) -> Any:
    """The object a "module:attribute" string names (a dotted attribute path allowed after the colon)."""
    module_name, _, attribute_path = reference.partition(":")
    value: Any = importlib.import_module(module_name)
    for attribute in attribute_path.split("."):
        value = getattr(value, attribute)
    return value


def register(algorithm: Algorithm) -> None:
    """Make an algorithm available under its name; a name already taken by another entry is refused."""
    existing = _algorithms.get(algorithm.name)
    if existing is not None and existing != algorithm:
        raise ValueError(f"algorithm {algorithm.name!r} is already registered ({existing.trainer})")
    _algorithms[algorithm.name] = algorithm


def discover() -> None:
    """Register every entry point of ENTRY_POINT_GROUP once; a broken plugin is logged, never fatal.

    Fatal would mean one bad install stops every job file from loading, its own name or not.
    """
    global _discovered
    if _discovered:
        return
    _discovered = True
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            algorithm = entry.load()
            if not isinstance(algorithm, Algorithm):
                raise TypeError(f"{entry.value} is a {type(algorithm).__name__}, not an rlsup Algorithm")
            if algorithm.name != entry.name:
                raise ValueError(f"{entry.value} is named {algorithm.name!r}, its entry point {entry.name!r}")
            register(algorithm)
        except Exception as error:  # noqa: BLE001 - whatever a plugin raises, the others still load
            log.warning("ignoring the algorithm plugin %s = %s: %s", entry.name, entry.value, error)


def algorithm_names() -> tuple[str, ...]:
    discover()
    return tuple(_algorithms)


def get(name: str) -> Algorithm:
    """The algorithm named name; UnknownAlgorithm names the choices."""
    discover()
    try:
        return _algorithms[name]
    except KeyError:
        raise UnknownAlgorithm(unknown_message(name)) from None


def unknown_message(name: object) -> str:
    return f"must be one of {', '.join(repr(known) for known in algorithm_names())}, not {name!r}"


def loss_metric_names() -> tuple[str, ...]:
    """Every algorithm's loss key, built-ins first: a reader of metrics.jsonl picks the one a record has."""
    discover()
    return tuple(dict.fromkeys(algorithm.loss_metric for algorithm in _algorithms.values()))
