"""The documentation site builds with warnings as errors (broken links and anchors, pages left out of the nav), and
its generated reference holds everything the code declares: a generator that dropped something fails here."""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlsup.checkpoint.manifest import MANIFEST_FIELDS
from rlsup.checkpoint.trajectory import Trajectory
from rlsup.cli.parser import build_parser
from rlsup.daemon import settings_file
from rlsup.daemon.clusters import Cluster
from rlsup.daemon.scheduler import Settings
from rlsup.jobs.record import EventKind
from rlsup.run import exit as exits
from rlsup.run.exit import COMMAND_EXITS, DAEMON_EXITS, WORKER_EXITS, ExitRecord
from rlsup.run.status import WorkerStatus
from rlsup.spec.render import json_schema

ROOT = Path(__file__).parents[2]
BUILD_TIMEOUT_S = 300
# The pages whose tables the hook writes (docs_hooks/hook.py): none may keep a marker it did not replace.
GENERATED = ("reference/job-file", "reference/commands", "reference/exit-codes", "reference/file-formats",
             "reference/daemon-settings", "architecture")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module exactly as a user or CI builds it, from the repository's root."""
    site_dir = tmp_path_factory.mktemp("site")
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's banner about its successor
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
                           cwd=ROOT, env=environment, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr}"
    return site_dir


def page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def ids(html: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', html))


def test_the_site_builds_with_no_warning_and_every_marker_replaced(site: Path) -> None:
    for name in GENERATED:
        assert "generated:" not in page(site, name), f"{name}: a marker the hook did not replace"


def test_the_job_file_page_has_every_table_and_field_of_the_schema(site: Path) -> None:
    html, schema = page(site, "reference/job-file"), json_schema()
    anchors = ids(html)
    for table, table_schema in schema["properties"].items():
        assert table in anchors, f"[{table}] has no section"
        fields = table_schema.get("items", table_schema).get("properties", {})
        if table == "sweep":
            continue  # its keys are the identity fields, each checked in its own table
        for field, field_schema in fields.items():
            if field_schema.get("deprecated"):
                assert f"<code>{field}</code>" in html, f"{table}.{field}, an old spelling, is not named"
            else:
                assert f"{table}.{field}" in anchors, f"{table}.{field} is missing"
    scheduler_keys = {key for kind in schema["properties"]["scheduler"]["oneOf"] for key in kind["properties"]}
    assert {f"<code>{key}</code>" for key in scheduler_keys - {"kind"}} <= set(re.findall(r"<code>\w+</code>", html))


def test_the_commands_page_has_every_command_and_option_of_the_parser(site: Path) -> None:
    html = page(site, "reference/commands")
    subcommands = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    listed = [choice.dest for choice in subcommands._choices_actions]
    assert {"submit", "pause", "resume", "run", "enjoy", "fork"} <= set(listed)
    for name in listed:
        assert name in ids(html), f"rlsup {name} has no section"
        for action in subcommands.choices[name]._actions:
            for option in action.option_strings:
                assert option in html, f"rlsup {name} {option} is not listed"


def test_the_exit_codes_page_has_every_code_of_every_table(site: Path) -> None:
    anchors = ids(page(site, "reference/exit-codes"))
    for process, table in (("worker", WORKER_EXITS), ("command", COMMAND_EXITS), ("daemon", DAEMON_EXITS)):
        for code in table:
            assert f"{process}-{code.number}" in anchors, f"the {process}'s exit {code.number} is missing"


def test_every_exit_code_the_code_names_has_a_meaning() -> None:
    """A new EXIT_ constant without a row in a table would be a code the reference never explains."""
    named = {value for name, value in vars(exits).items() if name.startswith("EXIT_") and isinstance(value, int)}
    explained = {code.number for code in WORKER_EXITS + COMMAND_EXITS + DAEMON_EXITS}
    assert named - explained == set()


def test_the_daemon_settings_page_has_every_setting_and_cluster_key(site: Path) -> None:
    anchors = ids(page(site, "reference/daemon-settings"))
    settings = {field.name for field in dataclasses.fields(Settings) if not field.metadata.get("table")}
    assert settings and settings <= anchors
    assert {f"cluster.{field.name}" for field in dataclasses.fields(Cluster)} <= anchors


def test_the_daemon_settings_example_is_read_by_the_daemon(tmp_path: Path) -> None:
    """The reference pages are left out of tests/docs/test_examples_in_docs.py: their one example is checked here."""
    text = (ROOT / "docs" / "reference" / "daemon-settings.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
    (tmp_path / "daemon.toml").write_text(example, encoding="utf-8")
    settings = settings_file.load_settings(tmp_path)
    assert settings.cpu_jobs == 2 and [cluster.name for cluster in settings.clusters] == ["lab"]


def test_the_file_formats_page_has_every_key_the_writers_write(site: Path) -> None:
    """The page reads the records' fields from their source; the writers' own JSON says which keys there are."""
    html = page(site, "reference/file-formats")
    anchors = ids(html)
    every_key = Trajectory(evaluation_mean=1.0, env_restarts=["a restart"], tensorboard_events={"offset": 1})
    written = {"WorkerStatus": WorkerStatus().to_json(), "ExitRecord": ExitRecord(0, "", 0).to_json(),
               "Trajectory": every_key.to_extra()}
    for record, keys in written.items():
        missing = {key for key in keys if f"{record}.{key}" not in anchors}
        assert not missing, f"{record}: {sorted(missing)} not on the page"
    assert all(f"<code>{key}</code>" in html for key in MANIFEST_FIELDS)
    assert all(f"<code>{kind.value}</code>" in html for kind in EventKind)


def test_the_architecture_page_maps_every_module(site: Path) -> None:
    html = page(site, "architecture")
    modules = [path.relative_to(ROOT).as_posix() for path in (ROOT / "rlsup").rglob("*.py")
               if path.name != "__init__.py"]
    assert len(modules) > 100
    # In the map's tables, not merely named in the walks below them.
    assert [module for module in modules if f"<td><code>{module}</code></td>" not in html] == []
