"""Pilot tests without a daemon: 200 jobs, the filter, dialogs, the command palette and the import rule."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlsup_testing import assert_one_line_error, run_rlsup, screen_shown
from test_foreground_and_features import said_by

from rlsup import client
from rlsup.client import DaemonStatus
from rlsup.formatting import byte_size, duration, short_count
from rlsup.hardware import FakeHardware
from rlsup.jobs.state import Desired, State
from rlsup.jobs.store import Store
from rlsup.tui.app import RlsupApp
from rlsup.tui.screens import ConfirmScreen, HelpScreen, SubmitScreen
from rlsup.tui.jobstable import JobsTable

SIZE = (160, 48)


def make_app(home: Path, **options) -> RlsupApp:
    options.setdefault("poll_interval_s", None)
    return RlsupApp(home, hardware=FakeHardware(), daemon_status=lambda home: DaemonStatus(True, 1, home), **options)


def submit_jobs(home: Path, names: list[str]) -> list[int]:
    with Store(home) as store:
        return [store.submit(name=name, spec_path=home / f"{name}.toml", run_dir=home / "runs" / name, algo="dqn",
                             env="CartPole-v1", total_steps=10_000).id for name in names]


@pytest.fixture
def no_daemon_starts(monkeypatch):
    """Intents and submissions are recorded in the store, but no daemon is spawned for them."""
    monkeypatch.setattr(client, "ensure_daemon", lambda home=None, **options: DaemonStatus(True, 1, home))


def redrawn_cells(table: JobsTable, monkeypatch) -> set[tuple[str, str]]:
    """The (row, column) of every cell the table is asked to redraw from now on."""
    redrawn: set[tuple[str, str]] = set()
    update_cell = table.update_cell

    def recording(row_key, column_key, value, **options):
        redrawn.add((str(row_key), str(column_key)))
        return update_cell(row_key, column_key, value, **options)

    monkeypatch.setattr(table, "update_cell", recording)
    return redrawn


async def test_two_hundred_jobs_and_a_refresh_redraws_only_the_changed_cell(rlsup_home, wait_until, monkeypatch):
    ids = submit_jobs(rlsup_home, [f"job-{number:03d}" for number in range(200)])

    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: table.row_count == 200, what="200 rows")
        redrawn = redrawn_cells(table, monkeypatch)
        app.poll_now()
        await pilot.pause()
        assert redrawn == set()
        with Store(rlsup_home) as store:
            store.update(ids[7], step=5_000)
        app.poll_now()
        await wait_until(pilot, lambda: redrawn, what="the changed row")
        assert redrawn == {(str(ids[7]), "progress")}
        assert "5k/10k" in table.get_cell(str(ids[7]), "progress").plain


async def test_slash_filters_jobs_by_name_and_escape_clears_it(rlsup_home, wait_until):
    submit_jobs(rlsup_home, ["pong-a", "breakout", "pong-b"])

    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: table.row_count == 3, what="3 rows")
        await pilot.press("slash", "p", "o", "n", "g")
        await wait_until(pilot, lambda: table.row_count == 2, what="the pong jobs only")
        assert sorted(row.job.name for row in table.rows_shown.values()) == ["pong-a", "pong-b"]
        await pilot.press("enter")  # keeps the filter, back to the table
        assert table.has_focus and table.row_count == 2
        await pilot.press("escape")
        await wait_until(pilot, lambda: table.row_count == 3, what="every job again")


async def test_kill_asks_first_and_no_means_no(rlsup_home, wait_until, no_daemon_starts):
    [job_id] = submit_jobs(rlsup_home, ["victim"])

    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.selected_job_id == job_id, what="the job selected")
        await pilot.press("k")
        await wait_until(pilot, lambda: screen_shown(app, ConfirmScreen), what="the question")
        await pilot.press("n")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: screen_shown(app, HelpScreen), what="the help")
        await pilot.press("escape")
    with Store(rlsup_home) as store:
        assert store.job(job_id).desired is Desired.RUNNING


async def test_the_command_palette_pauses_the_selected_job(rlsup_home, wait_until, no_daemon_starts):
    [job_id] = submit_jobs(rlsup_home, ["queued-one"])

    def desired():
        with Store(rlsup_home) as store:
            return store.job(job_id).desired

    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.selected_job_id == job_id, what="the job selected")
        await pilot.press("ctrl+p", *"pause queued")
        await pilot.pause(0.5)  # the palette searches in the background
        await pilot.press("enter")
        await wait_until(pilot, lambda: desired() is Desired.PAUSED, what="the pause intent")


async def test_submit_completes_the_path_and_queues_the_file(rlsup_home, wait_until, no_daemon_starts, tmp_path,
                                                        monkeypatch):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "cartpole-quick.toml").write_text('[job]\ntotal_steps = 1000\n\n[env]\nid = "CartPole-v1"\n')
    monkeypatch.chdir(tmp_path)

    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await wait_until(pilot, lambda: screen_shown(app, SubmitScreen), what="the submit dialog")
        await pilot.press(*"jo", "tab")
        await pilot.pause(0.3)
        await pilot.press("tab")
        await pilot.pause(0.3)
        field = app.screen.query_one("#path")
        assert field.value == "jobs/cartpole-quick.toml"  # relative to the directory the TUI runs in
        await pilot.press("enter")
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: table.row_count == 1, what="the submitted job")
        assert submitted_files(rlsup_home) == [str(jobs / "cartpole-quick.toml")]


def submitted_files(home: Path) -> list[str]:
    with Store(home) as store:
        return [job.spec_path for job in store.jobs()]


async def test_a_typed_absolute_path_is_submitted_as_typed(rlsup_home, wait_until, no_daemon_starts, tmp_path,
                                                           monkeypatch):
    # The dialog held the current directory as its text, so a typed absolute path was appended to it.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    job = elsewhere / "far.toml"
    job.write_text('[job]\ntotal_steps = 1000\n\n[env]\nid = "CartPole-v1"\n')
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")

    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await wait_until(pilot, lambda: screen_shown(app, SubmitScreen), what="the submit dialog")
        await pilot.press(*str(job), "enter")
        await wait_until(pilot, lambda: submitted_files(rlsup_home) == [str(job)], what="the typed file queued",
                         report=lambda: str(submitted_files(rlsup_home)), timeout=20)
        await pilot.press("s")
        await wait_until(pilot, lambda: screen_shown(app, SubmitScreen), what="the submit dialog again")
        assert str(tmp_path / "here") in app.screen.query_one("#path").placeholder  # where a relative path starts


async def test_an_intent_with_nothing_to_do_is_refused_in_the_same_words_by_the_cli_and_the_keys(rlsup_home,
                                                                                                 wait_until):
    """Whether an intent applies, and the sentence when it does not, are client.set_intent's (issue 25, fact 9):
    the CLI recorded a pause of a done job and said "requested", and the TUI worded the done job otherwise."""
    done, killed = submit_jobs(rlsup_home, ["finished", "stopped"])
    with Store(rlsup_home) as store:  # the daemon's moves, as its loop records them
        for state in (State.STARTING, State.RUNNING, State.STOPPING, State.DONE):
            store.transition(done, state, "to its budget")
        store.transition(killed, State.KILLED, "kill requested")
    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        for job_id, key, verb, words in ((done, "p", "pause", "nothing to pause"),
                                         (done, "r", "resume", "raise total_steps in"),
                                         (killed, "k", "kill", "already killed")):
            app.go_to_job(job_id)
            await wait_until(pilot, lambda: app.selected_job_id == job_id, what=f"job {job_id} selected")
            said = said_by(app)
            await pilot.press(key)
            await wait_until(pilot, lambda: said, what=f"what {key} says")
            typed = run_rlsup(verb, str(job_id))
            assert_one_line_error(typed, 1, f"job {job_id} is ", words)
            assert typed.stderr.strip() == f"rlsup: {said[0]}"
    with Store(rlsup_home) as store:  # neither recorded the intent
        assert [job.desired for job in store.jobs()] == [Desired.RUNNING, Desired.RUNNING]
        assert not [event for event in store.events() if event.kind == "intent"]


def test_short_counts_durations_and_sizes():
    assert [short_count(value) for value in (None, 999, 999_999, 12_345, 2_412_544)] == ["–", "999", "1M", "12.3k",
                                                                                         "2.41M"]
    assert [duration(value) for value in (None, 5, 65, 3700, 90_000)] == ["–", "5s", "1m05s", "1h01m", "1d01h"]
    assert [byte_size(value) for value in (10, 106_700, 3 << 30)] == ["10 B", "104.2 KiB", "3.0 GiB"]


def test_the_tui_imports_no_training_stack():
    code = ("import sys, rlsup.tui.app\n"
            "heavy = sorted({name.split('.')[0] for name in sys.modules} & {'torch', 'gymnasium', 'ale_py', 'cv2'})\n"
            "print(' '.join(heavy))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"rlsup.tui imports {result.stdout.strip()}"


async def test_a_poll_message_that_lands_while_the_screen_loses_its_widgets_is_dropped(tmp_path):
    """At exit Textual removes the screen's widgets while messages still arrive: a jobs refresh, the daemon's
    state or hardware then finds no table. It raised NoMatches out of the app (seen once in CI, at a test's end)."""
    from rlsup.tui import messages
    from rlsup.tui.jobstable import JobsTable
    from rlsup.tui.widgets import DaemonBanner, HardwareStrip

    app = make_app(tmp_path)
    async with app.run_test() as pilot:
        await pilot.pause()
        for kind in (JobsTable, DaemonBanner, HardwareStrip):
            await app.screen.query_one(kind).remove()
        app.on_jobs_refreshed(messages.JobsRefreshed(()))
        app.on_daemon_changed(messages.DaemonChanged(False, None))
        app.screen.show_hardware(None, {}, "tui")
        app.screen.show_marks(frozenset())
        await pilot.pause()
