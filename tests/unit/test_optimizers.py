"""rlsup's Adam and RMSprop step bit-identically to torch.optim's, share its state format, skip torch._dynamo."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from rlsup.algos.optimizers import FusedAdam, RMSprop

STEPS = 25


def small_network(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


def inputs(step: int) -> torch.Tensor:
    return torch.randn(8, 2, 6, 6, generator=torch.Generator().manual_seed(1000 + step))


def train(network: nn.Module, optimizer, steps: range) -> None:
    """Steps of a loss that changes with the step, at a learning rate that changes too (as rlsup's schedules do)."""
    for step in steps:
        for group in optimizer.param_groups:
            group["lr"] = 1e-2 / (1 + step)
        optimizer.zero_grad(set_to_none=True)
        network(inputs(step)).square().mean().backward()
        optimizer.step()


def parameters_bytes(network: nn.Module) -> list[bytes]:
    return [tensor.detach().numpy().tobytes() for tensor in network.state_dict().values()]


PAIRS = {
    "adam": (lambda parameters: FusedAdam(parameters, lr=1e-3),
             lambda parameters: torch.optim.Adam(parameters, lr=1e-3, fused=True)),
    "rmsprop": (lambda parameters: RMSprop(parameters, lr=1e-3, alpha=0.99, eps=0.01),
                lambda parameters: torch.optim.RMSprop(parameters, lr=1e-3, alpha=0.99, eps=0.01)),
    "rmsprop-momentum": (lambda parameters: RMSprop(parameters, lr=1e-3, alpha=0.9, eps=1e-5, momentum=0.5),
                         lambda parameters: torch.optim.RMSprop(parameters, lr=1e-3, alpha=0.9, eps=1e-5,
                                                                momentum=0.5)),
    # The MinAtar paper's DQN optimizer (its examples/dqn.py).
    "rmsprop-centered": (lambda parameters: RMSprop(parameters, lr=2.5e-4, alpha=0.95, eps=0.01, centered=True),
                         lambda parameters: torch.optim.RMSprop(parameters, lr=2.5e-4, alpha=0.95, eps=0.01,
                                                                centered=True)),
}


@pytest.mark.parametrize("name", PAIRS)
def test_steps_are_bit_identical_to_torch_optim(name):
    ours, theirs = PAIRS[name]
    network_ours, network_theirs = small_network(), small_network()
    optimizer_ours, optimizer_theirs = ours(network_ours.parameters()), theirs(network_theirs.parameters())
    train(network_ours, optimizer_ours, range(STEPS))
    train(network_theirs, optimizer_theirs, range(STEPS))
    assert parameters_bytes(network_ours) == parameters_bytes(network_theirs)
    assert parameters_bytes(network_ours) != parameters_bytes(small_network())  # it did train
    saved_ours, saved_theirs = optimizer_ours.state_dict(), optimizer_theirs.state_dict()
    assert saved_ours["param_groups"] == saved_theirs["param_groups"]
    assert list(saved_ours["state"]) == list(saved_theirs["state"])
    for index, state in saved_theirs["state"].items():
        assert list(saved_ours["state"][index]) == list(state)
        for key, tensor in state.items():
            mine = saved_ours["state"][index][key]
            assert (mine.dtype, mine.device, mine.numpy().tobytes()) == (tensor.dtype, tensor.device,
                                                                        tensor.numpy().tobytes())


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("direction", ["torch-to-rlsup", "rlsup-to-torch"])
def test_a_saved_state_continues_exactly_in_the_other(name, direction):
    """Checkpoints written before rlsup had its own optimizers load into them, and the other way round."""
    ours, theirs = PAIRS[name]
    first, second = (theirs, ours) if direction == "torch-to-rlsup" else (ours, theirs)
    straight = small_network()
    train(straight, first(straight.parameters()), range(STEPS))

    network = small_network()
    optimizer = first(network.parameters())
    train(network, optimizer, range(10))
    saved = optimizer.state_dict()
    continued = second(network.parameters())
    continued.load_state_dict(saved)
    train(network, continued, range(10, STEPS))
    assert parameters_bytes(network) == parameters_bytes(straight)


def test_loading_keeps_the_optimizers_own_hyperparameters():
    """A fork that changes eps gets its eps from its first step: the loaded state brings moments, not settings."""
    network = small_network()
    parent = RMSprop(network.parameters(), lr=1e-3, eps=0.01)
    train(network, parent, range(3))
    child = RMSprop(network.parameters(), lr=1e-3, eps=0.5)
    child.load_state_dict(parent.state_dict())
    assert child.state_dict()["param_groups"][0]["eps"] == 0.5
    assert torch.equal(child.state_dict()["state"][0]["square_avg"], parent.state_dict()["state"][0]["square_avg"])


def test_a_state_for_another_network_is_refused_in_one_sentence():
    saved = FusedAdam(small_network().parameters(), lr=1e-3).state_dict()
    with pytest.raises(ValueError, match="for 4 parameters in 1 groups, not 2 in one"):
        FusedAdam(nn.Linear(2, 2).parameters(), lr=1e-3).load_state_dict(saved)


def test_parameters_without_a_gradient_are_left_alone():
    network = small_network()
    frozen = network[3].bias
    before = frozen.detach().clone()
    optimizer = FusedAdam(network.parameters(), lr=1e-2)
    network(inputs(0)).square().mean().backward()
    frozen.grad = None
    optimizer.step()
    assert torch.equal(frozen, before)
    assert sorted(optimizer.state_dict()["state"]) == [0, 1, 2]


def test_a_dqn_gradient_step_imports_no_torch_dynamo():
    """The point of these classes: torch.optim's first call imports torch._dynamo (~0.9 s of CPU per process)."""
    program = """
import sys
import torch
from rlsup.algos.optimizers import FusedAdam, RMSprop
from rlsup.algos.nets import gradient_step
network = torch.nn.Linear(3, 2)
for optimizer in (FusedAdam(network.parameters(), lr=1e-3), RMSprop(network.parameters(), lr=1e-3)):
    loss = network(torch.ones(4, 3)).square().mean()
    gradient_step(optimizer, loss, network.parameters(), learning_rate=1e-3, max_grad_norm=1.0)
    optimizer.load_state_dict(optimizer.state_dict())
print("torch._dynamo" in sys.modules)
"""
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("before, after", [({}, {"momentum": 0.5}), ({"momentum": 0.5}, {}),
                                           ({}, {"centered": True}), ({"centered": True}, {})])
def test_a_fork_that_turns_momentum_or_centering_on_or_off_goes_on_training(before, after):
    """Fork may change optimizer settings: the buffers the new settings need start at zero, as at a first step."""
    network = small_network()
    optimizer = RMSprop(network.parameters(), lr=1e-3, alpha=0.95, eps=0.01, **before)
    train(network, optimizer, range(5))
    continued = RMSprop(network.parameters(), lr=1e-3, alpha=0.95, eps=0.01, **after)
    continued.load_state_dict(optimizer.state_dict())
    trained = parameters_bytes(network)
    train(network, continued, range(5, 10))
    assert parameters_bytes(network) != trained
    fresh = RMSprop(small_network().parameters(), lr=1e-3, **after)
    fresh.materialize_state()
    assert [set(state) for state in continued.state.values()] == [set(state) for state in fresh.state.values()]
    if "square_avg" in optimizer.state_dict()["state"][0]:  # the moments it kept are the ones saved
        assert not torch.equal(continued.state_dict()["state"][0]["square_avg"], torch.zeros(4, 2, 3, 3))
