"""Load a spec file (YAML or JSON) into a MappingSpec, or raise one SpecError a person can act on.

The error names the file, the field path (`entities[2].row_key`) and, for YAML, the line:
`spec.yaml:14: entities[2].row_key: unknown transform 'revers' (known: ...)`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any, Iterator

import yaml
from pydantic import ValidationError

from .checks import check_spec, format_path
from .errors import UsageError
from .spec import MappingSpec
from .spelling import did_you_mean

Path_ = tuple[str | int, ...]

MAX_SPEC_BYTES = 4 * 1024 * 1024
"""A spec is a few kilobytes; anything over this is not one (and is refused before it is parsed)."""
MAX_DEPTH = 32
"""Nesting a spec may have (a real one needs 8); YAML aliases count as the nesting they stand for."""
MAX_NODES = 200_000
"""Values a spec may expand to, aliases expanded: an alias bomb is refused while it is being read."""


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

    def lines(self) -> list[str]:
        return [" ".join(error.render().split()) for error in self.errors]


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that bounds what a hostile document can cost before any object is built.

    Composing keeps, for every node, how many values it expands to and how deep it reaches with
    its aliases followed (aliases point to nodes already measured), so nesting and alias
    expansion are refused at the node that goes over, in time linear in the text.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0
        self._measured: dict[yaml.Node, tuple[int, int]] = {}  # node -> (values, height)

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        event = self.peek_event()
        line = event.start_mark.line + 1
        if self._depth >= MAX_DEPTH:
            raise _too_deep(line)
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        values, height = self._measured.get(node) or self._measure(node, event)
        if values > MAX_NODES:
            raise SpecError(f"the spec expands to more than {MAX_NODES:,} values (YAML aliases expanded); "
                            "a spec is far smaller: remove the aliases that multiply it", line=line)  # fmt: skip
        if self._depth + height > MAX_DEPTH:
            raise _too_deep(line)
        return node

    def _measure(self, node: yaml.Node, event: yaml.Event) -> tuple[int, int]:
        """(values, height) of a node just composed, from its children's (all measured already)."""
        if isinstance(event, yaml.AliasEvent):  # an alias to a node not measured yet: one still being composed
            raise SpecError(f"alias *{event.anchor} refers to a value that contains it", line=event.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        measured = [self._measured[child] for child in children]
        self._measured[node] = 1 + sum(values for values, _ in measured), 1 + max((height for _, height in measured), default=0)
        return self._measured[node]


_BASE60_PRECISION = 200
"""Digits kept when adding up a base-60 float: more than a spec number may have (38), so nothing is rounded unseen."""


def _exact_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Decimal:
    """A YAML float as the exact Decimal of its text: PyYAML's float would read 30.0000000000000000000000000001 as 30.

    YAML 1.1 floats also come as `1_000.5`, `.inf`, `-.Inf`, `.nan` and base 60 (`1:30.5`); a spec number that is
    not finite is refused later, where the field that holds it is known.
    """
    text = str(loader.construct_scalar(node)).replace("_", "").lower()
    sign, digits = ("-", text[1:]) if text.startswith("-") else ("", text.removeprefix("+"))
    if digits in (".inf", ".nan"):
        return Decimal(sign + digits[1:])
    if ":" not in digits:
        return Decimal(sign + digits)  # from the text: no arithmetic, so no rounding to a context's precision
    value = Decimal(0)
    with localcontext(prec=_BASE60_PRECISION):
        for part in digits.split(":"):  # base 60: 1:30.5 is 90.5
            value = value * 60 + Decimal(part)
    return value.copy_negate() if sign else value


_SpecLoader.add_constructor("tag:yaml.org,2002:float", _exact_float)


def _timestamp_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    """A YAML timestamp, or its text when it only looks like one (`2024-13-01`): PyYAML's constructor raises a bare
    ValueError there, which left the loader as an unexpected error; as text, the field that holds it says what is
    wrong with it, naming its path."""
    try:
        return loader.construct_yaml_timestamp(node)
    except ValueError:
        return str(loader.construct_scalar(node))


_SpecLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_or_text)


def _too_deep(line: int) -> SpecError:
    return SpecError(f"nested more than {MAX_DEPTH} levels deep; a spec needs far fewer", line=line)


class _DuplicateKey(SpecError):
    """A key given twice in one mapping (YAML and JSON parsers would silently keep the last)."""


def _lines(node: yaml.Node, path: Path_, out: dict[Path_, int]) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise _DuplicateKey(f"duplicate key {key!r}", path=format_path(path + (key,)), line=key_node.start_mark.line + 1)
            seen.add(key)
            out[path + (key,)] = key_node.start_mark.line + 1
            _lines(value_node, path + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for index, child in enumerate(node.value):
            _lines(child, path + (index,), out)


def _in_file(error: SpecError, file: str | None) -> SpecError:
    return type(error)(error.message, file, error.path, error.line)


def _parse_yaml(text: str, file: str | None) -> tuple[Any, dict[Path_, int]]:
    """Data and lines of a YAML document, composed once (bounded) and constructed from that node."""
    loader = None
    try:
        loader = _SpecLoader(text)  # reading the text already refuses characters YAML does not allow
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
    except SpecError as err:
        raise _in_file(err, file) from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        raise SpecError(f"not valid YAML: {err.problem or err.context}", file, line=mark.line + 1 if mark else None) from None
    except yaml.reader.ReaderError as err:  # a character YAML does not allow (control characters, ...): its code point
        line = text.count("\n", 0, err.position) + 1
        raise SpecError(f"not valid YAML: character U+{err.character:04X} is not allowed in a YAML file", file, line=line) from None
    except yaml.YAMLError as err:
        raise SpecError(f"not valid YAML: {err}", file) from None
    finally:
        if loader is not None:
            loader.dispose()
    lines: dict[Path_, int] = {}
    if node is not None:
        try:
            _lines(node, (), lines)
        except SpecError as err:
            raise _in_file(err, file) from None
    return data, lines


_JSON_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[][{}]')


def _parse_json(text: str, file: str | None) -> tuple[Any, dict[Path_, int]]:
    """Data of a JSON document, parsed as strict JSON; lines from the same text read as YAML (JSON is YAML)."""
    depth = 0
    for token in _JSON_BRACKETS.finditer(text):  # before json.loads, whose recursion would overflow first
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(token.group(), 0)
        if depth > MAX_DEPTH:
            raise _in_file(_too_deep(text.count("\n", 0, token.start()) + 1), file)
    duplicates: list[str] = []

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) < len(pairs):
            duplicates.extend(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
        return out

    try:
        data = json.loads(text, object_pairs_hook=unique_keys, parse_float=Decimal, parse_constant=Decimal)  # never a float
    except json.JSONDecodeError as err:
        raise SpecError(f"not valid JSON: {err.msg} (column {err.colno})", file, line=err.lineno) from None
    try:
        # Outside strings (where JSON allows no raw tab), a tab is only blank space: YAML wants spaces.
        _, lines = _parse_yaml(text.replace("\t", " "), file)
    except _DuplicateKey:
        raise  # with its line
    except SpecError:
        lines = {}  # a JSON subtlety that YAML reads otherwise: the data stand, only the lines are unknown
    if duplicates:
        raise SpecError(f"duplicate key {duplicates[0]!r}", file)
    return data, lines


def parse_document(text: str, file: str | None = None) -> tuple[Any, dict[Path_, int]]:
    """The data of a spec document and the line of every path in it: JSON for a `.json` file, else YAML."""
    if file is not None and file.lower().endswith(".json"):
        return _parse_json(text, file)
    return _parse_yaml(text, file)


def _line_for(path: Path_, lines: dict[Path_, int]) -> int | None:
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def _message(error: Any, path: Path_) -> str:
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        allowed = _keys_allowed(path[:-1])
        guess = did_you_mean(path[-1], allowed) if path else ""
        if guess:
            return f"unknown key (check the spelling: {guess})"
        listed = f"keys allowed here: {', '.join(sorted(allowed))}" if allowed else "see docs/SPEC.md for the keys allowed here"
        return f"unknown key (check the spelling; {listed})"
    if kind == "missing":
        return "required key is missing"
    if kind in _EXPECTED:  # a value of the wrong type: say what was given, in YAML's words (true, not True)
        return f"expected {_EXPECTED[kind]}, got {_shown(error.get('input'))}"
    if kind in ("enum", "literal_error"):  # "Input should be 'a', 'b' or 'c'"
        guess = did_you_mean(error.get("input"), re.findall(r"'([^']*)'", error.get("ctx", {}).get("expected", "")))
        return f"{message}; {guess}" if guess else message
    return message.removeprefix("Value error, ")


_EXPECTED = {
    "string_type": "a string", "decimal_type": "a number", "int_type": "an integer", "int_parsing": "an integer",
    "float_type": "a number", "float_parsing": "a number", "bool_type": "true/false", "bool_parsing": "true/false",
    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping", "list_type": "a list",
}  # fmt: skip
"""What a value of each pydantic type error's type would have been."""


def _union_message(errors: list[Any]) -> str:
    """One message for the errors pydantic gives at one field, one per member of a union the value is none of.

    A member that took the value's type but refused the value says why; otherwise the message lists what the field
    accepts (`expected a string, a number or true/false, got a list`).
    """
    for error in errors:
        if error["type"] not in _EXPECTED:
            return str(error["msg"]).removeprefix("Value error, ")
    kinds = list(dict.fromkeys(_EXPECTED[error["type"]] for error in errors))
    listed = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"
    return f"expected {listed}, got {_shown(errors[0].get('input'))}"


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):  # the loader reads YAML's numbers as Decimal: show them as written
        return str(value)
    return "nothing" if value is None else repr(value)


def _keys_allowed(path: Path_) -> set[str]:
    """The keys the spec's JSON Schema allows in the mapping at ``path`` (every alternative of a union)."""
    from .schema import json_schema

    schema = json_schema()
    defs = schema.get("$defs", {})

    def expand(node: Any) -> Iterator[dict]:
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            yield from expand(defs.get(node["$ref"].rsplit("/", 1)[-1]))
        for alternative in node.get("anyOf", []) + node.get("oneOf", []) + node.get("allOf", []):
            yield from expand(alternative)
        yield node

    nodes = [schema]
    for part in path:
        step = []
        for node in (n for start in nodes for n in expand(start)):
            if isinstance(part, int):
                step.append(node.get("items"))
            else:
                step.append(node.get("properties", {}).get(part, node.get("additionalProperties")))
        nodes = [n for n in step if isinstance(n, dict)]
    return {key for start in nodes for node in expand(start) for key in node.get("properties", {})}


def validate_data(data: Any, file: str | None = None, lines: dict[Path_, int] | None = None) -> MappingSpec:
    """Validate parsed data into a MappingSpec; shape errors and semantic checks both become SpecErrors."""
    lines = lines or {}
    if data is None:
        raise SpecError("the spec is empty; write source, target and entities (`ddb2bt init --list` shows starters)", file)
    if not isinstance(data, dict):
        raise SpecError("a spec is a mapping with source, target and entities", file, line=1)
    try:
        spec = MappingSpec.model_validate(data)
    except ValidationError as err:
        by_path: dict[Path_, list[Any]] = {}
        for error in err.errors():
            # pydantic appends union-member and validator names to loc; keep the real field path.
            path = tuple(part for part in error["loc"] if isinstance(part, int) or not _is_internal(part))
            by_path.setdefault(path, []).append(error)
        errors = [
            SpecError(_message(group[0], path) if len(group) == 1 else _union_message(group), file, format_path(path),
                      _line_for(path, lines))
            for path, group in by_path.items()
        ]  # fmt: skip
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
    file = str(path)
    raw = _read(path)
    try:
        text = raw.decode("utf-8-sig")  # an editor's byte-order mark is not an error
    except UnicodeDecodeError as err:
        line_start = raw.rfind(b"\n", 0, err.start) + 1
        raise SpecError(
            f"not UTF-8 text: byte 0x{raw[err.start]:02x} at column {err.start - line_start + 1}; save the spec as UTF-8",
            file, line=raw.count(b"\n", 0, err.start) + 1,
        ) from None  # fmt: skip
    data, lines = parse_document(text, file)
    return validate_data(data, file, lines)


def _read(path: Path) -> bytes:
    """The file's bytes, refused when it is a directory, unreadable, empty, or too large to be a spec."""
    if path.is_dir():
        raise SpecError("is a directory; give the spec file (.yaml, .yml or .json)", str(path))
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_SPEC_BYTES + 1)  # never more, whatever the file is (a device, a growing log)
    except OSError as err:
        raise SpecError(f"cannot read the spec: {err.strerror}", str(path)) from None
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(f"larger than {MAX_SPEC_BYTES // 1024**2} MiB: not a spec (one is a few kilobytes)", str(path))
    return raw
