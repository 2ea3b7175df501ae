"""The `e` key says which jobs an edit will reach when the file drives more than one."""
from __future__ import annotations

import contextlib
import sys

from rlsup import client
from rlsup.hardware import FakeHardware
from rlsup.tui.app import RlsupApp
from rlsup.tui.jobstable import JobsTable


async def test_edit_of_a_shared_file_names_every_job_it_drives(rlsup_home, job_file, wait_until, monkeypatch):
    path = job_file()
    first = client.submit(path, home=rlsup_home, start_daemon=False)
    second = client.submit(path, home=rlsup_home, start_daemon=False, name="again")
    alone = client.submit(job_file(name="alone"), home=rlsup_home, start_daemon=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} -c pass")  # an editor that saves nothing
    monkeypatch.delenv("VISUAL", raising=False)

    app = RlsupApp(rlsup_home, hardware=FakeHardware())
    app.suspend = contextlib.nullcontext  # the headless driver cannot give the terminal away
    notes: list[str] = []
    original_notify = app.notify
    app.notify = lambda message, **options: (notes.append(message), original_notify(message, **options))
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: {first.id, second.id, alone.id} <= set(table.rows_shown),
                         what="the three jobs in the table")
        app.go_to_job(first.id)  # the cursor on its row: the selection is the row under the cursor
        await pilot.pause()
        await pilot.press("e")
        await wait_until(pilot, lambda: any(f"drives jobs {first.id}, {second.id}" in note for note in notes),
                         what="the jobs the edit reaches", report=lambda: str(notes))
        notes.clear()
        app.go_to_job(alone.id)
        await pilot.pause()
        await pilot.press("e")
        await wait_until(pilot, lambda: any("Saved" in note for note in notes), what="the save note")
        assert not any("drives" in note for note in notes)


async def test_e_on_an_example_job_edits_its_copy_never_the_repositorys_file(rlsup_home, wait_until, monkeypatch,
                                                                             tmp_path):
    """A newcomer's first minute (submit jobs/cartpole-dqn.toml, press e, save) changed a file git tracks."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "jobs" / "cartpole-dqn.toml"
    before = example.read_bytes()
    job = client.submit(example, home=rlsup_home, start_daemon=False)
    assert Path(job.spec_path) == Path(job.run_dir) / "source.toml" and Path(job.spec_path).read_bytes() == before
    editor = tmp_path / "editor.py"
    editor.write_text("import sys\nwith open(sys.argv[1], 'a') as file:\n    file.write('# edited\\n')\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)

    app = RlsupApp(rlsup_home, hardware=FakeHardware())
    app.suspend = contextlib.nullcontext
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: job.id in set(table.rows_shown), what="the job in the table")
        app.select_job(job.id)
        await pilot.press("e")
        await wait_until(pilot, lambda: Path(job.spec_path).read_text().endswith("# edited\n"),
                         what="the editor to save the job's copy")
    assert example.read_bytes() == before
