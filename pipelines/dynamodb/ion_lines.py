"""Lines of a DynamoDB export in Amazon Ion (``ExportFormat=ION``), read into the wire format the JSON lines give.

DynamoDB's Developer Guide ("DynamoDB table export output format", Amazon Ion) maps its types to Ion's: S string,
N decimal, B blob, BOOL bool, NULL null, SS/NS/BS a list annotated ``$dynamodb_SS``/``$dynamodb_NS``/
``$dynamodb_BS``, L list, M struct; one line per record, each starting with the Ion version marker
(``$ion_1_0 {Item:{...}}``). A record here becomes exactly what its DYNAMODB_JSON line would be (``{"Item":
{"Id": {"N": "103"}}}``; an incremental export's ``Metadata``, ``Keys``, ``OldImage``, ``NewImage`` alike), so every
reader after this one line is shared with the JSON exports.

Exact, or refused: a decimal becomes DynamoDB's number text (38 significant digits at most, as DynamoDB stores it:
``6d2`` is ``"600"``), never a float; a blob becomes base64 text, as in DynamoDB JSON. An Ion value DynamoDB never
writes (a float, a timestamp, a symbol, a clob, an s-expression, an unknown annotation) is a ValueError naming
the attribute, which the export reader reports with the file and line.
"""

from __future__ import annotations

import base64
from typing import Any

from amazon.ion import simpleion
from amazon.ion.core import IonType
from amazon.ion.simple_types import IonPyNull

from ...mappers import attrvalue
from ...mappers.numbers import DecimalError

VERSION_MARKER = b"$ion_1_0"
_TEXT_BUFFER = 4096
"""amazon.ion's own text buffer size, the least a line is read with."""
_SETS = {"$dynamodb_SS": "SS", "$dynamodb_NS": "NS", "$dynamodb_BS": "BS"}


def is_ion(line: bytes) -> bool:
    """Whether an export line is Ion text (it starts with the version marker) rather than JSON."""
    return line.lstrip().startswith(VERSION_MARKER)


def loads(line: bytes) -> dict[str, Any]:
    """One Ion export line as the record its DynamoDB JSON line would be: each top-level struct's fields as values."""
    try:
        # amazon.ion's C reader holds a text value (a string, a blob's base64, a field name) in a buffer of 4 KB by
        # default and refuses a bigger one; DynamoDB's 400 KB items hold bigger ones, and none is longer than its line
        record = simpleion.loads(line.decode("utf-8"), single_value=True,
                                 text_buffer_size_limit=max(len(line), _TEXT_BUFFER))
    except UnicodeDecodeError as err:
        raise ValueError(f"not UTF-8 text: {err}") from None
    except Exception as err:  # amazon.ion raises IonException and bare ValueErrors for text it cannot read
        raise ValueError(f"not Ion text: {err}") from None
    if getattr(record, "ion_type", None) is not IonType.STRUCT:
        raise ValueError(f"the line holds an Ion {_kind(record)}, not a struct")
    out: dict[str, Any] = {}
    for name, part in record.items():
        if getattr(part, "ion_type", None) is not IonType.STRUCT:
            raise ValueError(f"{name} is an Ion {_kind(part)}, not a struct of attributes")
        out[name] = {attr: attribute_value(value, f"{name}.{attr}") for attr, value in part.items()}
    return out


def attribute_value(value: Any, where: str) -> dict[str, Any]:
    """One Ion value as a DynamoDB AttributeValue in wire format (``{"N": "600"}``, ``{"B": "<base64>"}``)."""
    kind = getattr(value, "ion_type", None)
    annotations = [token.text for token in getattr(value, "ion_annotations", ())]
    if annotations:
        set_type = _SETS.get(annotations[0]) if len(annotations) == 1 else None
        if set_type is None or kind is not IonType.LIST:
            raise ValueError(f"{where} is annotated {'::'.join(annotations)}, which DynamoDB does not write "
                             f"(sets are lists annotated {', '.join(_SETS)})")
        return {set_type: [_set_member(set_type, member, f"{where}[{at}]") for at, member in enumerate(value)]}
    if value is None or isinstance(value, IonPyNull):  # null, and typed nulls (null.string, ...) alike
        return {"NULL": True}
    if kind is IonType.STRING:
        return {"S": str(value)}
    if kind is IonType.BOOL:
        return {"BOOL": bool(value)}
    if kind in (IonType.DECIMAL, IonType.INT):
        return {"N": number_text(value, where)}
    if kind is IonType.BLOB:
        return {"B": base64.b64encode(bytes(value)).decode("ascii")}
    if kind is IonType.LIST:
        return {"L": [attribute_value(member, f"{where}[{at}]") for at, member in enumerate(value)]}
    if kind is IonType.STRUCT:
        return {"M": {name: attribute_value(member, f"{where}.{name}") for name, member in value.items()}}
    raise ValueError(f"{where} is an Ion {_kind(value)}, which is no DynamoDB type "
                     "(S string, N decimal, B blob, BOOL, NULL, sets, L list, M struct)")


def _set_member(set_type: str, member: Any, where: str) -> Any:
    value = attribute_value(member, where)
    wanted = set_type[0]
    if wanted not in value:
        raise ValueError(f"{where} is {next(iter(value))} in a {set_type} set")
    return value[wanted]


def number_text(value: Any, where: str) -> str:
    """An Ion decimal or int as DynamoDB's number text, exact; ValueError beyond DynamoDB's 38 digits or range."""
    try:
        return attrvalue.number_text(str(value))  # str() of an Ion decimal or int is its exact Python text
    except DecimalError as err:
        raise ValueError(f"{where}: {err}") from None


def _kind(value: Any) -> str:
    kind = getattr(value, "ion_type", None)
    return kind.name.lower() if kind is not None else type(value).__name__
