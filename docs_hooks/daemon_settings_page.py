"""The daemon.toml reference: each setting and each [[cluster]] key, from their declarations in rlsup/daemon/."""
from __future__ import annotations

import dataclasses

from page_tables import bounds, code, table, toml_value
from rlsup.daemon.clusters import Cluster
from rlsup.daemon.scheduler import Settings

HEADER = ("Key", "Value", "Default", "Meaning")


def render(table_name: str) -> str:
    """settings: the [daemon] keys; cluster: the keys of each [[cluster]] table."""
    if table_name == "settings":
        return keys_table((field for field in dataclasses.fields(Settings) if not field.metadata.get("table")), "")
    if table_name == "cluster":
        return keys_table(dataclasses.fields(Cluster), "cluster.")
    raise ValueError(f"daemon.toml has no table {table_name!r} to describe")


def keys_table(fields, anchor_prefix: str) -> str:
    rows = [(f'<span id="{anchor_prefix}{field.name}"></span>{code(field.name)}', value_kind(field), default(field),
             field.metadata["doc"]) for field in fields]
    return table(HEADER, rows)


def value_kind(field: dataclasses.Field) -> str:
    """The key's type with its declared bounds: "integer, 1 to 2^16"."""
    named = field.type if isinstance(field.type, str) else field.type.__name__
    kind = {"int": "integer", "float": "number", "str": "string", "bool": "true or false"}[named]
    limits = bounds(field.metadata.get("minimum"), field.metadata.get("maximum"))
    return kind if limits == "any" else f"{kind}, {limits}"


def default(field: dataclasses.Field) -> str:
    """The declared default; one computed when the daemon starts is told by its function's docstring."""
    if field.default is not dataclasses.MISSING:
        return code(toml_value(field.default))
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory.__doc__.strip()
    return "required"
