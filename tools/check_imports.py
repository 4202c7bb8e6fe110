"""Fail on an import cycle or an import that goes against the layers (run by `make test`).

The rooms, lowest first: mappers (pure), pipelines (I/O and Beam), app (use cases), cli (commands).
A module may import its own room and the rooms below it, never above. `mappers` imports nothing
outside the standard library but pydantic and yaml. Every import counts, deferred ones too (a cycle
hidden inside a function is still a cycle of the design); only `if TYPE_CHECKING:` blocks are left
out. Benchmarks do not import tests, and test modules do not import each other's test_*.py files:
shared helpers live in support modules.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ["mappers", "pipelines", "app", "cli"]  # lowest first
MAPPERS_THIRD_PARTY = {"pydantic", "yaml", "pydantic_core"}


def module_name(path: Path, root: Path = ROOT) -> str | None:
    for package, folder in {f"ddb2bt.{room}": root / room for room in ROOMS + ["templates"]}.items():
        if folder in path.parents:
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            return ".".join((package, *parts))
    for top in ("benchmarks", "tests", "tools"):
        if (root / top) in path.parents:
            parts = path.relative_to(root).with_suffix("").parts
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, name: str) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # `from pkg import mod` imports the module pkg.mod when there is one.
                for alias in child.names:
                    found.append((child.lineno, f"{base}.{alias.name}"))
            visit(child)

    visit(tree)
    return found


def room_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "ddb2bt" and len(parts) > 1 and parts[1] in ROOMS:
        return parts[1]
    return None


def check(root: Path = ROOT) -> list[str]:
    files = {}
    for top in ROOMS + ["templates", "benchmarks", "tests", "tools"]:
        for path in sorted((root / top).rglob("*.py")):
            if ".venv" in path.parts or "node_modules" in path.parts:
                continue
            name = module_name(path, root)
            if name:
                files[name] = path
    known = set(files)
    std = set(sys.stdlib_module_names)
    problems: set[str] = set()
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        here = room_of(name)
        for line, target in imports_of(path, name):
            # `from a.b import c` names either the module a.b.c or a member of a.b.
            module = target if target in known else target.rpartition(".")[0]
            where = f"{path.relative_to(root)}:{line}"
            top = target.split(".")[0]
            if here == "mappers" and top != "ddb2bt" and top not in std | MAPPERS_THIRD_PARTY | {"__future__"}:
                problems.add(f"{where}: mappers/ is pure but imports {target}")
            there = room_of(module)
            if here and there and ROOMS.index(there) > ROOMS.index(here):
                problems.add(f"{where}: {here}/ imports upward from {there}/ ({module})")
            if name.startswith("benchmarks") and module.startswith("tests"):
                problems.add(f"{where}: benchmarks import from tests/ ({module})")
            if name.startswith("tests") and module.rpartition(".")[2].startswith("test_") and module != name:
                problems.add(f"{where}: a test module imports another test module ({module}); move the helper")
            if module in known and module != name:
                graph[name].add(module)
    problems.update(f"import cycle: {' -> '.join(cycle)}" for cycle in cycles(graph))
    return sorted(problems)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                strongconnect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(_path_through(graph, sorted(component)))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    return found


def _path_through(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A concrete cycle inside a strongly connected component, for a readable message."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    node = start
    while True:
        nxt = sorted(graph[node] & members)
        back = [n for n in nxt if n == start]
        if back and len(path) > 1:
            return path + [start]
        step = next((n for n in nxt if n not in seen), None)
        if step is None:
            return path + [start]
        path.append(step)
        seen.add(step)
        node = step


def main() -> int:
    problems = check()
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"check_imports: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
