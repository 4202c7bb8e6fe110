"""docs/ARCHITECTURE.md's tree is the package's tree: every module has its line, every line a module."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("mappers", "pipelines", "app", "cli")


def drawn_tree(text: str) -> set[str]:
    """The paths the map's code block names, rebuilt from its indentation (two spaces a level)."""
    block = text.split("## The tree", 1)[1].split("```", 2)[1]
    paths: set[str] = set()
    folders: list[str] = []
    for line in block.splitlines():
        match = re.match(r"( *)(\S+)", line)
        if not match:
            continue
        depth, name = len(match.group(1)) // 2, match.group(2)
        if name.endswith("/"):
            folders = folders[:depth] + [name.rstrip("/")]
            paths.add("/".join(folders) + "/")
        elif name.endswith(".py"):
            paths.add("/".join(folders[:depth] + [name]))
    return paths


def real_tree() -> set[str]:
    paths: set[str] = set()
    for room in ROOMS:
        for path in (ROOT / room).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(ROOT)
            if path.name == "__init__.py":
                paths.add(rel.parent.as_posix() + "/")
            else:
                paths.add(rel.as_posix())
    return paths


def test_the_map_names_every_module_and_only_modules():
    drawn, real = drawn_tree((ROOT / "docs" / "ARCHITECTURE.md").read_text()), real_tree()
    assert sorted(real - drawn) == [], "modules missing from docs/ARCHITECTURE.md's tree"
    assert sorted(drawn - real) == [], "docs/ARCHITECTURE.md's tree names modules that do not exist"


def test_the_reader_of_the_map_sees_nesting():
    drawn = drawn_tree("## The tree\n```\na/\n  x.py  one\n  b/  sub\n    y.py  two\nc/\n  z.py\n```\n")
    assert drawn == {"a/", "a/x.py", "a/b/", "a/b/y.py", "c/", "c/z.py"}
