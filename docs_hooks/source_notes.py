"""What the code itself says: module docstrings for the module map, read without importing the modules; declared
names (a format's keys, a file's name) with the comment beside them, and a format's key table, for the file-format
reference."""
from __future__ import annotations

import ast
import importlib
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

from page_tables import code, table

import rlsup

PACKAGE = Path(rlsup.__file__).parent
ROOT = PACKAGE.parent


@dataclass(frozen=True)
class Declared:
    """One name assigned in a module or a class body: its annotation, its value's source, and its comment."""

    name: str
    annotation: str
    value: str
    comment: str


# ---------------------------------------------------------------------------------------------
# The module map


def module_map() -> str:
    """Each package of rlsup, its docstring, and a table of its modules with theirs, the package's own first."""
    folders = {path.parent for path in PACKAGE.rglob("*.py")}
    packages = sorted(folders, key=lambda folder: folder.relative_to(ROOT).parts)
    return "\n\n".join(package_section(folder) for folder in packages)


def package_section(folder: Path) -> str:
    name = folder.relative_to(ROOT).as_posix()
    modules = sorted(path for path in folder.glob("*.py") if path.name != "__init__.py")
    rows = [(code(path.relative_to(ROOT).as_posix()), summary(path)) for path in modules]
    heading = f"### {code(name + '/')} {{#{name.replace('/', '-')}}}"
    return "\n\n".join([heading, summary(folder / "__init__.py"), table(("Module", "What it is"), rows)])


def summary(path: Path) -> str:
    """A module's docstring up to its first blank line: the one line (sometimes wrapped) the house asks for."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(docstring.split("\n\n")[0].split())


# ---------------------------------------------------------------------------------------------
# Declared names with their comments


def declared(path: Path, scope: str | None = None) -> list[Declared]:
    """The names assigned in a module's body (or in one class's body), each with its comment: the one at the end
    of its line, else the block of comment lines right above it."""
    source = path.read_text(encoding="utf-8")
    body = ast.parse(source).body
    if scope is not None:
        body = next(node for node in body if isinstance(node, ast.ClassDef) and node.name == scope).body
    comments, alone = line_comments(source)
    found = []
    for node in body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if not isinstance(target, ast.Name):
            continue
        trailing = [comments[line] for line in range(node.lineno, node.end_lineno + 1)
                    if line in comments and line not in alone]
        above = []
        line = node.lineno - 1
        while line in alone:
            above.insert(0, comments[line])
            line -= 1
        annotation = ast.unparse(node.annotation) if isinstance(node, ast.AnnAssign) else ""
        value = ast.unparse(node.value) if node.value is not None else ""
        found.append(Declared(target.id, annotation, value, " ".join(trailing or above)))
    return found


def line_comments(source: str) -> tuple[dict[int, str], set[int]]:
    """Each line's comment text, and the lines that hold nothing but a comment."""
    comments, code_lines = {}, set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code_lines.update(range(token.start[0], token.end[0] + 1))
    return comments, set(comments) - code_lines


def source_path(relative: str) -> Path:
    path = ROOT / relative
    if not path.is_file():
        raise FileNotFoundError(f"{relative}: no such module to read declarations from")
    return path


def keys(relative: str, scope: str) -> str:
    """A record's fields as the keys of the JSON it writes (the writers use the field names as keys)."""
    namespace = vars(importlib.import_module(relative.removesuffix(".py").replace("/", ".")))
    rows = [(f'<span id="{scope}.{item.name}"></span>{code(item.name)}', json_type(item.annotation, namespace),
             item.comment)
            for item in declared(source_path(relative), scope) if item.annotation and "ClassVar" not in item.annotation]
    return table(("Key", "Type", "Meaning"), rows)


def values(relative: str, *names: str) -> str:
    """Module-level names' values (a file's name, a record kind's spelling) with their comments."""
    items = {item.name: item for item in declared(source_path(relative))}
    missing = [name for name in names if name not in items]
    if missing:
        raise LookupError(f"{relative}: declares no {', '.join(missing)}")
    return value_table(items[name] for name in names)


def members(relative: str, scope: str) -> str:
    """Every value a class declares (an enum's members) with its comment."""
    return value_table(item for item in declared(source_path(relative), scope) if item.value)


def value_table(items) -> str:
    """A table of values and their meanings; values that need none (an enum's plain words) as one line."""
    items = list(items)
    if not any(item.comment for item in items):
        return ", ".join(code(literal(item.value)) for item in items) + "."
    return table(("Value", "Meaning"), ((code(literal(item.value)), item.comment) for item in items))


# How a record's annotated Python types read as the JSON its writer makes of them.
JSON_NAMES = {"int": "integer", "float": "number", "str": "string", "bool": "true or false", "None": "null",
              "dict": "object", "Path": "string"}


def json_type(annotation: str, namespace: dict) -> str:
    """"int | None" -> "integer or null", "tuple[str, ...]" -> "list of string"; a class of the code as its JSON:
    an enum of strings as a string, a record as an object."""
    return _json_type(ast.parse(annotation, mode="eval").body, namespace)


def _json_type(node: ast.expr, namespace: dict) -> str:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return f"{_json_type(node.left, namespace)} or {_json_type(node.right, namespace)}"
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("list", "tuple"):
        items = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
        return f"list of {_json_type(items, namespace)}"
    name = ast.unparse(node.value if isinstance(node, ast.Subscript) else node)
    if name in JSON_NAMES:
        return JSON_NAMES[name]
    declared_class = namespace.get(name)
    if isinstance(declared_class, type) and issubclass(declared_class, str):
        return "string"
    if isinstance(declared_class, type):
        return "object"
    raise LookupError(f"no JSON type for the annotation {ast.unparse(node)!r}")


def literal(source: str) -> str:
    """A value as it appears on disk: "job.toml" -> job.toml; an expression stays as written."""
    try:
        value = ast.literal_eval(source)
    except ValueError:
        return source
    return value if isinstance(value, str) else repr(value)


def mapping(dotted: str) -> str:
    """A table of keys and the types their values must have, as a module declares it (a manifest's fields)."""
    module, _, name = dotted.rpartition(".")
    declared_keys = getattr(importlib.import_module(module), name)
    rows = []
    for key, kinds in declared_keys.items():
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        rows.append((code(key), " or ".join(JSON_NAMES[kind.__name__] for kind in kinds)))
    return table(("Key", "Type"), rows)
