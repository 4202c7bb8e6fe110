"""The Bigtable sink against the real emulator: table setup, GC comparison, writes and refused writes."""

from __future__ import annotations

from datetime import timedelta

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from ddb2bt.mappers.results import Cell, MappedRow
from ddb2bt.mappers.spec import GcPolicy, TargetSpec
from ddb2bt.pipelines.run.local_runner import new_pipeline
from ddb2bt.pipelines.bigtable.sink import (
    SchemaMismatchError,
    TableMissingError,
    WriteToBigtable,
    describe_gc_rule,
    ensure_table,
    gc_rule_difference,
    gc_rule_for,
)
from .cells import read_cells


def test_gc_rules_in_words():
    from google.cloud.bigtable import column_family as cf

    assert gc_rule_for(GcPolicy()) is None
    assert gc_rule_for(GcPolicy(max_versions=1)) == cf.MaxVersionsGCRule(1)
    both = gc_rule_for(GcPolicy(max_versions=2, max_age="30d", combine="intersection"))
    assert both == cf.GCRuleIntersection([cf.MaxVersionsGCRule(2), cf.MaxAgeGCRule(timedelta(days=30))])
    assert describe_gc_rule(None) == "keep every version (no GC rule)"
    assert "keep at most 2 versions" in describe_gc_rule(both) and "30d" in describe_gc_rule(both)
    # order of sub-rules and a one-rule union are not differences
    assert gc_rule_difference(cf.GCRuleUnion([cf.MaxAgeGCRule(timedelta(hours=1)), cf.MaxVersionsGCRule(3)]),
                              gc_rule_for(GcPolicy(max_versions=3, max_age="1h"))) is None
    assert gc_rule_difference(cf.GCRuleUnion([cf.MaxVersionsGCRule(3)]), cf.MaxVersionsGCRule(3)) is None
    assert gc_rule_difference(cf.MaxVersionsGCRule(1), None) == (
        "expected keep at most 1 version, found keep every version (no GC rule)")


def test_ensure_table_creates_checks_and_adds(bigtable_env, unique_name):
    families = {"a": {"max_versions": 1}, "b": {"max_versions": 2, "max_age": "30d", "combine": "intersection"},
                "c": None}
    target = TargetSpec(table=unique_name, families=families)
    with pytest.raises(TableMissingError, match=unique_name):
        ensure_table(target, create=False)
    setup = ensure_table(target)
    assert setup.created and setup.added_families == ("a", "b", "c")
    assert not ensure_table(target).created  # same spec again: nothing to do

    from google.cloud.bigtable import Client

    found = Client(project=target.project, admin=True).instance(target.instance).table(unique_name)
    rules = {name: family.gc_rule for name, family in found.list_column_families().items()}
    assert rules == {name: gc_rule_for(policy) for name, policy in target.families.items()}

    wider = TargetSpec(table=unique_name, families={**families, "d": {"max_versions": 5}})
    assert ensure_table(wider).added_families == ("d",)

    changed = TargetSpec(table=unique_name, families={**families, "a": {"max_versions": 3}, "e": None})
    with pytest.raises(SchemaMismatchError) as err:
        ensure_table(changed)
    message = str(err.value)
    assert "family 'a'" in message and "expected keep at most 3 versions, found keep at most 1 version" in message
    assert "Nothing was written" in message
    assert "e" not in {name for name in found.list_column_families()}  # refused before adding anything


def _row(key: bytes, *cells: Cell) -> tuple[MappedRow, dict]:
    return MappedRow(key, cells, "thing"), {"pk": {"S": key.decode()}, "blob": {"B": b"\x00\xff"}}


def test_writes_land_and_refused_rows_are_dead_lettered(bigtable_env, unique_name):
    target = TargetSpec(table=unique_name, families={"f": {"max_versions": 3}, "g": None})
    ensure_table(target)
    good = [_row(b"r%02d" % i, Cell("f", b"q", 1_000_000 * (i + 1), b"v%d" % i),
                 Cell("g", b"x\x00y", 2000, b"")) for i in range(25)]
    versions = _row(b"multi", Cell("f", b"q", 1000, b"old"), Cell("f", b"q", 2000, b"new"))
    unknown_family = _row(b"bad-family", Cell("nope", b"q", 1000, b"v"))
    bad_timestamp = _row(b"bad-ts", Cell("f", b"q", 1001, b"v"))  # the emulator wants whole milliseconds
    with new_pipeline() as p:
        letters = (p | beam.Create(good + [versions, unknown_family, bad_timestamp])
                   | WriteToBigtable(target)
                   | beam.Map(lambda d: (d.stage, d.row_key, d.item["pk"]["S"], d.item["blob"]["B"],
                                         "Bigtable refused the row" in d.reason)))
        assert_that(letters, equal_to([("write", b"bad-family", "bad-family", b"\x00\xff", True),
                                       ("write", b"bad-ts", "bad-ts", b"\x00\xff", True)]))
    cells = read_cells(target)
    assert set(cells) == {row.row_key for row, _ in good} | {b"multi"}
    assert cells[b"r07"] == [("f", b"q", 8_000_000, b"v7"), ("g", b"x\x00y", 2000, b"")]
    assert cells[b"multi"] == [("f", b"q", 1000, b"old"), ("f", b"q", 2000, b"new")]


def test_every_refusal_is_dead_lettered_past_the_batchers_list_limit(bigtable_env, unique_name):
    """The batcher keeps only 20 failures per close by default; all 45 must come out."""
    target = TargetSpec(table=unique_name, families={"f": None})
    ensure_table(target)
    rows = [_row(b"bad%02d" % i, Cell("missing", b"q", 1000, b"v")) for i in range(45)]
    with new_pipeline() as p:
        keys = p | beam.Create(rows) | WriteToBigtable(target) | beam.Map(lambda d: d.row_key)
        assert_that(keys, equal_to([row.row_key for row, _ in rows]))


def test_a_spec_policy_and_the_rule_made_from_it_read_the_same():
    """One wording: the plan's family line (from the spec) and the target diff's (from the table) agree."""
    from datetime import timedelta

    from ddb2bt.mappers.gc import gc_text
    from ddb2bt.mappers.spec import GcPolicy
    from ddb2bt.pipelines.bigtable.sink import gc_rule_for

    for policy in (GcPolicy(), GcPolicy(max_versions=1), GcPolicy(max_age=timedelta(days=7)),
                   GcPolicy(max_versions=3, max_age=timedelta(hours=36), combine="intersection"),
                   GcPolicy(max_versions=3, max_age=timedelta(days=30))):
        assert gc_text(policy) == describe_gc_rule(gc_rule_for(policy))


def test_the_writers_tallies_count_every_rows_key_qualifiers_and_values(bigtable_env, unique_name):
    """rows_written, index_rows_written, cells_written and bytes_written (each row's key, its cells' qualifiers and
    values) for plain rows, a row with a counter (written as DeleteFromColumn + AddToCell: its tally is still its
    cells') and a row with an index row of its own."""
    from apache_beam.metrics.metric import MetricsFilter

    from ddb2bt.mappers.results import IndexRow

    target = TargetSpec(table=unique_name, families={"f": None, "c": {"aggregate": "sum"}})
    ensure_table(target)
    plain = [_row(b"r%d" % i, Cell("f", b"q" * i, 1000, b"v" * (3 * i)), Cell("f", b"", 2000, b"")) for i in range(5)]
    counter = _row(b"counted", Cell("f", b"name", 1000, b"x"), Cell("c", b"views", 1000, (7).to_bytes(8, "big")))
    index = IndexRow(b"idx#1", (Cell("f", b"k", 1000, b"r0"),), "by_x")
    indexed = (MappedRow(b"indexed", (Cell("f", b"q", 1000, b"abc"),), "thing", (), (index,)), {"pk": {"S": "i"}})
    rows = plain + [counter, indexed]
    p = new_pipeline()
    _ = p | beam.Create(rows) | WriteToBigtable(target)
    result = p.run()
    result.wait_until_finish()

    def counted(name):
        return sum(found.committed for found in result.metrics().query(MetricsFilter().with_name(name))["counters"])

    written = [row for row, _ in rows] + [index]
    assert counted("rows_written") == len(rows) and counted("index_rows_written") == 1
    assert counted("cells_written") == sum(len(row.cells) for row in written)
    assert counted("bytes_written") == sum(len(row.row_key) + sum(len(c.qualifier) + len(c.value) for c in row.cells)
                                           for row in written)
    assert ("c", b"views") in [cell[:2] for cell in read_cells(target)[b"counted"]]


def _tally_batches():
    from hypothesis import strategies as st

    from ddb2bt.mappers.results import IndexRow

    cell = st.builds(lambda family, qualifier, micros, value: Cell(family, qualifier, micros, value),
                     st.sampled_from(["f", "c"]), st.sampled_from([b"x", b"y", b""]), st.sampled_from([1000, 2000]),
                     st.binary(min_size=8, max_size=8) | st.binary(max_size=3))
    cells = st.lists(cell, min_size=1, max_size=4, unique_by=lambda c: c[:3]).map(tuple)  # as the mapper's rows
    keys = st.sampled_from([b"a", b"b", b"c", b"dd"])
    row = st.one_of(st.builds(lambda key, found: MappedRow(key, found, "e"), keys, cells),
                    st.builds(lambda key, found, table: IndexRow(key, found, "by_x", table), keys, cells,
                              st.sampled_from([None, "other"])))
    return st.lists(st.lists(row, max_size=8), min_size=1, max_size=4)


def test_the_writers_one_pass_tallies_are_every_batchs_counts_and_overwrites():
    """_tallies (the writer's count of a closed batcher's entries, in one pass) against the plain sums and an
    exact model of overwrites: over fewer distinct rows than RECENT_ROWS, every cell of a main-table row (a MappedRow,
    or an index row under the main table's prefix) whose coordinate any row before it wrote, in its batch or an
    earlier one, is overwritten; an index table's rows are counted as written but never compared. Counter entries
    (aggregate family "c": no data bytes of their own) count their row's qualifiers and values."""
    from hypothesis import given, settings

    from ddb2bt.mappers.results import IndexRow
    from ddb2bt.pipelines.bigtable.entries import to_mutation_entry
    from ddb2bt.pipelines.bigtable.sink import _tallies

    @settings(max_examples=300, deadline=None)
    @given(_tally_batches())
    def check(batches):
        recent: dict = {}
        written: set = set()
        for batch in batches:
            pending = {}
            for row in batch:
                entry = to_mutation_entry(row, frozenset({"c"}))
                entry.size()
                pending[id(entry)] = (entry, row, {"pk": row.row_key})
            overwritten = 0
            for row in batch:
                if row.__class__ is IndexRow and row.table is not None:
                    continue
                for cell in row.cells:
                    coordinate = (row.row_key, *cell[:3])
                    overwritten += coordinate in written
                    written.add(coordinate)
            expected = (sum(len(row.cells) for row in batch),
                        sum(len(row.row_key) + sum(len(c.qualifier) + len(c.value) for c in row.cells)
                            for row in batch),
                        sum(row.__class__ is IndexRow for row in batch), overwritten)
            assert _tallies(pending.values(), recent) == expected

    check()


def test_the_writers_page_batchers_share_their_thread_pools_and_leave_no_thread(bigtable_env, unique_name):
    """The writer opens a batcher per page (closed behind the next): its batchers' thread pools are kept for the
    writer's life, so the threads started do not grow with the pages, every page's savepoint comes out once its
    page is stored (refusals dead-lettered), and after teardown — at the end of a run, and after a bundle that
    failed — none of the writer's pool threads is left."""
    import threading

    from ddb2bt.pipelines.bigtable.sink import Destination, FlowControl, _WriteFn
    from ddb2bt.pipelines.run.batches import SegmentAt

    target = TargetSpec(table=unique_name, families={"f": None})
    ensure_table(target)

    def pool_threads() -> set:
        """The pool threads alive once every one started here has had 5 s to end (the client's own pool is shut down
        without waiting: its thread ends soon after; an idle pool that was not shut down keeps its threads waiting
        for work)."""
        for thread in threading.enumerate():
            if thread.name.startswith("ThreadPoolExecutor") and thread not in before:
                thread.join(timeout=5)
        return {thread for thread in threading.enumerate() if thread.name.startswith("ThreadPoolExecutor")}

    before = {thread for thread in threading.enumerate() if thread.name.startswith("ThreadPoolExecutor")}
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread):
        started.append(thread.name)
        start(thread)

    threading.Thread.start = counted  # type: ignore[method-assign]
    try:
        writer = _WriteFn(Destination.from_target(target), FlowControl(flush_limit_mutation_count=20))
        writer.setup()
        writer.start_bundle()
        out = []
        for page in range(20):
            rows = [_row(b"p%02d-%02d" % (page, i), Cell("f", b"q", 1000, b"v")) for i in range(40)]
            out += list(writer.process([*rows, _row(b"p%02d-bad" % page, Cell("nope", b"q", 1000, b"v"))]))
            out += list(writer.process(SegmentAt(0, {"page": page})))
        out += list(writer.finish_bundle())
        writer.teardown()
        lent = [name for name in started if name.startswith("ThreadPoolExecutor")]
        assert pool_threads() - before == set()

        failed = _WriteFn(Destination.from_target(target), FlowControl(flush_limit_mutation_count=20))
        failed.setup()
        failed.start_bundle()
        for page in range(3):  # a bundle that fails after three pages: torn down with a batcher open
            list(failed.process([_row(b"f%02d-%02d" % (page, i), Cell("f", b"q", 1000, b"v")) for i in range(40)]))
            list(failed.process(SegmentAt(0, {"page": page})))
        list(failed.process([_row(b"f-last", Cell("f", b"q", 1000, b"v"))]))
        failed.teardown()
        assert pool_threads() - before == set()
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]
    values = [element.value if hasattr(element, "value") else element for element in out]
    letters = [value for value in values if not isinstance(value, SegmentAt)]
    assert [value for value in values if isinstance(value, SegmentAt)] == [SegmentAt(0, {"page": p}) for p in range(20)]
    assert sorted(letter.row_key for letter in letters) == [b"p%02d-bad" % page for page in range(20)]
    assert len(lent) <= 2 * (4 + 8)  # two batchers open at once at most: two pairs of pools, whatever the pages
    assert len(read_cells(target)) == 20 * 40 + 3 * 40 + 1
