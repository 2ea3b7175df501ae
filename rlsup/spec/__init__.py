"""Job files: TOML parsed into frozen dataclasses whose fields carry their default, doc and edit class.

One package, imported as `from rlsup import spec as specs`: fields (the dataclasses and setting()),
locating (errors with file:line:field), rules (cross-field rules, shared with the replay mixer),
loading, sweep ([sweep] tables), scheduler_table ([scheduler] tables), changes (diffs by edit class, the one judge() of an edit, refusals), render (resolved TOML, JSON Schema)
and overrides.
"""
from rlsup.spec.changes import (Change, Judgement, diff, identity_message, judge, merge_live, only_live,
                                refusal_message, refused, settle, without_identity)
from rlsup.spec.fields import (ARRAY_TABLES, EDIT_CLASSES, IDENTITY, LIVE, RESUME, TABLES, CheckpointSection,
                               DqnSection, EnvSection, EvalSection, JobSection, JobSpec, LogSection, ReplaySection,
                               SacSection, VtraceSection, env_state_fields, former_names, setting)
from rlsup.spec.loading import (SpecDeprecation, field_problem, load, loads, numbered_name, sanitize_name,
                                scheduler_of, sweep_of)
from rlsup.spec.locating import Located, Problem, SpecError, dotted, field_path, line_of, locate_keys
from rlsup.spec.overrides import apply_overrides, file_digest, make_overrides, pin_overrides
from rlsup.spec.render import json_schema, render_toml
from rlsup.spec.rules import (Violation, item_violations, job_violations, share_violations,
                              whole_shares)
from rlsup.spec.scheduler_table import SCHEDULER_TABLE, AshaSettings, PbtSettings, Settings as SchedulerSettings
from rlsup.spec.sweep import SWEEP_TABLE, Sweep

__all__ = [
    "ARRAY_TABLES", "AshaSettings", "EDIT_CLASSES", "Located", "PbtSettings", "SCHEDULER_TABLE", "SchedulerSettings", "IDENTITY", "LIVE", "RESUME", "TABLES", "Change", "Judgement",
    "CheckpointSection", "DqnSection", "EnvSection", "EvalSection", "JobSection", "JobSpec", "LogSection",
    "Problem", "ReplaySection", "SacSection", "SpecDeprecation", "SpecError", "Violation", "VtraceSection", "apply_overrides",
    "diff", "dotted", "env_state_fields", "field_path", "field_problem", "file_digest", "former_names",
    "identity_message", "item_violations", "judge", "job_violations", "json_schema", "line_of", "load", "loads",
    "locate_keys", "make_overrides", "merge_live", "only_live", "pin_overrides", "refusal_message", "refused",
    "numbered_name", "render_toml", "scheduler_of", "SWEEP_TABLE", "Sweep", "sanitize_name", "setting", "settle", "share_violations",
    "sweep_of", "whole_shares", "without_identity",
]
