"""The incremental export check's fast path (``VALUES_VALID``, one regular expression over the raw line) gives exactly
what the general check gives (every value of Keys and the images visited by ``is_value``/``value_problem``): the same
change, or the same refusal naming the same field, for generated lines good and bad, compact or not, nested deeper
than the expression reads; and a line it matches has only valid values. The general check is the reference: it is
the check of every line the expression does not match (and of every Ion line)."""

from __future__ import annotations

import base64
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ddb2bt.mappers.attrvalue import is_value
from ddb2bt.mappers.changes import Change
from ddb2bt.pipelines.dynamodb.export import ExportError
from ddb2bt.pipelines.dynamodb.incremental_export import (VALUES_VALID, RecordError, check_export, check_record,
                                                          parse_record, read_incremental_manifest)

from .documented_exports import DOCUMENTED, EXPORTS, INC2

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


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.booleans(), st.booleans(), st.sampled_from([(), ("pk",), ("pk", "sk")]))
def test_the_fast_path_gives_the_general_checks_change_or_refusal(record, compact, ascii_only, key_names):
    line = line_of(record, compact, ascii_only)
    parsed = json.loads(line)
    assert outcome(parsed, key_names, line) == outcome(parsed, key_names, None)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.booleans(), st.data())
def test_a_line_the_expression_matches_holds_only_valid_values_whatever_its_bytes(record, ascii_only, data):
    """Also over lines with one byte changed, dropped or doubled: what still parses as JSON is judged as the general
    check judges it, and a matched line holds no value ``is_value`` refuses."""
    line = line_of(record, True, ascii_only)
    if line and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(line) - 1))
        edit = data.draw(st.sampled_from(["replace", "drop", "double"]))
        byte = bytes([data.draw(st.sampled_from(list(b'{}[]",:\\0123456789=+/ SNBML.-etaru')))])
        line = line[:at] + (byte if edit == "replace" else line[at:at + 1] * 2 if edit == "double" else b"") \
            + line[at + 1:]
    try:
        parsed = json.loads(line)
    except ValueError:
        return
    if VALUES_VALID.fullmatch(line) is not None:
        for part in ("Keys", "OldImage", "NewImage"):
            attributes = parsed.get(part)
            assert attributes is None or all(map(is_value, attributes.values()))
    assert outcome(parsed, ("pk",), line) == outcome(parsed, ("pk",), None)


def test_the_expression_reads_real_lines_and_leaves_the_rest_to_the_general_check():
    """It is the fast path for the lines DynamoDB writes (compact JSON): every change line of the documented exports
    but the one whose N has 39 characters (plain decimals of at most 38 are the number check's own fast test)."""
    lines = [line for path in sorted((DOCUMENTED / EXPORTS / "data").glob("*.json.gz"))
             for line in gzip.decompress(path.read_bytes()).splitlines() if line.strip()]
    matched = [line for line in lines if VALUES_VALID.fullmatch(line)]
    assert len(lines) == 9 and len(matched) == 8
    assert all(b'"1234567890123456789012345678.9012345678"' in line for line in lines if line not in matched)
    nested = {"Metadata": {"WriteTimestampMicros": {"N": "1"}}, "Keys": {"pk": {"S": "a"}},
              "NewImage": {"pk": {"S": "a"}, "m": {"M": {"l": {"L": [{"M": {"x": {"NS": ["1", "-.5"]}}}]}}}}}
    assert VALUES_VALID.fullmatch(line_of(nested, True, True))
    assert not VALUES_VALID.fullmatch(line_of(nested, False, True))  # spaces: the general check
    nested["NewImage"]["m"] = {"L": [nested["NewImage"]["m"]]}  # five levels: the general check
    assert not VALUES_VALID.fullmatch(line_of(nested, True, True))


BAD_VALUES = {
    "number out of range": ({"N": "1e400"}, 'NewImage.Title: "1e400" is not a valid N value'),
    "unpadded base64": ({"B": "YQ"}, 'NewImage.Title: "YQ" is not a valid B value'),
    "empty set": ({"SS": []}, "NewImage.Title: [] is not a valid SS value"),
    "nested unknown tag": ({"M": {"a": {"L": [{"S": "ok"}, {"Oops": 1}]}}},
                           "NewImage.Title.a[1]: unknown DynamoDB type 'Oops'"),
}


@pytest.mark.parametrize("kind", list(BAD_VALUES))
def test_a_compact_line_with_a_bad_value_refuses_the_export_naming_file_line_and_field(tmp_path, kind):
    """The lines AWS writes are compact, the fast path's lines: a bad value there is still found, and named."""
    bucket = shutil.copytree(DOCUMENTED, tmp_path / "bucket")
    export_dir = Path(bucket) / EXPORTS / INC2
    manifest = read_incremental_manifest(str(export_dir))
    data_file = manifest.files[0].path
    lines = gzip.decompress(Path(data_file).read_bytes()).decode().splitlines()
    record = json.loads(lines[3])
    record["NewImage"]["Title"], message = BAD_VALUES[kind]
    lines[3] = json.dumps(record, separators=(",", ":"))
    Path(data_file).write_bytes(gzip.compress("".join(line + "\n" for line in lines).encode()))
    with pytest.raises(ExportError) as refused:
        check_export(manifest, ("pk", "sk"), keep="fast-path-test")
    assert str(refused.value).startswith(f"{data_file} line 4 is not a change record: {message}")
