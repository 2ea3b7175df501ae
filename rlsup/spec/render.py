"""Rendering the spec: the resolved TOML written to each run, and the JSON Schema of job files."""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal

import tomli_w

from rlsup.spec.fields import ARRAY_TABLES, TABLES, JobSpec, field_types
from rlsup.spec.scheduler_table import SCHEDULER_TABLE, json_schema as scheduler_schema
from rlsup.spec.sweep import LEADER, SWEEP_TABLE, VALUES, sweepable


def render_toml(spec: JobSpec) -> str:
    """Every field of spec, each after its doc line and edit class: a run's job.toml."""
    blocks = []
    for section in dataclasses.fields(JobSpec):
        value = getattr(spec, section.name)
        items = value if isinstance(value, tuple) else (value,)
        header = f"[[{section.name}]]" if isinstance(value, tuple) else f"[{section.name}]"
        for item in items:
            lines = [header]
            for f in dataclasses.fields(item):
                lines.append(f"# {f.metadata['doc']} ({f.metadata['edit']})")
                lines.append(f"{f.name} = {_toml_value(getattr(item, f.name))}")
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _toml_value(value: Any) -> str:
    """A value as TOML, by a real TOML writer: json.dumps would escape characters beyond the Basic
    Multilingual Plane as surrogate pairs, which TOML forbids. Lists stay on one line."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if not isinstance(value, (bool, int, float, str)):
        raise TypeError(f"cannot write {value!r} as TOML")
    return tomli_w.dumps({"value": value}).removeprefix("value = ").rstrip("\n")


def json_schema() -> dict:
    """JSON Schema (draft 2020-12) of job files."""
    properties = {name: _section_schema(cls) for name, cls in TABLES.items()}
    for name, cls in ARRAY_TABLES.items():
        properties[name] = {"type": "array", "minItems": 1, "items": _section_schema(cls),
                            "description": cls.__doc__}
    properties[SWEEP_TABLE] = {
        "type": "object", "additionalProperties": False,
        "description": "Identity fields, each with the values an experiment runs (rlsup submit queues every variant).",
        "properties": {name: _swept_schema(hint) for name, hint in sweepable()}}
    properties[SCHEDULER_TABLE] = scheduler_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "rlsup job file",
            "type": "object", "additionalProperties": False, "properties": properties}


def _swept_schema(hint) -> dict:
    """A swept field: a list of values, or a link { follows = "env.id", values = [...] } (spec/sweep.py)."""
    values = {"type": "array", "minItems": 1, "items": _type_schema(hint)}
    link = {"type": "object", "additionalProperties": False, "required": [LEADER, VALUES],
            "properties": {LEADER: {"type": "string"}, VALUES: values}}
    return {"oneOf": [values, link]}


def _section_schema(cls: type) -> dict:
    hints = field_types(cls)
    properties = {}
    for f in dataclasses.fields(cls):
        schema = _type_schema(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        schema.update(default=default, description=f"{f.metadata['doc']} Edit class: {f.metadata['edit']}.")
        for key, schema_key in (("minimum", "minimum"), ("maximum", "maximum")):
            if f.metadata.get(key) is not None:
                name = "exclusiveMinimum" if key == "minimum" and f.metadata["exclusive_minimum"] else schema_key
                schema[name] = f.metadata[key]
        properties[f.name] = schema
        if f.metadata["formerly"]:
            properties[f.metadata["formerly"]] = {**schema, "deprecated": True,
                                                  "description": f"Old spelling of {f.name}: {schema['description']}"}
    return {"type": "object", "description": cls.__doc__, "additionalProperties": False,
            "properties": properties}


def _type_schema(annotation: Any) -> dict:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return {"type": "string", "enum": list(typing.get_args(annotation))}
    if origin is list:
        return {"type": "array", "items": _type_schema(typing.get_args(annotation)[0])}
    return {"type": {bool: "boolean", int: "integer", float: "number", str: "string"}[annotation]}
