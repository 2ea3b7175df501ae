"""`rlsup run` on a job file with a [sweep]: it trains the file's own values and says so in one line on stderr."""
from __future__ import annotations

from rlsup_testing import cartpole_job, run_rlsup

from rlsup.run import files as runfiles

SWEEP = '\n[sweep]\n"dqn.lr" = [1e-4, 3e-4]\n"dqn.hidden_sizes" = [[16], [32, 32]]\n'


def sweep_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "[sweep]" in line]


def test_run_trains_the_files_own_values_and_says_the_sweep_is_left_out(tmp_path):
    path = cartpole_job(tmp_path, name="swept", total_steps=300, lr="1e-3")
    path.write_text(path.read_text() + SWEEP)
    result = run_rlsup("run", path, "--run-dir", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert sweep_lines(result.stderr) == [
        f"rlsup: {path} has a [sweep] of 4 variants: rlsup run trains only the file's own values "
        f"(dqn.lr=0.001 dqn.hidden_sizes=32x32); `rlsup submit {path}` queues every variant"], result.stderr
    trained = runfiles.read_run_spec(tmp_path / "run")
    assert (trained.dqn.lr, list(trained.dqn.hidden_sizes), trained.job.total_steps) == (1e-3, [32, 32], 300)

    plain = cartpole_job(tmp_path, name="plain", total_steps=300)
    result = run_rlsup("run", plain, "--run-dir", tmp_path / "plain-run")
    assert result.returncode == 0 and sweep_lines(result.stderr) == [], result.stderr
