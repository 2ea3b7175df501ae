"""Dormant units in a V-trace run's torso, checkpoint by checkpoint: how much of its network a plateau has lost.

A unit is dormant (Sokar et al. 2023, "The Dormant Neuron Phenomenon in Deep RL") when its mean absolute
activation over a batch of states, divided by the mean of that over its layer, is at most tau; with ReLU a
unit that never fires scores 0. The states are the ones the checkpoint's own policy visits (actions sampled
from its logits, as the actors act), so each checkpoint is scored where it plays.

    python bench/dormant_units.py RUN_DIR [RUN_DIR ...] [--states 4000] [--tau 0.025]

The result (bench/results_format.py) goes to --out, by default results/dormant-units.json.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

import results_format  # bench/ beside this script
from rlsup.algos.envs.training import make_env, probe_env
from rlsup.algos.nets import policy_value_network_of
from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.checkpoint.store import load_checkpoint
from rlsup.run import files as runfiles

SEED = 12345  # the same env stream for every checkpoint


def visited_states(network, env_section, count: int) -> torch.Tensor:
    """count observations from one env played by the network's sampled policy, from a fixed seed."""
    env = make_env(env_section, seed=SEED)
    generator = torch.Generator().manual_seed(SEED)
    observation, states = env.reset(), []
    try:
        while len(states) < count:
            states.append(observation)
            with torch.no_grad():
                logits = network(torch.as_tensor(observation[None])).logits
            action = int(torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator))
            step = env.step(action)
            observation = env.reset() if step.done else step.observation
    finally:
        env.close()
    return torch.as_tensor(np.stack(states))


def hidden_layers(network) -> list[torch.nn.Module]:
    """The torso's activation modules, in order: each one's output is a hidden layer."""
    return [module for module in network.torso.layers if not isinstance(module, (torch.nn.Linear, torch.nn.Conv2d,
                                                                                   torch.nn.Flatten))]


def dormant_shares(network, states: torch.Tensor, tau: float) -> list[float]:
    """Per hidden layer, the share of its units (channels, for a convolution) that are tau-dormant."""
    outputs = []
    hooks = [layer.register_forward_hook(lambda _m, _i, output: outputs.append(output)) for layer in
             hidden_layers(network)]
    with torch.no_grad():
        network(states)
    for hook in hooks:
        hook.remove()
    shares = []
    for output in outputs:
        per_unit = output.abs().mean(dim=(0, 2, 3)) if output.dim() == 4 else output.abs().mean(dim=0)
        score = per_unit / per_unit.mean().clamp_min(1e-12)
        shares.append(float((score <= tau).float().mean()))
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--states", type=int, default=4000)
    parser.add_argument("--tau", type=float, default=0.025)
    results_format.add_out_argument(parser, "results/dormant-units.json")
    arguments = parser.parse_args()
    run = results_format.started("bench/dormant_units.py")
    torch.set_num_threads(1)
    tables = []
    for run_dir in arguments.runs:
        spec = runfiles.read_run_spec(run_dir)
        shape, _, actions, _ = probe_env(spec.env)
        print(f"{run_dir} ({spec.env.id}, activation {spec.vtrace.activation}): dormant share per hidden layer, "
              f"tau {arguments.tau}, {arguments.states} visited states")
        rows = {}
        for entry in list_checkpoints(run_dir):
            network = policy_value_network_of(spec.vtrace, shape, actions)
            network.load_state_dict(load_checkpoint(entry.path, verify=True)[1]["trainer"]["learner"]["network"])
            network.eval()
            shares = dormant_shares(network, visited_states(network, spec.env, arguments.states), arguments.tau)
            print(f"  step {entry.step:>9,}: " + "  ".join(f"{share:6.1%}" for share in shares))
            rows[f"{entry.step:,}"] = [100 * share for share in shares]
        layers = max((len(shares) for shares in rows.values()), default=0)
        if rows:
            tables.append(results_format.measurement(
                f"{run_dir.name} ({spec.env.id}, activation {spec.vtrace.activation})", "checkpoint step",
                [results_format.column(f"hidden layer {layer + 1} dormant", "%", 1) for layer in range(layers)], rows,
                f"tau {arguments.tau}, {arguments.states:,} states its own policy visits."))
    if tables:
        results_format.write_figures(arguments, run, "dormant-units", "Dormant units in V-trace runs' torsos, "
                                     "checkpoint by checkpoint", tables)


if __name__ == "__main__":
    main()
