"""A full export's items checked in the run (``export.checked_item``): the compiled grammar ``_vouch.item_valid`` reads
``{"Item":{...}}`` exactly as the export check's expression (``VALUES_VALID``) reads the same attributes under
``"Keys"``, and the run's answer (the item, or Damaged with the attribute and what is wrong, in ``item_problem``'s
words) is the same with the module and without it, for generated items good and bad, compact or not, lines edited."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from ddb2bt.mappers.attrvalue import item_problem
from ddb2bt.pipelines.dynamodb import export
from ddb2bt.pipelines.dynamodb.incremental_export import VALUES_VALID
from ddb2bt.pipelines.run.batches import Batch
from tests.compiled import require_built

from .change_lines import NAMES, VALUES, edited

compiled = export._compiled_item_valid
needs_module = pytest.mark.skipif(compiled is None, reason="pipelines/dynamodb/_vouch.c not built (no C compiler)")
ITEMS = st.dictionaries(NAMES, VALUES, max_size=4)


def test_the_compiled_check_is_built_wherever_a_c_compiler_is():
    require_built(compiled, "pipelines/dynamodb/_vouch.c")


def line_of(item: Any, compact: bool, ascii_only: bool) -> bytes:
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps({"Item": item}, separators=separators, ensure_ascii=ascii_only).encode()


def answer(line: bytes) -> tuple:
    """The run's answer for one line: the item, Damaged's problem, or the error that makes the line no export item."""
    try:
        found = export.checked_item(json.loads(line), line)
    except (ValueError, KeyError, TypeError) as err:
        return ("refused", type(err).__name__, str(err))
    return ("damaged", found.item, found.problem) if isinstance(found, export.Damaged) else ("item", found)


@needs_module
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ITEMS, st.booleans(), st.booleans(), st.data())
@example({"a": {"SS": "abc"}}, True, True, None)
@example({"a": {"BOOL": "yes"}}, True, True, None)
@example({"a": {"L": [{"NULL": False}]}}, True, True, None)
def test_the_grammar_reads_an_item_line_as_the_expression_reads_its_attributes(item, compact, ascii_only, data):
    line = line_of(item, compact, ascii_only)
    if data is not None:
        line = edited(line, data, 3)
    attributes = line[len(b'{"Item":'):-1] if line.startswith(b'{"Item":') and line.endswith(b"}") else None
    expected = attributes is not None and VALUES_VALID.fullmatch(b'{"Keys":' + attributes + b"}") is not None
    assert compiled(line) is expected
    if expected:  # where it vouches for a line that parses (the run parses it first), Python finds nothing wrong
        try:
            parsed = json.loads(line)
        except ValueError:
            return
        assert item_problem(parsed["Item"]) is None


@needs_module
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ITEMS, st.booleans(), st.booleans(), st.data())
def test_the_run_answers_the_same_with_the_module_and_without(item, compact, ascii_only, data):
    line = edited(line_of(item, compact, ascii_only), data, 2)
    try:
        json.loads(line)
    except ValueError:
        return
    with_module = answer(line)
    saved, export._compiled_item_valid = export._compiled_item_valid, None
    try:
        assert answer(line) == with_module
    finally:
        export._compiled_item_valid = saved
    if with_module[0] == "damaged":  # the first lines' check refuses it in the same words
        with pytest.raises(ValueError) as refused:
            export._valid_export_item(json.loads(line))
        assert str(refused.value) == with_module[2][1]


@needs_module
def test_a_line_that_is_no_bytes_object_is_left_to_python():
    assert compiled('{"Item":{}}') is None and compiled(None) is None
    assert compiled(b'{"Item":{}}') is True and compiled(b'{"Item":{}} ') is False


def test_a_damaged_item_keeps_its_place_in_its_batch():
    good, bad = {"a": {"S": "x"}}, {"a": {"SS": "abc"}}
    records = [(10, good), (11, export.Damaged(bad, ("a", 'a: "abc" is not a valid SS value'))), (12, good)]
    [batch] = export.file_batches(records)
    assert list(batch) == [good, bad, good] and batch.nbytes == 33
    assert batch.damaged == {1: ("a", 'a: "abc" is not a valid SS value')} and Batch().damaged is None


def test_an_ion_items_values_are_checked_too(tmp_path):
    """An Ion line is read into the values its DYNAMODB_JSON line would hold; one DynamoDB never writes that the Ion
    reading lets through (an empty set: a list annotated $dynamodb_SS holding nothing) is damaged, in the same words."""
    import gzip

    path = tmp_path / "part.ion.gz"
    path.write_bytes(gzip.compress(b'$ion_1_0 {Item:{Id:1.,Tags:$dynamodb_SS::["a"]}}\n'
                                   b'$ion_1_0 {Item:{Id:2.,Tags:$dynamodb_SS::[]}}\n'))
    [batch] = export.file_batches(export._checked_file_items(str(path)))
    assert list(batch) == [{"Id": {"N": "1"}, "Tags": {"SS": ["a"]}}, {"Id": {"N": "2"}, "Tags": {"SS": []}}]
    assert batch.damaged == {1: ("Tags", "Tags: [] is not a valid SS value")}
