"""Numbers too large for a double or for 64 bits, wherever a user or a run's files may write one (issue 49).

A TOML or JSON integer has no size limit: math.isfinite and float() raise OverflowError for one of hundreds of
digits, and Python's int() refuses one of thousands. Each place must refuse it with the sentence it gives any
other bad value, at its line, and never with a traceback."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rlsup_testing import assert_one_line_error, cartpole_text, run_rlsup

from rlsup import hardware, spec as specs
from rlsup.daemon import scheduler
from rlsup.formatting import GIB, number, whole
from rlsup.run.status import read_worker_status

HUNDREDS_OF_DIGITS = "1" + "0" * 400     # past a double's range (1.8e308): math.isfinite raises for it
THOUSANDS_OF_DIGITS = "1" + "0" * 5000   # past int()'s 4,300 digits: the TOML parser itself raises


def job_file(directory: Path, text: str) -> Path:
    path = directory / "big.toml"
    path.write_text(text)
    return path


def line_of(path: Path, fragment: str) -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), 1) if fragment in line)


def test_a_float_field_of_hundreds_of_digits_is_refused_at_its_line(tmp_path):
    """issue 49 item 13: math.isfinite raised OverflowError in spec/values.py (validate, submit, the edit judge)."""
    path = job_file(tmp_path, cartpole_text(lr=HUNDREDS_OF_DIGITS))
    with pytest.raises(specs.SpecError) as raised:
        specs.load(path)
    message = str(raised.value)
    assert f"{path}:{line_of(path, 'lr =')}: dqn.lr: " in message and "too large" in message, message
    assert HUNDREDS_OF_DIGITS not in message  # the sentence does not quote 400 digits back


def test_an_int_field_of_hundreds_of_digits_is_refused_without_quoting_them(tmp_path):
    """issue 49 item 13: int fields with huge values are refused, in a sentence a terminal can show."""
    path = job_file(tmp_path, cartpole_text(total_steps=int(HUNDREDS_OF_DIGITS)))
    with pytest.raises(specs.SpecError) as raised:
        specs.load(path)
    message = str(raised.value)
    assert f"{path}:{line_of(path, 'total_steps')}: job.total_steps: must fit in 64 bits" in message, message
    assert HUNDREDS_OF_DIGITS not in message and "401 digits" in message, message


@pytest.mark.parametrize("field", ["lr", "total_steps"])
def test_a_number_of_thousands_of_digits_is_invalid_toml_at_its_line(tmp_path, field):
    """issue 49 item 13: tomllib's int() raised ValueError (not TOMLDecodeError), which nobody caught."""
    text = cartpole_text().replace(f"{field} = ", f"{field} = {THOUSANDS_OF_DIGITS} #", 1)
    path = job_file(tmp_path, text)
    with pytest.raises(specs.SpecError) as raised:
        specs.load(path)
    message = str(raised.value)
    assert f"{path}:{line_of(path, field + ' =')}: invalid TOML: " in message and "digits" in message, message
    assert len(message) < 300


@pytest.mark.parametrize("table", [
    "[sweep]\n\"dqn.lr\" = [1e-3, {big}]\n",
    "[sweep.dqn]\nlr = [{big}]\n",
    "[scheduler]\nkind = \"asha\"\nrungs = [500, 1000]\nkeep = {big}\n",
    "[scheduler]\nkind = \"pbt\"\ninterval = 500\nquantile = {big}\n[scheduler.perturb]\n\"dqn.lr\" = [0.8, 1.2]\n",
])
def test_sweeps_and_schedulers_refuse_hundreds_of_digits(tmp_path, table):
    """issue 49 item 13: every other reader of a job file's numbers (sweeps, [scheduler])."""
    path = job_file(tmp_path, cartpole_text() + table.format(big=HUNDREDS_OF_DIGITS))
    result = run_rlsup("validate", path)
    assert_one_line_error(result, 2, f"{path}:")
    assert HUNDREDS_OF_DIGITS not in result.stderr


def test_validate_of_such_a_file_is_one_sentence(tmp_path):
    """issue 49 item 13: `rlsup validate` ended in the OverflowError's traceback."""
    for text in (cartpole_text(lr=HUNDREDS_OF_DIGITS), cartpole_text(lr=THOUSANDS_OF_DIGITS)):
        path = job_file(tmp_path, text)
        assert_one_line_error(run_rlsup("validate", path), 2, f"{path}:{line_of(path, 'lr =')}:")


# ---------------------------------------------------------------------------------------------
# daemon.toml


@pytest.mark.parametrize("key", ["tick_s", "gpu_memory_margin_gib", "restart_backoff_s", "hook_timeout_s",
                                 "debounce_s", "hardware_sample_s"])
def test_a_float_setting_of_hundreds_of_digits_is_a_settings_error_naming_it(key):
    """issue 49 item 2: float() raised OverflowError in scheduler._checked, which killed the daemon on SIGHUP."""
    with pytest.raises(scheduler.SettingsError, match=f"daemon.toml: {key}: ") as raised:
        scheduler.settings_from_mapping({key: int(HUNDREDS_OF_DIGITS)})
    assert HUNDREDS_OF_DIGITS not in str(raised.value)


@pytest.mark.parametrize("key", ["cpu_jobs", "jobs_per_gpu", "log_max_bytes", "log_backups", "tick_s",
                                 "hook_timeout_s", "gpu_memory_margin_gib"])
def test_a_setting_past_its_maximum_is_refused(key):
    """issue 49 item 2: an integer setting of 20 digits (log_backups: a rollover loop of 10**19 renames; tick_s:
    a wait() that raises OverflowError) is refused with the setting's maximum."""
    with pytest.raises(scheduler.SettingsError, match=f"daemon.toml: {key}: must be at most "):
        scheduler.settings_from_mapping({key: 10 ** 20})


def test_every_numeric_setting_has_a_maximum_its_default_keeps():
    defaults = scheduler.Settings()
    numeric = [setting for setting in dataclasses.fields(defaults) if setting.type in ("int", "float")]
    assert len(numeric) == 10
    for setting in numeric:
        assert setting.metadata["minimum"] <= getattr(defaults, setting.name) <= setting.metadata["maximum"]


# ---------------------------------------------------------------------------------------------
# RLSUP_FAKE_GPUS


@pytest.mark.parametrize("text", ["65", "100000", "9" * 20, "9" * 5000, "100000x8GiB"])
def test_a_fake_gpu_count_past_the_cap_is_the_cap(text):
    """issue 49 items 3 and 17: a 20-digit count overflowed tuple(range()) in schedule(); 100000 made every
    hardware sample megabytes of JSON. Every reader parses the switch here, and Hardware caps it again."""
    asked = hardware.fake_gpus({hardware.FAKE_GPUS_VARIABLE: text})
    assert asked.count == hardware.MAX_GPUS
    machine = hardware.machine_from_environment({hardware.FAKE_GPUS_VARIABLE: text})
    assert machine.gpu_indices() == tuple(range(hardware.MAX_GPUS))
    sample = json.dumps(machine.sample().to_dict())
    assert len(machine.sample().gpus) == hardware.MAX_GPUS and len(sample) < 20_000
    machine.close()
    assert hardware.Hardware(fake_gpus=10 ** 20).gpu_indices() == tuple(range(hardware.MAX_GPUS))


def test_a_fake_gpu_count_at_the_cap_is_kept():
    assert hardware.fake_gpus({hardware.FAKE_GPUS_VARIABLE: f"{hardware.MAX_GPUS}x80GiB"}) == (
        hardware.MAX_GPUS, 80 * GIB)


# ---------------------------------------------------------------------------------------------
# A run's JSON files: claims, read back checked


@pytest.mark.parametrize("value", [HUNDREDS_OF_DIGITS, "1e300", "-" + HUNDREDS_OF_DIGITS, str(2 ** 63)])
def test_a_status_file_of_huge_numbers_reads_as_missing_values(tmp_path, value):
    """issue 49 (status files as claims): a step of 400 digits raised OverflowError in formatting.number, which
    failed the job in the daemon's loop and killed its worker; one past 64 bits could not be stored."""
    (tmp_path / "status.json").write_text(f'{{"pid": 12, "step": {value}, "total_steps": {value}, '
                                          f'"steps_per_second": {value}}}')
    status = read_worker_status(tmp_path)
    assert (status.pid, status.step, status.total_steps) == (12, None, None)
    assert status.steps_per_second == (None if len(value) > 300 else float(value))  # a speed of 1e300 is a number


def test_number_and_whole_never_raise():
    huge = int(HUNDREDS_OF_DIGITS)
    assert number(huge) is None and whole(huge) is None and whole(1e300) is None and whole(2 ** 63) is None
    assert number(10 ** 300) == 1e300 and whole(2 ** 63 - 1) == 2 ** 63 - 1 and whole(-5) == -5


def test_a_count_of_thirty_digits_on_the_command_line_is_a_usage_error(tmp_path):
    """issue 49 (huge numbers): `rlsup status JOB --events N` handed a 30-digit N to SQLite's LIMIT, a traceback."""
    from rlsup import client

    job = client.submit(job_file(tmp_path, cartpole_text()), start_daemon=False)
    for arguments in (("status", job.id, "--events"), ("logs", job.id, "-n")):
        result = run_rlsup(*arguments, "9" * 30)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert "must be from 0 to 1,000,000" in result.stderr.splitlines()[-1], result.stderr
    assert run_rlsup("status", job.id, "--events", "3").returncode == 0


def test_a_huge_claimed_return_or_speed_reads_in_a_few_characters():
    """issue 49 (status files as claims): a forged mean_return of 1e308 made `rlsup list`'s RETURN cell 310
    characters wide, and with it every row of the table."""
    from rlsup.formatting import decimal, speed

    for value in (1e308, -1e308, 1e16):
        assert len(decimal(value, 1)) <= 10 and len(speed(value)) <= 10, (decimal(value, 1), speed(value))
    assert (decimal(-12.345, 1), speed(1234.4)) == ("-12.3", "1,234")


def test_a_received_run_of_huge_metric_values_plots(tmp_path):
    """issue 49 (huge numbers in a received run): a loss of 1e308 in metrics.jsonl ended `rlsup plot` in
    matplotlib's "arange: cannot compute length" (its axis limits overflow near a double's largest value)."""
    from rlsup import paths
    from rlsup.views.plots import series_of

    records = [{"t": 1.0, "kind": "train", "step": step, "loss": value}
               for step, value in ((150, 1e308), (250, 1e308), (350, 0.5), (1e308, 0.25))]
    # Values past what a plot holds are dropped; a step past it counts as none (the latest before it).
    series = series_of(records, "loss", "run")
    assert (series.steps, series.values) == ((350.0, 350.0), (0.5, 0.25))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / paths.JOB_FILE).write_text(cartpole_text())
    (run_dir / paths.METRICS_FILE).write_text("".join(json.dumps(record) + "\n" for record in records[:2]))
    result = run_rlsup("plot", run_dir, "--metric", "loss", "--out", tmp_path / "plot.png")
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2 and "loss" in result.stderr  # no plottable value of it: as a metric it lacks
