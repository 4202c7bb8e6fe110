"""mappers/_json.c's encoders beyond plain JSON (typed JSON, auto, float64) and its run of one-cell columns, against
the Python functions they stand in for: the same bytes for every value they take, None for every value they leave to
Python, a model of what each must take (so a compiled function that took nothing would fail), and the encoders' and the
specialised map functions' outcomes the same with the module and without it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ddb2bt.mappers import encodings
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.results import Cell, MappedRow
from ddb2bt.mappers.spec import Encoding
from tests.compiled import require_built
from tests.mappers.compiled_values import ODD_NUMBERS, ODD_STRINGS, ODD_VALUES, outcome, takes as json_takes
from tests.pipelines.roundtrip_cases import ANY, JSON_LEAF, any_value

compiled = encodings._compiled
needs_module = pytest.mark.skipif(compiled is None, reason="mappers/_json.c not built (no C compiler)")
SPEC = Path(__file__).parents[2] / "benchmarks" / "spec.yaml"


def typed_takes(value) -> bool:
    """What typed_json_bytes must take: json_bytes's values, NULL only with its payload True."""
    if not json_takes(value):
        return False
    ((tag, payload),) = value.items()
    if tag == "NULL":
        return payload is True
    if tag == "L":
        return all(typed_takes(element) for element in payload)
    if tag == "M":
        return all(typed_takes(inner) for inner in payload.values())
    return True


def no_surrogate(text: str) -> bool:
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def auto_takes(value) -> bool:
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("S"), str):
        text = value["S"]
        return no_surrogate(text) if text and text[0] != "{" else typed_takes(value)
    return typed_takes(value)


def float64_takes(value) -> bool:
    """A text of ASCII digits, '-' and '.' that is its float's repr (or repr without ".0"), not starting with -0."""
    if not isinstance(value, dict) or len(value) != 1 or not isinstance(value.get("N"), str):
        return False
    text = value["N"]
    if not text or not set(text) <= set("0123456789-.") or text.startswith("-0") or len(text) > 64:
        return False
    try:
        shortest = repr(float(text))
    except ValueError:
        return False
    return (shortest == text or shortest == text + ".0") and "e" not in shortest and "n" not in shortest


def python_encoder(encoding: Encoding, monkeypatch):
    with_module = encodings.encoder_for(encoding)
    monkeypatch.setattr(encodings, "_compiled", None)
    monkeypatch.setattr(encodings, "_compiled_json", None)
    return with_module, encodings.encoder_for(encoding)


def python_ddb_json(value):
    return outcome(encodings.encode_ddb_json, value)


def python_auto(value):
    return outcome(encodings.encode_auto, value)


def python_float64(value):
    return outcome(encodings.encode_float64, value)


def test_the_compiled_module_is_built_wherever_a_c_compiler_is():
    require_built(compiled, "mappers/_json.c")


FLOAT_TEXTS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda number: repr(number).removesuffix(".0")),
    st.from_regex(r"-?[0-9]{1,20}(\.[0-9]{0,20})?", fullmatch=True),
    st.text(alphabet="0123456789-.eE+ _", max_size=12),
)


@needs_module
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.one_of(any_value(JSON_LEAF), ANY))
def test_typed_json_and_auto_the_same_bytes_as_python_or_none(value):
    found = compiled.typed_json_bytes(value)
    if typed_takes(value):
        assert found == python_ddb_json(value)
    else:
        assert found is None
    found = compiled.auto_bytes(value)
    if auto_takes(value):
        assert found == python_auto(value)
    else:
        assert found is None


@needs_module
@settings(max_examples=1000, deadline=None)
@given(text=FLOAT_TEXTS)
def test_float64_the_same_bytes_as_python_or_none(text):
    value = {"N": text}
    found = compiled.float64_bytes(value)
    if float64_takes(value):
        assert found == python_float64(value) == struct.pack(">d", float(text))
    else:
        assert found is None


@needs_module
@pytest.mark.parametrize("encoding", [Encoding.auto, Encoding.ddb_json, Encoding.float64])
@pytest.mark.parametrize("value", [*({"S": text} for text in [*ODD_STRINGS, "{", "{}", "a{"]),
                                   *({"N": text} for text in [*ODD_NUMBERS, "1.0", "0.1", "-0.0", "1e400", "5.", "-",
                                                              ".", "--1", "1.2.3", "1" * 70, "0.30000000000000004"]),
                                   *ODD_VALUES, {"NULL": 1}], ids=repr)
def test_odd_values_give_the_python_outcome(encoding, value, monkeypatch):
    with_module, without = python_encoder(encoding, monkeypatch)
    assert outcome(with_module, value) == outcome(without, value)


LIMITS = (16384, 253_402_300_799_999_000)
PROGRAM = (Cell, *LIMITS, ("a", 0, "f", b"a", False, 0), ("b", 2, "f", b"bb", True, 0), ("c", 4, "g", b"", False, 0))


@needs_module
def test_a_run_makes_the_cells_and_counts_their_bytes():
    cells = [Cell("x", b"q", 1, b"v")]
    made = compiled.cells({"a": {"S": "é"}, "b": {"N": "7"}, "c": {"N": "2.5"}}, PROGRAM, 5, cells)
    assert cells == [Cell("x", b"q", 1, b"v"), Cell("f", b"a", 5, "é".encode()),
                     Cell("f", b"bb", 5, (7).to_bytes(8, "big")), Cell("g", b"", 5, struct.pack(">d", 2.5))]
    assert all(type(cell) is Cell for cell in cells)
    assert made == 2 + 1 + 8 + 2 + 8


@needs_module
@pytest.mark.parametrize("item", [
    {"a": {"S": "x"}},  # b is required
    {"a": {"S": "x"}, "b": {"N": "-7"}},  # int64 leaves negatives to Python
    {"a": {"S": "\ud800"}, "b": {"N": "7"}},
    {"a": {"S": "x"}, "b": {"N": "7"}, "c": {"N": "0.10"}},
    {"a": {"S": "x"}, "b": {"N": "7"}, "c": {"N": "1", "S": "1"}},
], ids=repr)
def test_a_run_it_does_not_take_leaves_the_cells_as_they_were(item):
    cells = [Cell("x", b"q", 1, b"v")]
    assert compiled.cells(item, PROGRAM, 5, cells) is None
    assert cells == [Cell("x", b"q", 1, b"v")]


COLLECTIONS = (Cell, *LIMITS, ("s", 0, "f", b"s:", False, 1), ("m", 0, "f", b"m:", False, 2), ("l", 3, "l", b"l", False, 3))


@needs_module
def test_a_run_of_collections_makes_their_cells():
    cells = []
    made = compiled.cells({"s": {"NS": ["2.5", "1"]}, "m": {"M": {"b": {"S": "x"}, "": {"S": "y"}}},
                           "l": {"L": [{"BOOL": True}, {"BOOL": False}]}}, COLLECTIONS, 7000, cells)
    assert cells == [Cell("f", b"s:2.5", 7000, b"\x00"), Cell("f", b"s:1", 7000, b"\x00"), Cell("f", b"m:b", 7000, b"x"),
                     Cell("f", b"m:", 7000, b"y"), Cell("l", b"l", 7000, b"\x01"), Cell("l", b"l", 8000, b"\x00")]
    assert made == sum(len(cell.qualifier) + len(cell.value) for cell in cells)


@needs_module
@pytest.mark.parametrize("item", [
    {"s": {"SS": ["a", "a"]}}, {"s": {"NS": ["1", "1.0"]}}, {"s": {"BS": [b"a"]}}, {"s": {"SS": []}},
    {"s": {"SS": ["a" * 16383]}}, {"m": {"M": {"": {"S": ""}}}}, {"m": {"M": {}}}, {"m": {"M": {"k": {"N": "1"}}}},
    {"l": {"L": []}}, {"l": {"L": [{"BOOL": True}] * 2}, "ts": 253_402_300_799_999_000},
], ids=repr)
def test_a_collection_it_does_not_take_leaves_the_cells_as_they_were(item):
    cells = [Cell("x", b"q", 1, b"v")]
    at = item.pop("ts", 7000)
    assert compiled.cells({"s": {"SS": ["z"]}, **item}, COLLECTIONS, at, cells) is None
    assert cells == [Cell("x", b"q", 1, b"v")]


@needs_module
def test_a_program_of_another_shape_is_an_error():
    with pytest.raises(TypeError):
        compiled.cells({}, (Cell, *LIMITS, ("a", 0, "f", "a", False, 0)), 5, [])
    with pytest.raises(TypeError):
        compiled.cells({}, (Cell, *LIMITS, ("a", 0, "f", b"a", False)), 5, [])
    with pytest.raises(TypeError):
        compiled.cells({}, (dict, *LIMITS), 5, [])
    with pytest.raises(TypeError):
        compiled.cells({}, (Cell, *LIMITS, ("a", 0, "f", b"a", 0, 0)), 5, [])
    with pytest.raises(ValueError, match="kind"):
        compiled.cells({"a": {"S": "x"}}, (Cell, *LIMITS, ("a", 99, "f", b"a", False, 0)), 5, [])
    with pytest.raises(ValueError, match="layout"):
        compiled.cells({"a": {"M": {"k": {"S": "x"}}}}, (Cell, *LIMITS, ("a", 0, "f", b"a", False, 7)), 5, [])


KINDS = {"utf8": st.text(max_size=4).map(lambda text: {"S": text}),
         "decimal": st.sampled_from(["1", "2.5", "-0.25", "0.50", "-0", "1e3", "٣"]).map(lambda text: {"N": text}),
         "int64": st.sampled_from(["0", "7", "007", "-7", "999999999999999999", "1" * 19, "1.0", ""]).map(
             lambda text: {"N": text}),
         "bool": st.sampled_from([{"BOOL": True}, {"BOOL": False}, {"BOOL": 1}]),
         "float64": FLOAT_TEXTS.map(lambda text: {"N": text})}


SETS = st.one_of(
    st.lists(st.text(max_size=3), min_size=1, max_size=3).map(lambda members: {"SS": members}),  # "" and duplicates
    st.lists(st.sampled_from(["1", "1.0", "01", "-0", "0", "2.5", "1e3", "-7", "1" * 39, "٣", 5]), min_size=1,
             max_size=3).map(lambda members: {"NS": members}),
    st.lists(st.sampled_from([b"A", b"", "QQ==", "QR==", "!"]), min_size=1, max_size=2).map(lambda m: {"BS": m}),
    st.sampled_from([{"SS": []}, {"SS": ["a"], "NS": ["1"]}, {"L": []}, {"S": "a"}, {"SS": ["x" * 16381]},
                     {"SS": ("a",)}, {"SS": ["\ud800"]}]))


@st.composite
def runs(draw):
    """A spec of one entity whose columns make runs (one-cell columns, sets, maps, lists), and items for it, some
    odd."""
    values = {**KINDS, "json": any_value(JSON_LEAF), "auto": st.one_of(any_value(JSON_LEAF), ANY),
              "ddb_json": st.one_of(any_value(JSON_LEAF), ANY), "bytes": st.binary(max_size=3).map(lambda b: {"B": b})}
    columns, strategies = [], []
    for index in range(draw(st.integers(1, 5))):
        layout = draw(st.sampled_from(["cell", "cell", "set", "map", "list"]))
        encoding = draw(st.sampled_from(["utf8", "decimal", "bytes", "auto"] if layout == "set" else
                                        [*KINDS, "json", "auto", "ddb_json", "bytes"]))
        column = {"attribute": f"a{index}", "family": "f", "layout": layout, "encoding": encoding,
                  "required": draw(st.integers(0, 3)) == 0}
        if layout in ("set", "map"):
            column["qualifier"] = f"a{index}:"
        elements = values[encoding]
        strategies.append(SETS if layout == "set" else elements if layout == "cell" else st.one_of(
            st.dictionaries(st.text(max_size=2), elements, max_size=3).map(lambda m: {"M": m}) if layout == "map" else
            st.lists(elements, max_size=3).map(lambda m: {"L": m}), elements))
        columns.append(column)
    items = []
    for _ in range(draw(st.integers(1, 4))):
        item = {"pk": {"S": "k"}}
        for column, strategy in zip(columns, strategies):
            if column["required"] or draw(st.integers(0, 5)):
                item[column["attribute"]] = draw(strategy)
        items.append(item)
    return columns, items


@needs_module
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=runs())
def test_a_specialised_function_with_runs_maps_as_the_one_without(case):
    from ddb2bt.mappers.loader import validate_data

    columns, items = case
    try:
        spec = validate_data({"source": {"table": "T", "partition_key": "pk"},
                              "target": {"table": "t", "families": {"f": {}}}, "migration_time": "2024-01-01T00:00:00Z",
                              "entities": [{"name": "e", "row_key": "{pk}", "columns": columns, "lossy": ["pk"]}]})
    except Exception:  # noqa: BLE001 - a combination the loader refuses says nothing here
        return
    with_module = compile_spec(spec)
    specialised = with_module.entities[0].specialised
    if specialised is None:  # an entity the general path maps (a duplicate check): no runs
        return
    if any(column["encoding"] != "bytes" for column in columns):
        assert "cells_run(item" in specialised.source
    with pytest.MonkeyPatch.context() as patch:  # undone after each example (a fixture would be once per test)
        patch.setattr(encodings, "_compiled", None)
        patch.setattr(encodings, "_compiled_json", None)
        without = compile_spec(spec)
    assert "cells_run" not in without.entities[0].specialised.source
    for item in items:
        assert with_module.map_item(item) == without.map_item(item), item


@needs_module
def test_the_benchmark_maps_as_without_the_module(monkeypatch):
    from benchmarks import dataset
    from ddb2bt.mappers.loader import load_spec

    with_module = compile_spec(load_spec(SPEC))
    monkeypatch.setattr(encodings, "_compiled", None)
    monkeypatch.setattr(encodings, "_compiled_json", None)
    without = compile_spec(load_spec(SPEC))
    for item in dataset.generate(2000):
        assert with_module.map_item(item) == without.map_item(item)



GC_DURING_A_RUN = '''
import gc
from ddb2bt.mappers._json import cells
from ddb2bt.mappers.results import Cell

limits = (16384, 253_402_300_799_999_000)
item = {"m": {"M": {"k" + str(i): {"S": "v" * 50 + str(i)} for i in range(20)}},
        "l": {"L": [{"S": "e" + str(i)} for i in range(20)]}, "s": {"SS": ["m" + str(i) for i in range(20)]}}
expected = [Cell("f", b"m:k" + str(i).encode(), 7000, ("v" * 50 + str(i)).encode()) for i in range(20)] + \\
    [Cell("f", b"l", 7000 + i * 1000, ("e" + str(i)).encode()) for i in range(20)]


class Finalized:
    def __del__(self):  # empties the very values the run is writing
        item["m"]["M"].clear()
        item["l"]["L"].clear()
        item["s"]["SS"].clear()


def garbage():
    found = Finalized()
    found.cycle = found


def collecting_inside(program):
    gc.disable()
    garbage()
    gc.set_threshold(1)
    gc.enable()
    made = []
    answer = cells(item, program, 7000, made)
    assert not item["s"]["SS"], "the finalizer did not run inside the call"
    return answer, made


answer, made = collecting_inside((Cell, *limits, ("m", 6, "f", b"m:", False, 2), ("l", 6, "f", b"l", False, 3)))
# as they were (the entries were taken before), or none (they changed before): never some
assert (answer, made) == (None, []) or answer == sum(len(cell[1]) + len(cell[3]) for cell in made) and made == expected, made
item["s"]["SS"] = ["m" + str(i) for i in range(20)]
answer, made = collecting_inside((Cell, *limits, ("s", 0, "f", b"s:", False, 1)))
assert len(made) < 20, made  # the walk stopped where the list ended
'''


@needs_module
def test_a_collection_inside_a_run_changes_nothing_it_writes():
    """The cells' tuples are tracked by the collector, so making one may run a finalizer inside the call; here it empties
    the map, list and set being written: the map's and the list's cells are written as they were (their entries are
    held) or not at all (the run answers None), the set's walk stops where the list now ends, and nothing reads freed
    memory (PYTHONMALLOC=debug)."""
    import os
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", GC_DURING_A_RUN], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONMALLOC": "debug"})
    assert run.returncode == 0, run.stderr[-2000:]


# --- row: the specialised function's last line, its atoms-only tuples untracked by the collector ---

ATOMS = st.one_of(st.text(max_size=3), st.binary(max_size=3), st.integers())
NOT_ATOMS = st.one_of(st.lists(st.integers(), max_size=1), st.floats(allow_nan=False), st.booleans(), st.none(),
                      st.builds(lambda text: type("Text", (str,), {})(text), st.text(max_size=2)))
CELLS = st.lists(st.one_of(
    st.tuples(ATOMS, ATOMS, ATOMS, ATOMS).map(lambda parts: tuple.__new__(Cell, parts)),
    st.tuples(ATOMS, ATOMS),  # a plain tuple of atoms is one too
    st.tuples(ATOMS, NOT_ATOMS, ATOMS, ATOMS).map(lambda parts: tuple.__new__(Cell, parts))), max_size=6)


def python_row(key, cells, entity):
    return tuple.__new__(MappedRow, (key, tuple(cells), entity, (), ()))


def atoms_only(value) -> bool:
    return all(part.__class__ in (str, bytes, int) for part in value)


@needs_module
@settings(max_examples=400, deadline=None)
@given(key=st.one_of(st.binary(max_size=3), st.text(max_size=2)), cells=CELLS,
       entity=st.one_of(st.text(max_size=3), st.builds(lambda text: type("Name", (str,), {})(text), st.text(max_size=2))))
def test_row_is_the_python_lines_row_with_only_its_atoms_only_tuples_untracked(key, cells, entity):
    import gc

    enabled = gc.isenabled()
    gc.disable()  # a collection untracks a plain tuple of atoms itself: none between the cells made and the checks
    try:
        _row_checks(key, [tuple(list(cell)) if cell.__class__ is tuple else cell for cell in cells], entity)
    finally:
        if enabled:
            gc.enable()


def _row_checks(key, cells, entity):
    import gc

    for cell in cells:
        assert gc.is_tracked(cell)
    made = compiled.row(MappedRow, key, cells, entity)
    expected = python_row(key, cells, entity)
    assert made == expected and made.__class__ is MappedRow
    assert [part.__class__ for part in made] == [part.__class__ for part in expected]
    assert all(a is b for a, b in zip(made[1], cells)) and made[1].__class__ is tuple and made[3:] == ((), ())
    every = all(atoms_only(cell) for cell in cells)
    for cell in cells:  # a cell that holds anything but an atom (a list, a float, a subclass) is walked as before
        assert gc.is_tracked(cell) is not atoms_only(cell)
    assert gc.is_tracked(made[1]) is not every
    assert gc.is_tracked(made) is not (every and key.__class__ is bytes and entity.__class__ is str)
    gc.collect()  # nothing the row holds is freed while it holds it
    assert made == python_row(key, cells, entity)


@needs_module
def test_row_leaves_to_python_a_row_type_of_another_layout_and_cells_that_are_no_list():
    class Wider(tuple):  # a __dict__: its instances may hold anything
        pass

    assert compiled.row(Wider, b"k", [], "e") is None
    assert compiled.row(dict, b"k", [], "e") is None
    assert compiled.row(MappedRow, b"k", (Cell("f", b"q", 1, b"v"),), "e") is None
    with pytest.raises(TypeError):
        compiled.row(MappedRow, b"k", [])


@needs_module
def test_the_specialised_functions_rows_are_untracked_and_map_as_without_the_module(monkeypatch):
    """The benchmark's items: the same rows, cell for cell and type for type, as the Python line makes; with the
    module the rows, their cells' tuples and their cells are off the collector's lists."""
    import gc

    from benchmarks import dataset
    from ddb2bt.mappers.loader import load_spec

    with_module = compile_spec(load_spec(SPEC))
    assert all("return row(MappedRow, key, cells, " in entity.specialised.source for entity in with_module.entities)
    monkeypatch.setattr(encodings, "_compiled", None)
    monkeypatch.setattr(encodings, "_compiled_json", None)
    without = compile_spec(load_spec(SPEC))
    assert not any("row(" in entity.specialised.source for entity in without.entities)
    for item in dataset.generate(1000):
        made, expected = with_module.map_item(item), without.map_item(item)
        assert made == expected and made.__class__ is expected.__class__ is MappedRow
        assert [cell.__class__ for cell in made.cells] == [cell.__class__ for cell in expected.cells]
        assert not gc.is_tracked(made) and not gc.is_tracked(made.cells)
        assert not any(gc.is_tracked(cell) for cell in made.cells)
        assert gc.is_tracked(expected.cells[0])


@needs_module
@pytest.mark.parametrize("row_type", ["stat_result", "struct_time"])
def test_row_leaves_a_c_made_tuple_type_with_hidden_fields_to_python(row_type):
    """A struct sequence (os.stat_result, time.struct_time) has tuple's sizes but frees fields past its items: made
    here with five items, freeing it read past them (found under ASan by review 11). Python refuses the type; the
    compiled function leaves it to Python (None)."""
    import os
    import time

    kind = {"stat_result": os.stat_result, "struct_time": time.struct_time}[row_type]
    assert compiled.row(kind, b"k", [], "e") is None
    with pytest.raises(TypeError):
        tuple.__new__(kind, (b"k", (), "e", (), ()))
    assert compiled.row(type("Sub", (MappedRow,), {"__slots__": ()}), b"k", [], "e") is not None  # a class's: taken
