"""Generated incremental export lines for the export check's tests (tests/pipelines/test_incremental_check_fast_path.py,
test_vouch_compiled.py): records good and bad, their lines compact or not, and a check's outcome (the change or the
refusal) to compare."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import strategies as st

from ddb2bt.mappers.changes import Change
from ddb2bt.pipelines.dynamodb.incremental_export import RecordError, check_record, parse_record

DIGITS = st.text("0123456789", min_size=1, max_size=45)
NUMBERS = st.one_of(
    st.builds(lambda sign, whole, frac: sign + whole + frac, st.sampled_from(["", "-"]), DIGITS,
              st.sampled_from(["", "."]) | st.text("0123456789", max_size=12).map(lambda f: "." + f)),
    st.builds(lambda whole: "." + whole, DIGITS),
    st.sampled_from(["-", ".", "", "1e5", "1E-130", "1e400", "+1", "0x10", " 1", "1 ", "NaN", "-.", "00", "1.2.3",
                     "١٢", "9" * 38, "9" * 39, "0." + "0" * 37 + "1"]),
    st.integers(), st.floats(allow_nan=False), st.none(), st.booleans())
BINARIES = st.one_of(
    st.binary(max_size=12).map(lambda data: base64.b64encode(data).decode()),
    st.binary(min_size=1, max_size=12).map(lambda data: base64.b64encode(data).decode().rstrip("=")),
    st.sampled_from(["", "YR==", "=", "YQ==YQ==", "Y Q==", "YQ=", "Y===", "YQ\n==", "not base64!", "AP8A/g=="]),
    st.text(max_size=8), st.integers(), st.none())
TEXTS = st.one_of(st.text(max_size=8), st.sampled_from(['"', "\\", "\\u0041", "é", "\u2028", "\\ud800"]))
TAGS = st.sampled_from(["S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS", "M", "L", "Oops", "s", ""])


def scalars() -> st.SearchStrategy[Any]:
    payloads = {
        "S": st.one_of(TEXTS, st.integers(), st.none()),
        "N": NUMBERS,
        "B": BINARIES,
        "BOOL": st.one_of(st.booleans(), st.sampled_from([0, 1, "true", None])),
        "NULL": st.one_of(st.just(True), st.sampled_from([False, None, 1, "true"])),
        "SS": st.lists(st.one_of(TEXTS, st.integers()), max_size=3) | TEXTS,
        "NS": st.lists(NUMBERS, max_size=3) | NUMBERS,
        "BS": st.lists(BINARIES, max_size=3) | BINARIES,
    }
    tagged = st.one_of(*(payload.map(lambda value, tag=tag: {tag: value}) for tag, payload in payloads.items()))
    odd = st.one_of(st.builds(lambda tag, value: {tag: value}, st.sampled_from(["Oops", "s", ""]), TEXTS),
                    st.just({}), st.just({"S": "a", "N": "1"}), TEXTS, st.integers(), st.none(), st.lists(TEXTS))
    return st.one_of(tagged, tagged, tagged, odd)


GOOD_NUMBERS = st.one_of(st.integers().map(str), st.decimals(allow_nan=False, allow_infinity=False).map(str),
                        st.sampled_from(["1.", ".5", "-0", "9" * 38, "9" * 39, "1E+5", "0." + "0" * 37 + "1"]))
GOOD_BINARIES = st.binary(max_size=12).map(lambda data: base64.b64encode(data).decode())
GOOD_VALUES = st.recursive(
    st.one_of(TEXTS.map(lambda text: {"S": text}), GOOD_NUMBERS.map(lambda number: {"N": number}),
              GOOD_BINARIES.map(lambda data: {"B": data}), st.booleans().map(lambda flag: {"BOOL": flag}),
              st.just({"NULL": True}), st.lists(TEXTS, min_size=1, max_size=3).map(lambda texts: {"SS": texts}),
              st.lists(GOOD_NUMBERS, min_size=1, max_size=3).map(lambda numbers: {"NS": numbers}),
              st.lists(GOOD_BINARIES, min_size=1, max_size=3).map(lambda data: {"BS": data})),
    lambda inner: st.one_of(st.dictionaries(TEXTS, inner, max_size=3).map(lambda members: {"M": members}),
                            st.lists(inner, max_size=3).map(lambda elements: {"L": elements})),
    max_leaves=10)
"""Valid DynamoDB values only, nested up to several levels: most generated lines are changes, the fast path's case."""

ANY_VALUES = st.recursive(
    scalars(),
    lambda inner: st.one_of(st.dictionaries(TEXTS, inner, max_size=3).map(lambda members: {"M": members}),
                            st.lists(inner, max_size=3).map(lambda elements: {"L": elements}),
                            st.lists(inner, max_size=2).map(lambda elements: {"M": elements})),
    max_leaves=12)
VALUES = st.one_of(GOOD_VALUES, GOOD_VALUES, GOOD_VALUES, ANY_VALUES)
"""DynamoDB values, valid and not, nested up to several levels (deeper than the expression reads)."""

NAMES = st.sampled_from(["pk", "sk", "a", "b", "ü", 'q"t', "x\\y"])


@st.composite
def records(draw: Any) -> dict[str, Any]:
    keys = {"pk": draw(st.one_of(st.just({"S": "k"}), VALUES))}
    if draw(st.booleans()):
        keys["sk"] = draw(st.one_of(st.just({"N": "1"}), GOOD_VALUES))
    record: dict[str, Any] = {}
    fields = ["Metadata", "Keys", "OldImage", "NewImage"]
    for field in draw(st.permutations(fields)):
        if field == "Metadata":
            if draw(st.integers(0, 9)) < 9:  # (hypothesis draws small numbers most: the usual record is drawn most)
                micros = draw(st.sampled_from(["1.5", "x", ""])) if draw(st.integers(0, 9)) == 9 else "1714564800000000"
                record[field] = {"WriteTimestampMicros": {"N": micros}}
        elif field == "Keys":
            if draw(st.integers(0, 9)) < 9:
                record[field] = keys
        else:
            kind = draw(st.integers(0, 9))
            if kind == 9:
                continue
            if kind == 8:
                record[field] = draw(st.sampled_from([None, [], "x"]))
                continue
            image = dict(keys) if draw(st.integers(0, 9)) < 9 else {"pk": {"S": "other"}}
            image.update(draw(st.dictionaries(NAMES, VALUES, max_size=4)))
            record[field] = image
    return record


def line_of(record: dict[str, Any], compact: bool, ascii_only: bool) -> bytes:
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(record, separators=separators, ensure_ascii=ascii_only).encode()


def outcome(record: Any, key_names: tuple[str, ...], line: bytes | None) -> tuple:
    try:
        change = check_record(record, key_names, line)
        assert change.__class__ is Change and change == parse_record(record)  # what the read parses, field for field
        return ("change", change)
    except (RecordError, KeyError, TypeError, ValueError) as err:
        return ("refused", type(err).__name__, str(err))


EDIT_BYTES = list(b'{}[]",:\\0123456789=+/ SNBML.-etaruglOIKdwm\n\r\t\x00\xff')


def edited(line: bytes, data: Any, times: int) -> bytes:
    """``line`` with up to ``times`` bytes replaced, dropped, doubled or inserted."""
    for _ in range(data.draw(st.integers(0, times))):
        if not line:
            break
        at = data.draw(st.integers(0, len(line) - 1))
        byte = bytes([data.draw(st.sampled_from(EDIT_BYTES))])
        edit = data.draw(st.sampled_from(["replace", "drop", "double", "insert"]))
        line = line[:at] + {"replace": byte, "drop": b"", "double": line[at:at + 1] * 2,
                            "insert": byte + line[at:at + 1]}[edit] + line[at + 1:]
    return line
