"""Unroll slots and a weights buffer that actor processes and the learner share without copying through pipes."""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

# How long a publish waits for an actor to finish reading the weights before giving up: an actor
# killed while it held the lock would otherwise hang the learner for ever.
LOCK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class UnrollLayout:
    """Shapes of one actor round: one unroll of unroll_length steps for each of envs environments."""

    envs: int
    unroll_length: int
    observation_shape: tuple
    observation_dtype: np.dtype
    num_actions: int               # discrete: how many; continuous: the action vector's length
    feature_size: int
    continuous: bool = False       # Box actions: float vectors, and the behaviour's log-probabilities, not logits


@dataclass(frozen=True)
class UnrollArrays:
    """One round's unrolls, env-major: index [env, time]. Views into the slot memory, written in place."""

    observations: np.ndarray       # [E, T+1, *obs]
    actions: np.ndarray            # [E, T] int64; continuous: [E, T, A] float32, the Gaussian's sample u
    rewards: np.ndarray            # [E, T] float32
    dones: np.ndarray              # [E, T] bool: the step ended the episode or a life (no bootstrap through it)
    behaviour_logits: np.ndarray   # [E, T, A] float32; continuous: [E, T] float32 log μ(a_t | x_t)
    features: np.ndarray           # [E, T+1, F] float32

    def unroll(self, env: int) -> dict[str, np.ndarray]:
        """One env's unroll, keyed as UnrollStorage.add takes it (behaviour_logits: the behaviour's log-probabilities
        where actions are continuous)."""
        return {name: getattr(self, name)[env] for name in UNROLL_FIELDS}


UNROLL_FIELDS = tuple(UnrollArrays.__dataclass_fields__)


class UnrollGroups:
    """groups × envs unroll slots; one group is what one actor fills in one round.

    With shared=True the tensors live in shared memory and travel to spawned actors as file
    descriptors, so an actor writes a round straight where the learner reads it.
    """

    def __init__(self, layout: UnrollLayout, groups: int, *, shared: bool):
        envs, length = layout.envs, layout.unroll_length
        observation_dtype = torch.from_numpy(np.zeros(0, layout.observation_dtype)).dtype
        self.layout = layout
        self.groups = groups
        # Continuous actions are vectors, and their behaviour is one log-probability a step, not a logit per action.
        action_shape, action_dtype = ((layout.num_actions,), torch.float32) if layout.continuous else ((), torch.int64)
        behaviour_shape = () if layout.continuous else (layout.num_actions,)
        make = shared_zeros if shared else torch.zeros
        self.tensors = {
            "observations": make((groups, envs, length + 1, *layout.observation_shape), dtype=observation_dtype),
            "actions": make((groups, envs, length, *action_shape), dtype=action_dtype),
            "rewards": make((groups, envs, length), dtype=torch.float32),
            "dones": make((groups, envs, length), dtype=torch.bool),
            "behaviour_logits": make((groups, envs, length, *behaviour_shape), dtype=torch.float32),
            "features": make((groups, envs, length + 1, layout.feature_size), dtype=torch.float32),
        }

    def group(self, index: int) -> UnrollArrays:
        return UnrollArrays(**{name: tensor[index].numpy() for name, tensor in self.tensors.items()})


def shared_zeros(shape: tuple, *, dtype: torch.dtype) -> torch.Tensor:
    """A zeroed tensor made in shared memory, whose pages cost memory only once written.

    torch.zeros(...).share_memory_() writes every page twice (zeros, then the copy into shared memory)
    before any actor runs: 26 s for the slots of 100,000 envs on a VM's slow page faults.
    """
    count = int(np.prod(shape, dtype=np.int64))
    storage = torch.UntypedStorage._new_shared(count * dtype.itemsize)  # what share_memory_ itself calls
    return torch.empty(0, dtype=dtype).set_(storage, 0, shape)


class WeightsBuffer:
    """The learner's newest parameters as one flat float32 buffer and a version number.

    The learner publishes after every update; an actor copies the buffer into its own network
    between unrolls when the version moved. The lock keeps an actor from reading half a publish.
    """

    def __init__(self, network: nn.Module, *, lock=None, shared: bool):
        self.flat = flatten_parameters(network).detach().to("cpu", torch.float32).clone()
        self.version = torch.zeros(1, dtype=torch.int64)
        if shared:
            self.flat.share_memory_()
            self.version.share_memory_()
        self.lock = lock if lock is not None else threading.Lock()

    def publish(self, network: nn.Module) -> None:
        # One flatten on the learner's device and one transfer, not one small copy per tensor.
        flat = flatten_parameters(network).detach().to("cpu", torch.float32)
        with _held(self.lock):
            self.flat.copy_(flat)
            self.version += 1

    def load_into(self, network: nn.Module, known_version: int) -> int:
        """Copy the weights into network if newer than known_version; returns the version it now holds."""
        version = int(self.version[0])
        if version == known_version:
            return known_version
        with _held(self.lock), torch.no_grad():
            version = int(self.version[0])
            # Copies, not views (vector_to_parameters makes views): the next publish must not
            # change an actor's weights in the middle of its unroll.
            offset = 0
            for parameter in network.parameters():
                size = parameter.numel()
                parameter.copy_(self.flat[offset:offset + size].view_as(parameter))
                offset += size
        return version


class _held:
    """A lock acquired with a deadline, so a peer that died holding it fails loudly instead of hanging."""

    def __init__(self, lock):
        self.lock = lock

    def __enter__(self):
        if not self.lock.acquire(timeout=LOCK_TIMEOUT_S):
            raise RuntimeError(f"the weights lock was not released within {LOCK_TIMEOUT_S:.0f} s: "
                               "an actor probably died while reading the weights")
        return self

    def __exit__(self, *exc_info) -> None:
        self.lock.release()


def flatten_parameters(network: torch.nn.Module) -> torch.Tensor:
    """Every parameter in one vector, in logical order whatever its memory format (channels_last
    convolutions cannot be viewed flat, which is what torch's parameters_to_vector does)."""
    return torch.cat([parameter.detach().reshape(-1) for parameter in network.parameters()])
