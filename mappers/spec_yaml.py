"""Write spec data as YAML a person can read: block style, short mappings inline, comments kept.

PyYAML drops comments, so this small emitter writes the layout itself and uses PyYAML only for
scalars (quoting). `yaml.safe_load(render_yaml(data))` gives `data` back; a test holds it to that.
"""

from __future__ import annotations

import textwrap
from typing import Any

import yaml

Path = tuple[str | int, ...]
INLINE_WIDTH = 100
COMMENT_WIDTH = 100


def scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    if text.startswith("'") and isinstance(value, str) and not any(c in value for c in '"\\') and value.isprintable():
        return f'"{value}"'  # templates read better as "{sk|strip_prefix('Payment-')}" than with doubled quotes
    return text


def _inline(value: Any) -> str | None:
    """One-line flow text for a mapping of scalars (or a list of scalars), when short enough."""
    if isinstance(value, dict) and all(not isinstance(v, (dict, list)) for v in value.values()):
        text = "{" + ", ".join(f"{scalar(k)}: {scalar(v)}" for k, v in value.items()) + "}"
    elif isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        text = "[" + ", ".join(scalar(v) for v in value) + "]"
    else:
        return None
    return text if len(text) <= INLINE_WIDTH else None


def _comment(lines: list[str], text: str | None, indent: str) -> None:
    for paragraph in (text or "").splitlines():
        for line in textwrap.wrap(paragraph, width=COMMENT_WIDTH - len(indent)) or [""]:
            lines.append(f"{indent}# {line}")


def _emit(value: Any, path: Path, indent: str, comments: dict[Path, str], lines: list[str]) -> None:
    if isinstance(value, dict):
        for key, child in value.items():
            child_path = path + (key,)
            _comment(lines, comments.get(child_path), indent)
            inline = None if isinstance(child, (dict, list)) and child and _has_comments(child_path, comments) else _inline(child)
            if not isinstance(child, (dict, list)):
                lines.append(f"{indent}{scalar(key)}: {scalar(child)}")
            elif inline is not None:
                lines.append(f"{indent}{scalar(key)}: {inline}")
            else:
                lines.append(f"{indent}{scalar(key)}:")
                _emit(child, child_path, indent + "  ", comments, lines)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            child_path = path + (index,)
            _comment(lines, comments.get(child_path), indent)
            inline = None if _has_comments(child_path, comments, strict=True) else _inline(child)
            if inline is not None or not isinstance(child, (dict, list)):
                lines.append(f"{indent}- {inline if inline is not None else scalar(child)}")
                continue
            sub: list[str] = []
            _emit(child, child_path, indent + "  ", comments, sub)
            first = sub.index(next(line for line in sub if not line.lstrip().startswith("#")))
            lines.extend(sub[:first])
            lines.append(f"{indent}- {sub[first].lstrip()}")
            lines.extend(sub[first + 1 :])


def _has_comments(path: Path, comments: dict[Path, str], strict: bool = False) -> bool:
    return any(p[: len(path)] == path and (len(p) > len(path) or not strict) for p in comments if p != path)


def render_yaml(data: dict[str, Any], comments: dict[Path, str] | None = None, header: list[str] | None = None) -> str:
    lines: list[str] = []
    for line in header or ():
        _comment(lines, line, "")
    _emit(data, (), "", comments or {}, lines)
    return "\n".join(lines) + "\n"
