"""Scheduled fields set in vain: each schedule (lr, epsilon, V-trace's lr, elite λ) at, before and past its end."""
from __future__ import annotations

from rlsup import spec as specs
from rlsup.spec.schedule_effects import unused

VTRACE_ELITE = """
[job]
algo = "vtrace"
[env]
id = "CartPole-v1"
[vtrace]
lr = 1e-3
lr_end_step = 5000
[[replay]]
kind = "queue"
capacity = 64
ratio = 0.5
[[replay]]
kind = "elite"
capacity = 100
ratio = 0.5
lambda_batch_multiplier = 4.0
anneal_steps = 1000
alpha_annealing_factor = 2.0
"""


def test_vtrace_lr_and_elite_lambda_are_named_from_the_step_their_schedule_ends():
    spec = specs.loads(VTRACE_ELITE)
    changed = {"vtrace.lr", "replay[1].lambda_batch_multiplier"}
    assert unused(spec, "f.toml", step=1_999, changed=changed) == []
    assert unused(spec, "f.toml", step=2_000, changed=changed) == [
        "f.toml: replay[1].lambda_batch_multiplier = 4 has no effect from the fork's step 2,000 on: "
        "anneal_steps × alpha_annealing_factor = 2,000 is that very step, so lambda = 1 holds"]
    assert [line.split(":")[1] for line in unused(spec, "f.toml", step=9_000, changed=changed)] == [
        " vtrace.lr = 0.001 has no effect from the fork's step 9,000 on", " replay[1].lambda_batch_multiplier = 4 "
        "has no effect from the fork's step 9,000 on"]
    assert unused(spec, "f.toml", step=9_000, changed={"vtrace.gamma"}) == []  # unchanged fields: nothing said
    assert unused(spec, "f.toml") == []  # V-trace learns from step 0: its lr is read before any end


def test_dqn_lr_without_an_end_step_holds_throughout_and_a_fork_at_step_0_waits_for_learning_starts():
    text = '[job]\nalgo = "dqn"\n[env]\nid = "CartPole-v1"\n[dqn]\nlearning_starts = 500\nlr_end_step = {}\n'
    assert unused(specs.loads(text.format(0)), "f", step=10 ** 6, changed={"dqn.lr"}) == []
    assert unused(specs.loads(text.format(500)), "f", step=0, changed={"dqn.lr"}) == [
        "f: dqn.lr = 0.0001 has no effect: lr_end_step = 500 is the same step as learning_starts = 500, so every "
        "update uses lr_end = 0"]
    assert unused(specs.loads(text.format(501)), "f") == []
