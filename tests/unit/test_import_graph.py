"""No import circles: rlsup's modules, read with their imports inside functions, form no cycle."""
from __future__ import annotations

import ast

from test_layers import ALL_MODULES, imported_from, rlsup_imports

# Circles kept on purpose, each the set of its modules with why. An import moved into a function to dodge a
# circle still counts: the two modules still need each other, only the order of loading hides it.
ALLOWED_CIRCLES: dict[frozenset[str], str] = {
    frozenset({"rlsup.spec.fields", "rlsup.spec.render", "rlsup.spec.scheduler_table", "rlsup.spec.sweep"}):
        "JobSpec.to_toml() and .sha256() (a dozen callers) render with spec.render, which reads the field classes",
    frozenset({"rlsup.tui.app", "rlsup.tui.commands"}):
        "type-only: the palette offers RlsupApp's actions; a Protocol would be an unchecked copy of its interface",
}


def import_graph() -> dict[str, set[str]]:
    """Each rlsup module and the rlsup modules it imports anywhere in its text."""
    return {module: rlsup_imports(module) & set(ALL_MODULES) for module in ALL_MODULES}


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The graph's strongly connected components (Tarjan): modules each of which imports the others, in steps."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = lowest[node] = len(index)
        stack.append(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                lowest[node] = min(lowest[node], lowest[successor])
            elif successor in stack:
                lowest[node] = min(lowest[node], index[successor])
        if lowest[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    return [frozenset(component) for component in strongly_connected(graph) if len(component) > 1]


def described(circle: frozenset[str], graph: dict[str, set[str]]) -> str:
    """A circle's imports among its own modules, one a line: what to untie."""
    return "\n".join(f"  {module} imports {sorted(graph[module] & circle)}" for module in sorted(circle))


def test_circles_are_found_through_several_modules_and_apart_from_their_neighbours() -> None:
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"f", "a"}}
    assert sorted(sorted(circle) for circle in circles(graph)) == [["a", "b", "c"], ["d", "e"]]


def test_imports_inside_functions_and_relative_ones_are_edges() -> None:
    assert "rlsup.tui.app" in rlsup_imports("rlsup.cli.parser")  # imported inside command_tui()
    relative = ast.parse("from ..jobs import store").body[0]
    assert imported_from("rlsup.daemon.main", relative) == "rlsup.jobs"
    assert imported_from("rlsup.spec", ast.parse("from .fields import IDENTITY").body[0]) == "rlsup.spec.fields"


def test_no_modules_import_each_other() -> None:
    graph = import_graph()
    found = [circle for circle in circles(graph) if circle not in ALLOWED_CIRCLES]
    assert found == [], "import circles:\n" + "\n\n".join(described(circle, graph) for circle in found)


def test_each_allowed_circle_is_still_one() -> None:
    assert set(ALLOWED_CIRCLES) <= set(circles(import_graph()))
