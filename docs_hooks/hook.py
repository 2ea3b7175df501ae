"""mkdocs hook: writes the generated parts of the reference and architecture pages from rlsup's own declarations.

A page holds a marker line, `<!-- generated: NAME ARGUMENTS -->`, which on_page_markdown replaces with what the
generator NAME writes, so the pages cannot drift from the code. These modules stand outside docs/ (whose files are
pages and pictures) and outside rlsup/ (they are not part of the program: they import mkdocs' contract, not the
house's floors, and are not installed with it); mkdocs puts this folder on sys.path while it loads the hook."""
from __future__ import annotations

import re
from pathlib import Path

from mkdocs.exceptions import PluginError

import command_page
import daemon_settings_page
import exit_code_page
import job_file_page
import source_notes

GENERATORS = {
    "job-file": job_file_page.render,
    "commands": command_page.render,
    "exit-codes": exit_code_page.render,
    "daemon-settings": daemon_settings_page.render,
    "module-map": source_notes.module_map,
    "keys": source_notes.keys,
    "values": source_notes.values,
    "members": source_notes.members,
    "mapping": source_notes.mapping,
}
MARKER = re.compile(r"^<!-- generated: (?P<name>[a-z-]+)(?P<arguments>(?: [^ \n]+)*) -->$", re.MULTILINE)
# The nav section whose pages the hook lists itself: each results page rendered from results/*.json.
RESULTS = "results"


def on_page_markdown(markdown: str, page, config, files) -> str:
    def generated(marker: re.Match) -> str:
        generator = GENERATORS.get(marker["name"])
        if generator is None:
            raise PluginError(f"{page.file.src_uri}: no generator named {marker['name']!r} "
                              f"(docs_hooks/hook.py has {', '.join(GENERATORS)})")
        try:
            return generator(*marker["arguments"].split())
        except (LookupError, ValueError, OSError, TypeError) as error:
            raise PluginError(f"{page.file.src_uri}: {marker[0]}: {error}") from error

    return MARKER.sub(generated, markdown)


def on_config(config):
    """List every page of docs/results/ under Results, after its index: a result's page needs no nav edit."""
    section = next((entry for entry in config["nav"] or () if isinstance(entry, dict) and "Results" in entry), None)
    if section is None:
        return config
    listed = set(section["Results"])
    folder = Path(config["docs_dir"]) / RESULTS
    section["Results"] += [f"{RESULTS}/{path.name}" for path in sorted(folder.glob("*.md"))
                           if f"{RESULTS}/{path.name}" not in listed]
    return config
