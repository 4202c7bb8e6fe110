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

from ddb2bt.pipelines.dynamodb import incremental_export
from ddb2bt.pipelines.dynamodb.incremental_export import VALUES_VALID
from tests.compiled import require_built

from .change_lines import VALUES, line_of, outcome, records

compiled = incremental_export._compiled_vouch
needs_module = pytest.mark.skipif(compiled is None, reason="pipelines/dynamodb/_vouch.c not built (no C compiler)")

EDIT_BYTES = list(b'{}[]",:\\0123456789=+/ SNBML.-etaruglOIKdwm\n\r\t\x00\xff')


def expression(line: bytes) -> bool:
    return VALUES_VALID.fullmatch(line) is not None


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


def test_the_compiled_module_is_built_wherever_a_c_compiler_is():
    require_built(compiled, "pipelines/dynamodb/_vouch.c")


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


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.booleans(), st.data(), st.sampled_from([(), ("pk",)]))
def test_check_record_gives_the_same_change_or_refusal_with_the_module_and_without(record, ascii_only, data,
                                                                                  key_names):
    line = edited(line_of(record, True, ascii_only), data, 1)
    try:
        parsed = json.loads(line)
    except ValueError:
        return
    with_module = outcome(parsed, key_names, line)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(incremental_export, "_vouched", incremental_export._expression_vouches)
        assert outcome(parsed, key_names, line) == with_module


@needs_module
@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_a_value_alone_as_an_attribute(value):
    line = json.dumps({"Keys": {"pk": value}}, separators=(",", ":")).encode()
    assert compiled(line) is expression(line)
