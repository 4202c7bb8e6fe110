"""pipelines/dynamodb/_vouch.c, the compiled reading of the export check's expression (``VALUES_VALID``), against the
expression itself: True exactly where the expression matches the whole line and False exactly where it does not, for
generated change lines good and bad, compact or not, nested to the expression's depth and beyond, with bytes changed,
dropped or doubled, and for arbitrary bytes; None for a line that is no bytes object; and ``check_record``'s change or
refusal the same with the module and without it. It fails if the C reads one byte of the grammar otherwise."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from ddb2bt.mappers.changes import KINDS
from ddb2bt.pipelines.dynamodb import incremental_export
from ddb2bt.pipelines.dynamodb.incremental_export import VALUES_VALID
from tests.compiled import require_built

from .change_lines import EDIT_BYTES, VALUES, edited, line_of, outcome, records

compiled = incremental_export._compiled_vouch
compiled_check = incremental_export._compiled_check
needs_module = pytest.mark.skipif(compiled is None, reason="pipelines/dynamodb/_vouch.c not built (no C compiler)")

def expression(line: bytes) -> bool:
    return VALUES_VALID.fullmatch(line) is not None


def test_the_compiled_module_is_built_wherever_a_c_compiler_is():
    require_built(compiled, "pipelines/dynamodb/_vouch.c")
    require_built(compiled_check, "pipelines/dynamodb/_vouch.c")


@needs_module
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.booleans(), st.booleans(), st.data())
def test_the_expressions_answer_for_every_line(record, compact, ascii_only, data):
    line = edited(line_of(record, compact, ascii_only), data, 3)
    assert compiled(line) is expression(line)


ODD_TEXTS = ['', '\\"', 'a\\\\', '\\n', '\\\n', '\\', 'a"b', '\x00', '\n', '\\u00e9', 'é']
ODD_NUMBERS = ["0", "-0", "1.", ".5", "-.5", "-", ".", "-.", "", "1.2.3", "--1", "1-", "+1", "1e5", "00", "0.0",
               "1" * 38, "1" * 39, "-" + "1" * 37, "-" + "1" * 38, "." + "1" * 37, "." + "1" * 38, "1" * 37 + ".",
               "1" * 38 + "."]
ODD_BINARIES = ["", "QQ==", "QUI=", "QUJD", "QUJDRA==", "QUJDREU=", "Q", "QQ", "QQ=", "QUI", "QUI==", "QUJD=",
                "QUJD==", "Q===", "====", "=", "QUJ/+w==", "QU-D", "QUJDR", "QUJDRA=", "QUJDRAQ=="]


def odd_values() -> list[str]:
    """Values' JSON as DynamoDB writes it (compact), each payload at one of the grammar's edges."""
    values = [f'{{"S":"{text}"}}' for text in ODD_TEXTS]
    values += [f'{{"N":"{number}"}}' for number in ODD_NUMBERS] + [f'{{"NS":["1","{number}"]}}' for number in ODD_NUMBERS]
    values += [f'{{"B":"{data}"}}' for data in ODD_BINARIES] + [f'{{"BS":["{data}"]}}' for data in ODD_BINARIES]
    values += ['{"BOOL":true}', '{"BOOL":false}', '{"BOOL":null}', '{"BOOL":tru}', '{"NULL":true}', '{"NULL":false}',
               '{"SS":[]}', '{"NS":[]}', '{"BS":[]}', '{"SS":["a",]}', '{"SS":["a","b"]}', '{"SS":["a",1]}',
               '{"L":[]}', '{"L":[{"S":"a"},]}', '{"L":[{"S":"a"},{"N":"1"}]}', '{"L":[{"S":"a"}{"N":"1"}]}',
               '{"M":{}}', '{"M":{"a":{"S":"b"},}}', '{"M":{"a":{"S":"b"},"c":{"NULL":true}}}', '{"M":{"a":1}}',
               '{"S":"a","N":"1"}', '{"S":"a"', '{"S":"a"}}', '{}', '{"X":"a"}', '{"s":"a"}', '{"SS":"a"}',
               '{"L":{}}', '{"M":[]}', '{"N":1}', '{"S":1}']
    for kinds in itertools.chain.from_iterable(itertools.product("ML", repeat=depth) for depth in range(1, 5)):
        nested = '{"S":"x"}'  # the expression reads three levels of M and L under an attribute, no more
        for kind in kinds:
            nested = f'{{"L":[{nested}]}}' if kind == "L" else f'{{"M":{{"k":{nested}}}}}'
        values.append(nested)
    return values


def odd_lines() -> list[bytes]:
    meta = '"Metadata":{"WriteTimestampMicros":{"N":"1714564800000000"}}'
    lines = []
    for value in odd_values():
        lines.append(f'{{{meta},"Keys":{{"pk":{value}}},"NewImage":{{"pk":{value}}}}}')
        lines.append(f'{{"Keys":{{"pk":{{"S":"a"}}}},"OldImage":{{"pk":{{"S":"a"}},"v":{value}}},"NewImage":null}}')
    lines += ['{}', '{,}', '', '{"Keys":{}}', '{"Keys":{},}', '{"Keys":{}}\n', ' {"Keys":{}}', '{"Keys":{}} ',
              '{"Keys":{}}}', '{"Keys":{},"Keys":{}}', '{"OldImage":null}', '{"NewImage":nul}', '{"Other":{}}',
              '{"Metadata":{"WriteTimestampMicros":{"N":""}}}', '{"Metadata":{"WriteTimestampMicros":{"N":"1.5"}}}',
              '{"Metadata":{"WriteTimestampMicros":{"N":"15"}}}', '{"Metadata":{"WriteTimestampMicros":{"N":"15"}}',
              '{"Metadata":{"WriteTimestampMicros":{"N":"15"},"X":1}}', '{"Keys":{"a":{"S":"b"}}', '{"Keys"']
    return [line.encode() for line in lines]


@needs_module
@pytest.mark.parametrize("line", odd_lines())
def test_the_expressions_answer_at_the_grammars_edges(line):
    assert compiled(line) is expression(line)
    for cut in range(len(line)):  # every prefix: the line's end met wherever a reader stands
        assert compiled(line[:cut]) is expression(line[:cut])


@needs_module
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=80) | st.lists(st.sampled_from(EDIT_BYTES), max_size=60).map(bytes))
@example(b'{"Keys":{"a":{"S":"\\\n"}}}')
def test_the_expressions_answer_for_any_bytes(line):
    assert compiled(line) is expression(line)


@needs_module
def test_a_line_that_is_no_bytes_object_is_left_to_python():
    line = b'{"Keys":{"pk":{"S":"a"}}}'
    assert compiled(line) is True
    for other in (bytearray(line), memoryview(line), line.decode(), None, 1):
        assert compiled(other) is None
    assert incremental_export._expression_vouches(line.decode()) is None
    assert compiled(type("Line", (bytes,), {})(line)) is True  # a subclass holds the same bytes


def any_outcome(record: Any, key_names: Any, line: Any) -> tuple:
    try:
        return outcome(record, key_names, line)
    except Exception as err:  # noqa: BLE001 - what a meddling value makes the check raise is the outcome compared
        return ("raised", type(err).__name__, str(err))


def python_outcome(record: Any, key_names: Any, line: Any) -> tuple:
    """check_record's outcome with neither compiled function: the expression and the Python checks."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(incremental_export, "_vouched", incremental_export._expression_vouches)
        patch.setattr(incremental_export, "_compiled_check", None)
        return any_outcome(record, key_names, line)


def plain(record: Any) -> bool:
    """A record as the line's parser gives it, of the forms checked_change takes itself (exact dicts, a timestamp of
    at most 18 digits); anything else is Python's to answer."""
    micros = record.get("Metadata", {}).get("WriteTimestampMicros", {}) if type(record) is dict else None
    text = micros.get("N") if type(micros) is dict else None
    return type(text) is str and 0 < len(text) <= 18 and type(record.get("Keys")) is dict and all(
        type(record.get(part)) is dict for part in ("OldImage", "NewImage") if record.get(part) is not None)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), records(), st.booleans(), st.data(), st.sampled_from([(), ("pk",), ("pk", "sk")]))
def test_check_record_gives_the_same_change_or_refusal_with_the_module_and_without(record, other, ascii_only, data,
                                                                                  key_names):
    """And the compiled check answers every record the Python check passes with a line the expression matches (the
    fast path is taken), and None for every record it refuses; also where the line is another record's."""
    line = edited(line_of(other if data.draw(st.integers(0, 9)) == 0 else record, True, ascii_only), data, 1)
    try:
        parsed = json.loads(line)
    except ValueError:
        parsed = record
    reference = python_outcome(parsed, key_names, line)
    assert outcome(parsed, key_names, line) == reference
    if compiled_check is None:
        return
    fields = compiled_check(parsed, key_names, line, KINDS)
    if reference[0] == "refused":
        assert fields is None
    elif expression(line) and plain(parsed):
        assert fields is not None and fields == tuple(reference[1]) and fields[0] is parsed["Keys"]
    else:
        assert fields is None or fields == tuple(reference[1])


class Odd(dict):
    pass


class Meddling:
    """A value whose comparison empties the record and the keys it is compared within (a record no parser makes,
    which check_record must still answer without a crash)."""

    def __init__(self, record: dict) -> None:
        self.record = record

    def __ne__(self, other: object) -> bool:
        keys = self.record.get("Keys")
        self.record.clear()
        if isinstance(keys, dict):
            keys.clear()
        return False

    __hash__ = None  # type: ignore[assignment]


def odd_records() -> list[tuple[Any, bytes]]:
    line = (b'{"Metadata":{"WriteTimestampMicros":{"N":"1714564800000000"}},"Keys":{"pk":{"S":"a"}},'
            b'"OldImage":{"pk":{"S":"a"},"v":{"N":"1"}},"NewImage":{"pk":{"S":"a"},"v":{"N":"2"}}}')
    base = json.loads(line)
    cases: list[tuple[Any, bytes]] = [(base, line), (json.loads(line), bytearray(line)), ([], line), (None, line)]

    def with_(change: Any) -> dict:
        record = json.loads(line)
        change(record)
        return record

    cases += [(with_(change), line) for change in [
        lambda r: r.__setitem__("Metadata", Odd(r["Metadata"])),
        lambda r: r["Metadata"].__setitem__("WriteTimestampMicros", 1714564800000000),
        lambda r: r["Metadata"].__setitem__("WriteTimestampMicros", {"N": 1714564800000000}),
        lambda r: r["Metadata"].__setitem__("WriteTimestampMicros", {"N": True}),
        lambda r: r["Metadata"].__setitem__("WriteTimestampMicros", {"N": "9" * 18}),
        lambda r: r["Metadata"].__setitem__("WriteTimestampMicros", {"N": "9" * 19}),
        lambda r: r["Metadata"].__setitem__("WriteTimestampMicros", {"N": "9" * 5000}),
        lambda r: r["Metadata"].__setitem__("WriteTimestampMicros", {"N": "0" * 18}),
        lambda r: r["Metadata"].__setitem__("WriteTimestampMicros", {"N": ""}),
        lambda r: r["Metadata"].__setitem__("WriteTimestampMicros", {"N": "١٢"}),
        lambda r: r["Metadata"].__setitem__("WriteTimestampMicros", {"N": "\ud800"}),
        lambda r: r["Metadata"].__setitem__("WriteTimestampMicros", None),
        lambda r: r.__setitem__("Metadata", None),
        lambda r: r.pop("Metadata"),
        lambda r: r.__setitem__("Keys", {}),
        lambda r: r.__setitem__("Keys", Odd(r["Keys"])),
        lambda r: r.__setitem__("Keys", None),
        lambda r: r["Keys"].__setitem__(1, {"S": "a"}),
        lambda r: r.__setitem__("OldImage", None),
        lambda r: r.__setitem__("NewImage", None),
        lambda r: (r.__setitem__("NewImage", None), r.__setitem__("OldImage", None)),
        lambda r: r.pop("OldImage"),
        lambda r: r.pop("NewImage"),
        lambda r: r.__setitem__("OldImage", Odd(r["OldImage"])),
        lambda r: r.__setitem__("NewImage", []),
        lambda r: r["NewImage"].__setitem__("pk", {"S": "b"}),
        lambda r: r["NewImage"].__setitem__("pk", None),
        lambda r: r["OldImage"].pop("pk"),
        lambda r: r["Keys"].__setitem__("pk", float("nan")),
        lambda r: r["Keys"].__setitem__("pk", Meddling(r)),
        lambda r: r["OldImage"].__setitem__("pk", Meddling(r)),
    ]]
    return cases


@needs_module
@pytest.mark.parametrize("case", range(len(odd_records())))
@pytest.mark.parametrize("key_names", [(), ("pk",), ("pk", "sk"), ["pk"], (1,)])
def test_the_compiled_check_answers_odd_records_as_python_does_or_leaves_them_to_it(case, key_names):
    record, line = odd_records()[case]
    fields = compiled_check(record, key_names, line, KINDS)
    record, line = odd_records()[case]  # afresh: a Meddling value changed the first
    reference = python_outcome(record, key_names, line)
    assert fields is None or (reference[0] == "change" and fields == tuple(reference[1]))
    record, line = odd_records()[case]
    assert any_outcome(record, key_names, line) == reference


@needs_module
def test_the_compiled_check_takes_only_its_arguments():
    with pytest.raises(TypeError):
        compiled_check({}, (), b"")
    assert compiled_check({}, (), b"{}", ("INSERT", "MODIFY")) is None


@needs_module
@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_a_value_alone_as_an_attribute(value):
    line = json.dumps({"Keys": {"pk": value}}, separators=(",", ":")).encode()
    assert compiled(line) is expression(line)
