"""An experiment's size is counted before anything is built: a sweep of 10^9 variants is one line, at once."""
from __future__ import annotations

import os
import resource
import subprocess

from rlsup_testing import assert_one_line_error, cartpole_text, rlsup_command

# Three lists of 1,000 values: 10^9 variants. Built in memory (a list of dicts) it grew past any cap; counted,
# it costs nothing. The cap makes the old behaviour fail as a MemoryError instead of feeding the OOM killer.
MEMORY_CAP = 3 * 1024 ** 3


def capped(*arguments: str) -> subprocess.CompletedProcess:
    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    return subprocess.run(rlsup_command(*arguments), capture_output=True, text=True, timeout=240,
                          env=os.environ.copy(), preexec_fn=cap_memory)


def test_a_sweep_of_a_billion_variants_is_refused_in_one_line_by_validate_and_submit(rlsup_home, tmp_path):
    lrs = ", ".join(f"{(index + 1) * 1e-6:.6g}" for index in range(1000))
    gammas = ", ".join(f"{0.5 + index * 1e-4:.4f}" for index in range(1000))
    batch_sizes = ", ".join(str(index + 1) for index in range(1000))
    text = (cartpole_text() + f'\n[sweep]\n"dqn.lr" = [{lrs}]\n"dqn.gamma" = [{gammas}]\n'
            f'"dqn.batch_size" = [{batch_sizes}]\n')
    path = tmp_path / "huge.toml"
    path.write_text(text)
    sweep_line = text.splitlines().index("[sweep]") + 1
    for command in ("validate", "submit"):
        result = capped(command, str(path))
        assert_one_line_error(result, 2, f"{path}:{sweep_line}: sweep:", "1,000,000,000 variants", "at most 1,000")
    assert not (rlsup_home / "rlsup.db").exists() or "huge" not in capped("list").stdout


def test_validate_of_a_sweep_just_over_the_limit_is_one_line(tmp_path):
    # 7 x 143 = 1,001 variants: one more than a submit queues. validate ended in SeedsError's traceback.
    lrs = ", ".join(f"{(index + 1) * 1e-4:.4g}" for index in range(7))
    batch_sizes = ", ".join(str(index + 1) for index in range(143))
    path = tmp_path / "over.toml"
    path.write_text(cartpole_text() + f'\n[sweep]\n"dqn.lr" = [{lrs}]\n"dqn.batch_size" = [{batch_sizes}]\n')
    assert_one_line_error(capped("validate", str(path)), 2, f"{path}:", "sweep:", "1,001 variants", "7 x 143")
