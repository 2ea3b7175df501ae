"""Command-line overrides: values given at submit that win over the job file until the file changes them."""
from __future__ import annotations

import hashlib

from rlsup.spec.fields import JobSpec
from rlsup.spec.loading import field_problem, sanitize_name
from rlsup.spec.locating import Problem, SpecError


def make_overrides(loaded: JobSpec, *, name: str | None = None, priority: int | None = None,
                   cluster: str | None = None) -> dict:
    """Record each override with the file's value it replaced."""
    overrides = {}
    if name is not None or sanitize_name(loaded.job.name) != loaded.job.name:
        # A name from the file is sanitised too: it becomes part of paths and must not hold '/' or '..'.
        wanted = loaded.job.name if name is None else name
        overrides["job.name"] = {"file": loaded.job.name, "value": sanitize_name(wanted)}
    if priority is not None:
        problem = field_problem("job", "priority", priority)
        if problem:
            raise SpecError([Problem("--priority", None, "job.priority", problem)])
        overrides["job.priority"] = {"file": loaded.job.priority, "value": int(priority)}
    if cluster is not None:  # the name is checked against daemon.toml where the run directory is made
        overrides["job.cluster"] = {"file": loaded.job.cluster, "value": cluster}
    return overrides


def pin_overrides(loaded: JobSpec, values: dict) -> dict:
    """Overrides that win over the file whatever it says later: an experiment's per-job values (seed, name,
    swept fields), so that editing one of them in the file shared by its jobs is no edit of each job."""
    return {key: {"file": getattr(getattr(loaded, key.split(".", 1)[0]), key.split(".", 1)[1]), "value": value,
                  "pinned": True} for key, value in values.items()}


def apply_overrides(loaded: JobSpec, overrides: dict) -> JobSpec:
    """Apply each override while the file still holds the value it replaced (an edit there wins), and pinned
    ones always."""
    for key, entry in overrides.items():
        section, field = key.split(".", 1)
        if entry.get("pinned") or getattr(getattr(loaded, section), field) == entry["file"]:
            loaded = loaded.replace(section, **{field: entry["value"]})
    # Every job's spec passes here, at submit and at each live edit the daemon judges: a name the file changed
    # after submit (so no override holds it) is sanitised like the first one, before it reaches the store, a
    # shell's completion or a terminal.
    if loaded.job.name and sanitize_name(loaded.job.name) != loaded.job.name:  # "": unnamed, judge() keeps the job's
        loaded = loaded.replace("job", name=sanitize_name(loaded.job.name))
    return loaded


def file_digest(data: bytes) -> str:
    """What a job file's bytes are, to tell a real edit from a save without a change."""
    return hashlib.sha256(data).hexdigest()
