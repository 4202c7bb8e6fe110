"""Issue 11: every check Bigtable would make is made where the mutation is built.

A bad item must come out of ``map_item`` as an ItemError (a dead letter with its reason), never as a
MappedRow that the writer's protobuf or Bigtable refuses later and that kills the run.
"""

import pytest
import yaml

from ddb2bt.mappers import limits
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.limits import LimitError, check_cells, timestamp_problem
from ddb2bt.mappers.loader import validate_data
from ddb2bt.mappers.results import Cell, ItemError, MappedRow
from ddb2bt.mappers.timestamps import TimestampError, parse_timestamp

NOW_MS = 1_717_200_000_000  # 2024-06-01T00:00:00Z
INT64_MAX = 2**63 - 1
MIB = 1024 * 1024

SPEC = """
source: {table: T, partition_key: pk, sort_key: sk}
target: {table: t, families: {f: {max_versions: 1}, a: {max_age: 7d}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: event
    match: {kind: event}
    timestamp: {attribute: at}
    row_key: "{pk}"
    drop: [sk, kind]
    columns: [{attribute: x, family: f}]
  - name: doc
    match: {kind: doc}
    versioning: {}
    row_key: "{pk}"
    drop: [sk, kind]
    columns: [{attribute: x, family: f}]
  - name: session
    match: {kind: session}
    ttl: {attribute: expires}
    row_key: "{pk}"
    drop: [sk, kind]
    columns: [{attribute: x, family: a}]
  - name: wide
    match: {kind: wide}
    row_key: "{pk}"
    drop: [sk, kind]
    lossy: [x, tags]  # the two share family f without prefixes: fine for these limits, declared
    columns:
      - {attribute: x, family: f, qualifier: "{sk}"}
      - {attribute: tags, family: f, layout: set}
"""


def mapped(item: dict, spec: str = SPEC):
    return compile_spec(validate_data(yaml.safe_load(spec)), now_ms=NOW_MS).map_item(item)


def item(kind: str, **attributes) -> dict:
    base = {"pk": {"S": "k"}, "sk": {"S": "s"}, "kind": {"S": kind}, "x": {"S": "v"}}
    return base | {name: value if isinstance(value, dict) else {"N": str(value)} for name, value in attributes.items()}


def assert_dead_letter(result, *words: str) -> None:
    assert isinstance(result, ItemError), result
    assert all(word in result.reason for word in words), result.reason


# --------------------------------------------------------------------------- timestamps


def test_the_fault_sweeps_timestamp_is_a_dead_letter_naming_the_attribute():
    result = mapped(item("event", at="99999999999999999999"))
    assert_dead_letter(result, "timestamp attribute 'at'", "'99999999999999999999'", "after 9999-12-31")


@pytest.mark.parametrize("text, fmt", [
    ("253402300800", "epoch_s"),            # 10000-01-01: one second too late
    ("9223372036854775807", "epoch_us"),    # int64 max: not a multiple of 1000, and no date
    ("9223372036854775808", "auto"),        # past int64
    ("10000000000000000", "epoch_ms"),      # a unit mistake
    ("-1", "epoch_ms"),
    ("1969-12-31T23:59:59Z", "auto"),
])
def test_timestamps_outside_1970_to_9999_are_refused_when_parsed(text, fmt):
    with pytest.raises(TimestampError):
        parse_timestamp(text, fmt)


def test_the_last_millisecond_of_9999_is_the_latest_timestamp():
    assert parse_timestamp("9999-12-31T23:59:59.999999Z") == limits.TIMESTAMP_MAX_MICROS
    assert parse_timestamp(str(limits.TIMESTAMP_MAX_MICROS), "epoch_us") == limits.TIMESTAMP_MAX_MICROS
    assert parse_timestamp("0", "epoch_s") == 0


def test_a_version_number_beyond_the_range_is_a_dead_letter():
    versioned = item("doc") | {"sk": {"S": "v99999999999999999999_spec"}}
    assert_dead_letter(mapped(versioned), "after 9999-12-31")
    assert isinstance(mapped(item("doc") | {"sk": {"S": "v2_spec"}}), MappedRow)


def test_a_ttl_beyond_the_range_is_a_dead_letter():
    assert_dead_letter(mapped(item("session", expires="99999999999999999999")), "after 9999-12-31")
    assert isinstance(mapped(item("session", expires=NOW_MS // 1000 + 3600)), MappedRow)


def test_a_ttl_whose_cell_time_would_be_before_1970_is_a_dead_letter():
    century = SPEC.replace("a: {max_age: 7d}", "a: {max_age: 36500d}")  # expiry - 100 years < 0
    assert_dead_letter(mapped(item("session", expires=NOW_MS // 1000 + 3600), century), "before 1970", "cannot be negative")


@pytest.mark.parametrize("micros, words", [
    (-1, ("before 1970",)),  # -1 means "server time" in Bigtable's API: ddb2bt never writes it
    (-1000, ("before 1970",)),
    (1500, ("not a whole millisecond",)),
    (limits.TIMESTAMP_MAX_MICROS + 1000, ("after 9999-12-31",)),
    (INT64_MAX, ("after 9999-12-31",)),
    (2**64, ("after 9999-12-31",)),
])
def test_cells_with_timestamps_bigtable_refuses_are_refused(micros, words):
    for cells in ([Cell("f", b"q", micros, b"v")], [Cell("f", b"ok", 1000, b""), Cell("f", b"q", micros, b"v")]):
        with pytest.raises(LimitError) as caught:
            check_cells(cells)
        assert "f:b'q'" in str(caught.value) and all(word in str(caught.value) for word in words)
    assert timestamp_problem(micros) is not None


@pytest.mark.parametrize("micros", [0, 1000, limits.TIMESTAMP_MAX_MICROS])
def test_timestamps_at_the_bounds_are_accepted(micros):
    assert check_cells([Cell("f", b"q", micros, b"v")]) == ()
    assert timestamp_problem(micros) is None


# --------------------------------------------------------------------------- sizes and counts


def test_row_key_over_4_kib_is_a_dead_letter():
    assert_dead_letter(mapped(item("wide") | {"pk": {"S": "k" * (4096 + 1)}}), "row key is 4097 bytes")
    assert isinstance(mapped(item("wide") | {"pk": {"S": "k" * 4096}}), MappedRow)


def test_qualifier_over_16_kib_is_a_dead_letter():
    assert_dead_letter(mapped(item("wide") | {"sk": {"S": "q" * (16 * 1024 + 1)}}), "16385 bytes", "16 KiB")
    assert isinstance(mapped(item("wide") | {"sk": {"S": "q" * 16 * 1024}}), MappedRow)


def test_more_than_100000_mutations_is_a_dead_letter():
    members = [str(n) for n in range(limits.MUTATIONS_PER_ENTRY_MAX)]  # + the x cell: one too many
    assert_dead_letter(mapped(item("wide", tags={"SS": members})), "100001 cells", "100000 mutations")
    assert isinstance(mapped(item("wide", tags={"SS": members[1:]})), MappedRow)


def test_an_item_that_writes_no_cell_is_a_dead_letter():
    without_x = item("wide")
    del without_x["x"]
    assert_dead_letter(mapped(without_x), "writes no cell")


def test_a_cell_over_100_mib_is_refused_and_over_10_mib_warned():
    with pytest.raises(LimitError, match="the limit is 100 MiB"):
        check_cells([Cell("f", b"q", 0, b"x" * (100 * MIB + 1))])
    (warning,) = check_cells([Cell("f", b"q", 0, b"x" * (10 * MIB + 1))])
    assert "over the advised 10 MiB" in warning


def test_a_row_entry_over_256_mib_is_refused_and_over_100_mib_warned():
    big = b"x" * (90 * MIB)  # one object, three cells: 270 MiB in the entry
    with pytest.raises(LimitError, match="at most 256 MiB"):
        check_cells([Cell("f", q, 0, big) for q in (b"a", b"b", b"c")])
    warnings = check_cells([Cell("f", q, 0, big[: 60 * MIB]) for q in (b"a", b"b")])
    assert any("over the advised 100 MiB per row" in warning for warning in warnings)
    assert not any("10 MiB" in warning for warning in check_cells([Cell("f", b"a", 0, big[: 9 * MIB])] * 2))


# --------------------------------------------------------------------------- --max-dead-letters


@pytest.mark.parametrize("text, dead, items, during, final", [
    ("10%", 101, 1000, True, True), ("10%", 100, 1000, False, False),  # more than 10% stops, 10% exactly does not
    ("10%", 900, 999, False, False), ("10%", 999, 999, False, True),   # under 1,000 items: only "all of them", at the end
    ("0.5%", 6, 1000, True, True), ("100%", 5000, 5000, False, False),
    ("0", 1, 1, True, True), ("250", 250, 300, False, False), ("250", 251, 300, True, True),  # a count: as it comes
])  # fmt: skip
def test_dead_letter_limits(text, dead, items, during, final):
    limit = limits.DeadLetterLimit.parse(text)
    assert limit.exceeded(dead, items) is during and limit.exceeded(dead, items, final=True) is final


@pytest.mark.parametrize("text", ["", "ten", "-1", "5.5", "101%", "-1%", "nan%", "1e2%", "%"])
def test_dead_letter_limits_that_are_neither_a_count_nor_a_percentage(text):
    with pytest.raises(ValueError, match="neither a number of items nor a percentage"):
        limits.DeadLetterLimit.parse(text)


def test_a_stop_says_the_share_without_rounding_it_onto_the_limit():
    assert limits.DeadLetterLimit.parse("10%").describe(251, 2500).startswith("251 of 2500 items read were dead-lettered "
                                                                              "(10.04%), more than")
    assert limits.DeadLetterLimit.parse("250").describe(251, 129) == ("251 items were dead-lettered, more than "
                                                                      "--max-dead-letters 250 allows")
