"""The job-file reference: every table and field of a job file, read from the JSON Schema `rlsup schema` prints."""
from __future__ import annotations

from page_tables import bounds, code, table, toml_value
from rlsup.spec.fields import ARRAY_TABLES, TABLES, section_field
from rlsup.spec.render import json_schema
from rlsup.spec.scheduler_table import SCHEDULER_TABLE
from rlsup.spec.sweep import LEADER, NOT_SWEPT, SWEEP_TABLE, VALUES

FIELD_HEADER = ("Field", "Value", "Default", "Edit", "Meaning")


def render() -> str:
    """Each table of a job file in the order `rlsup schema` lists them, its fields in declaration order."""
    properties = json_schema()["properties"]
    parts = []
    for name, schema in properties.items():
        if name in TABLES:
            parts.append(section(f"[{name}]", name, TABLES[name], schema))
        elif name in ARRAY_TABLES:
            parts.append(section(f"[[{name}]]", name, ARRAY_TABLES[name], schema["items"]))
        elif name == SWEEP_TABLE:
            parts.append(sweep_section(schema))
        elif name == SCHEDULER_TABLE:
            parts.append(scheduler_section(schema))
        else:
            raise ValueError(f"the job-file schema has a table {name!r} this page does not describe")
    return "\n\n".join(parts)


def section(title: str, name: str, cls: type, schema: dict) -> str:
    rows = []
    for key, field_schema in schema["properties"].items():
        if field_schema.get("deprecated"):
            continue  # listed beside the field it is an old spelling of
        metadata = section_field(cls, key).metadata
        meaning = metadata["doc"]
        if metadata["formerly"]:
            meaning += f" (Old spelling, still read with a warning: {code(metadata['formerly'])}.)"
        anchor = f'<span id="{name}.{key}"></span>'
        rows.append((anchor + code(key), value_kind(field_schema), code(toml_value(field_schema["default"])),
                     metadata["edit"], meaning))
    description = schema["description"].split(": ", 1)[-1]  # "[job]: what the run is ...", less its title
    description = description[:1].upper() + description[1:]
    return f"## {code(title)} {{#{name}}}\n\n{description}\n\n{table(FIELD_HEADER, rows)}"


def type_name(schema: dict) -> str:
    if schema.get("type") == "array":
        return f"list of {type_name(schema['items'])}"
    return {"integer": "integer", "number": "number", "string": "string", "boolean": "true or false"}[schema["type"]]


def value_kind(schema: dict) -> str:
    """The value's type with its choices or bounds: "integer, 1 to 2^53", "list of integer, each at least 1"."""
    if "enum" in schema:
        return allowed(schema)
    kind, limits = type_name(schema), allowed(schema)
    if limits == "any":
        return kind
    return f"{kind}, {'each ' if schema.get('type') == 'array' else ''}{limits}"


def allowed(schema: dict) -> str:
    """Choices or bounds, as the schema states them (a list's bounds are its items')."""
    if "enum" in schema:
        return "one of " + ", ".join(code(toml_value(choice)) for choice in schema["enum"])
    if schema.get("type") == "array":
        schema = {**schema["items"], **{key: schema[key] for key in ("minimum", "maximum") if key in schema}}
    return bounds(schema.get("minimum"), schema.get("maximum"), exclusive_minimum=schema.get("exclusiveMinimum"),
                  exclusive_maximum=schema.get("exclusiveMaximum"))


def sweep_section(schema: dict) -> str:
    """[sweep]: its keys are the sweepable fields, named as in the tables above, so they are not listed again."""
    excluded = "; ".join(f"{code(name)} ({why})" for name, why in NOT_SWEPT.items())
    first = next(iter(schema["properties"]))
    link = code(f'{{ {LEADER} = "env.id", {VALUES} = [...] }}')
    return "\n\n".join([
        f"## {code('[' + SWEEP_TABLE + ']')} {{#{SWEEP_TABLE}}}",
        schema["description"],
        f"A key is any field of the edit class {code('identity')} above, dotted as {code(first)} "
        f"({len(schema['properties'])} fields in all), except {excluded}. A value is either a list of the "
        f"field's values, crossed with every other listed field, or a linked field that is not crossed: "
        f"{link}, one value for each value of the "
        f"field it follows."])


def scheduler_section(schema: dict) -> str:
    """[scheduler]: one row per key of each kind, since each kind has keys of its own."""
    rows = []
    for kind in schema["oneOf"]:
        name = kind["properties"]["kind"]["const"]
        for key, key_schema in kind["properties"].items():
            if key == "kind":
                continue
            default = "required" if key in kind["required"] else code(toml_value(key_schema["default"]))
            rows.append((code(key), code(name), scheduler_value(key_schema), default, key_schema.get("description")))
    header = ("Key", "For kind", "Value", "Default", "Meaning")
    return "\n\n".join([f"## {code('[' + SCHEDULER_TABLE + ']')} {{#{SCHEDULER_TABLE}}}", schema["description"],
                        table(header, rows)])


def scheduler_value(schema: dict) -> str:
    if schema.get("type") == "object":
        return f"table of field = list of factors, each {allowed(schema['additionalProperties']['items'])}"
    if schema.get("type") == "array":
        return (f"list of {schema['minItems']} to {schema['maxItems']} {type_name(schema['items'])}s, "
                f"each {allowed(schema['items'])}")
    return allowed(schema) if "enum" in schema else value_kind(schema)
