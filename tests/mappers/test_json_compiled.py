"""mappers/_json.c, the compiled plain JSON of a value (the json encoding), against the Python function it stands
in for: the same bytes for every value it takes, None for every value it leaves to Python, and the encoder's
outcome (bytes or the EncodingError's words) the same with it and without it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ddb2bt.mappers import encodings
from ddb2bt.mappers.spec import Encoding
from tests.compiled import require_built
from tests.mappers.compiled_values import ODD_NUMBERS, ODD_STRINGS, ODD_VALUES, outcome, takes
from tests.pipelines.roundtrip_cases import ANY, JSON_LEAF, any_value

compiled = encodings._compiled_json
needs_module = pytest.mark.skipif(compiled is None, reason="mappers/_json.c not built (no C compiler)")


def python_bytes(value):
    return outcome(lambda found: encodings._json_text(found).encode(), value)


def both_encoders(monkeypatch):
    with_module = encodings.encoder_for(Encoding.json)
    monkeypatch.setattr(encodings, "_compiled_json", None)
    return with_module, encodings.encoder_for(Encoding.json)


def test_the_compiled_module_is_built_wherever_a_c_compiler_is():
    require_built(compiled, "mappers/_json.c")


@needs_module
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.one_of(any_value(JSON_LEAF), ANY))
def test_the_same_bytes_as_python_or_none(value):
    found = compiled(value)
    if takes(value):
        assert found == python_bytes(value)
    else:
        assert found is None


NESTED = {"S": "deep"}
for _ in range(70):
    NESTED = {"L": [NESTED]}


@needs_module
@pytest.mark.parametrize("value", [*({"S": text} for text in ODD_STRINGS), *({"N": text} for text in ODD_NUMBERS),
                                   *ODD_VALUES, NESTED], ids=repr)
def test_odd_values_give_the_python_outcome(value, monkeypatch):
    found = compiled(value)
    assert found is None or found == python_bytes(value)
    assert (found is not None) == takes(value) or value is NESTED
    with_module, without = both_encoders(monkeypatch)
    assert outcome(with_module, value) == outcome(without, value)


GC_DURING_THE_CALL = '''
import gc
from ddb2bt.mappers import encodings
from ddb2bt.mappers._json import json_bytes

outer = {"L": [{"M": {"k" + str(i): {"S": "v" * 50 + str(i)} for i in range(20)}}]}
expected = encodings._json_text(outer).encode()


class Finalized:
    def __del__(self):
        outer["L"].clear()  # drops the very value json_bytes is writing


def garbage():
    found = Finalized()
    found.cycle = found


gc.disable()
garbage()
hold = [[] for _ in range(200)]  # the list free list emptied: the map's keys list is a new allocation, and may collect
gc.set_threshold(1)
gc.enable()
got = json_bytes(outer)
assert outer == {"L": []}, "the finalizer did not run inside the call"
assert got == expected, (got, expected)
'''


@needs_module
def test_a_collection_inside_the_call_changes_nothing_it_writes():
    """A list made on the way (a map's keys) may start a garbage collection inside the call (Python 3.10, 3.11), whose
    finalizer here empties the list being written: the value is written as it was, from references held, where
    borrowed ones read freed memory (a crash, under PYTHONMALLOC=debug every time)."""
    import os
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", GC_DURING_THE_CALL], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONMALLOC": "debug"})
    assert run.returncode == 0, run.stderr[-2000:]
