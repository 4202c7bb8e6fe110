"""Load a spec file (YAML or JSON) into a MappingSpec, or raise one SpecError a person can act on.

The error names the file, the field path (`entities[2].row_key`) and, for YAML, the line:
`spec.yaml:14: entities[2].row_key: unknown transform 'revers' (known: ...)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .checks import check_spec
from .errors import UsageError
from .spec import MappingSpec

Path_ = tuple[str | int, ...]


class SpecError(UsageError):
    """A spec that cannot be used; `str()` is the one-line message for the user."""

    def __init__(self, message: str, file: str | None = None, path: str | None = None, line: int | None = None):
        self.message, self.file, self.path, self.line = message, file, path, line
        super().__init__(self.render())

    def render(self) -> str:
        where = self.file or "<spec>"
        if self.line:
            where += f":{self.line}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class SpecErrors(SpecError):
    """Several problems found by the semantic checks; each is reported."""

    def __init__(self, errors: list[SpecError]):
        self.errors = errors
        first = errors[0]
        super().__init__(first.message, first.file, first.path, first.line)

    def render(self) -> str:
        return "\n".join(error.render() for error in self.errors)


def format_path(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML would silently keep the last one)."""


def _lines(node: yaml.Node, path: Path_, out: dict[Path_, int]) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise SpecError(f"duplicate key {key!r}", path=format_path(path + (key,)), line=key_node.start_mark.line + 1)
            seen.add(key)
            out[path + (key,)] = key_node.start_mark.line + 1
            _lines(value_node, path + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for index, child in enumerate(node.value):
            _lines(child, path + (index,), out)


def parse_document(text: str, file: str | None = None) -> tuple[Any, dict[Path_, int]]:
    """The data of a YAML/JSON document and the line of every path in it."""
    try:
        node = yaml.compose(text, Loader=_LineLoader)
        data = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise SpecError(f"not valid YAML/JSON: {getattr(err, 'problem', err)}", file, line=mark.line + 1 if mark else None) from None
    lines: dict[Path_, int] = {}
    if node is not None:
        try:
            _lines(node, (), lines)
        except SpecError as err:
            err.file = file
            raise SpecError(err.message, file, err.path, err.line) from None
    return data, lines


def _line_for(path: Path_, lines: dict[Path_, int]) -> int | None:
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def _message(error: dict) -> str:
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        return "unknown key (check the spelling; see docs/SPEC.md for the keys allowed here)"
    if kind == "missing":
        return "required key is missing"
    return message.removeprefix("Value error, ")


def validate_data(data: Any, file: str | None = None, lines: dict[Path_, int] | None = None) -> MappingSpec:
    """Validate parsed data into a MappingSpec; shape errors and semantic checks both become SpecErrors."""
    lines = lines or {}
    if not isinstance(data, dict):
        raise SpecError("a spec is a mapping with source, target and entities", file, line=1)
    try:
        spec = MappingSpec.model_validate(data)
    except ValidationError as err:
        errors = []
        for error in err.errors():
            # pydantic appends union-member and validator names to loc; keep the real field path.
            path = tuple(part for part in error["loc"] if isinstance(part, int) or not _is_internal(part))
            errors.append(SpecError(_message(error), file, format_path(path), _line_for(path, lines)))
        raise (errors[0] if len(errors) == 1 else SpecErrors(errors)) from None
    problems = check_spec(spec)
    if problems:
        errors = [SpecError(message, file, format_path(path), _line_for(path, lines)) for path, message in problems]
        raise errors[0] if len(errors) == 1 else SpecErrors(errors)
    return spec


def _is_internal(part: str) -> bool:
    return "[" in part or part in {"function-after", "function-before", "function-plain", "str", "int", "bool"} or part.startswith(
        ("function-", "json-or-python", "lax-or-strict")
    )


def load_spec(path: str | Path) -> MappingSpec:
    """Read and validate a spec file; raise SpecError (file, field path, line) on any problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(f"cannot read the spec: {err.strerror}", str(path)) from None
    data, lines = parse_document(text, str(path))
    return validate_data(data, str(path), lines)
