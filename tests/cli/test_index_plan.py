"""migrate-plan and the report show the secondary indexes carried as index rows, and the patterns on them served."""

from __future__ import annotations

import io

from rich.console import Console

from ddb2bt.cli.plan_text import render_text
from ddb2bt.cli.report import render
from ddb2bt.mappers.analysis.plan import build_plan
from ddb2bt.mappers.spec import MappingSpec

GSI = {"name": "by_status", "type": "global", "partition_key": "status", "sort_key": "amount"}


def test_the_plan_the_text_and_the_report_show_index_rows_and_serve_index_patterns():
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t", "families": {"d": {}, "i": {}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "item", "row_key": {"template": "{pk}#{sk}", "on_delimiter": "escape"},
                      "rest": {"family": "d"}}],
        "indexes": [{**GSI, "projection": {"type": "INCLUDE", "non_key_attributes": ["total"]},
                     "target": {"prefix": "~s#"}, "family": "i"}],
        "access_patterns": [{"name": "open_by_amount", "index": GSI, "sort_key": {"operator": ">="}}],
    })
    items = [{"pk": {"S": f"C#{i}"}, "sk": {"S": "O#1"}, "total": {"N": str(i)}} for i in range(6)]
    for item in items[:4]:
        item.update(status={"S": "OPEN"}, amount={"N": str(len(item["pk"]["S"]))})
    plan = build_plan(spec, items)
    (index,) = plan.indexes
    assert (index.items_in_index, index.items_mapped, index.cells) == (4, 6, 4 * 5)
    assert index.example_key.startswith("~s#OPEN\\x00\\x01")
    (pattern,) = plan.access_patterns
    assert pattern.status == "served" and pattern.items_returned == 4 and pattern.rows_touched == 4
    assert not [lint for lint in plan.lints if "access-pattern" in lint.code]
    assert pattern.python and "cannot hold the NUL bytes" in pattern.cbt[0]

    out = io.StringIO()
    render_text(plan, Console(file=out, width=200))
    text = out.getvalue()
    assert "Secondary indexes" in text and "by_status (global, INCLUDE (total), family i)" in text
    assert "4 of 6 mapped item(s) in the index" in text
    markdown = render(plan, "markdown")
    assert "Secondary indexes" in markdown and "4 of 6 items, 20 cells" in markdown


def own_table_spec(name: str, index_table: str | None = None) -> MappingSpec:
    return MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": name, "families": {"d": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "item", "row_key": "{pk}#{sk}", "rest": {"family": "d"}}],
        "indexes": [{**GSI, "projection": {"type": "KEYS_ONLY"}, "target": {"table": index_table or f"{name}.by_status"},
                     "family": "s"}],
    })


def test_the_plan_shows_an_index_in_a_table_of_its_own():
    spec = own_table_spec("t")
    items = [{"pk": {"S": "C1"}, "sk": {"S": "O1"}, "status": {"S": "OPEN"}, "amount": {"N": "3"}}]
    plan = build_plan(spec, items)
    (index,) = plan.indexes
    assert index.table == "t.by_status" and not index.keys.startswith("'")  # no prefix
    assert index.example_key.startswith("OPEN\\x00\\x01")
    out = io.StringIO()
    render_text(plan, Console(file=out, width=200))
    assert "rows of table t.by_status keyed status + amount + pk + sk" in out.getvalue()
    assert "| t.by_status |" in render(plan, "markdown")


def test_the_target_diff_reads_the_index_table_and_migrate_refuses_one_it_cannot_use(bigtable_env, unique_name):
    """migrate-plan's target diff: the index's own table to create, then as the spec wants it; a GC rule that differs
    there blocks migrate, named by the index table."""
    import pytest

    from ddb2bt.app.target_diff import diff_target
    from ddb2bt.cli.plan_text import target_lines
    from ddb2bt.mappers.index_rows import index_targets
    from ddb2bt.mappers.spec import GcPolicy
    from ddb2bt.pipelines.bigtable.sink import SchemaMismatchError, ensure_table, mismatch_error

    spec = own_table_spec(unique_name)
    ((_, index_target),) = index_targets(spec)
    before = "\n".join(target_lines(diff_target(spec.target, indexes=index_targets(spec))))
    assert f"+ index by_status: table {unique_name}.by_status: does not exist; migrate creates it" in before
    assert "+ index by_status: family s: keep at most 1 version (migrate creates it)" in before, before

    ensure_table(spec.target)
    ensure_table(index_target)
    after = diff_target(spec.target, indexes=index_targets(spec))
    assert not after.blocking and "= index by_status: family s: keep at most 1 version" in "\n".join(target_lines(after))
    assert after.state()["index_tables"]["by_status"]["families"] == {"s": "keep at most 1 version"}

    other = f"{unique_name}.other"  # an index table that exists with another GC rule
    ensure_table(index_target.model_copy(update={"table": other, "families": {"s": GcPolicy()}}))
    moved = own_table_spec(unique_name, other)
    refused = diff_target(moved.target, indexes=index_targets(moved))
    assert [change.family for change in refused.blocking] == ["s"]
    assert refused.refused.table == other
    with pytest.raises(SchemaMismatchError, match=other):
        raise mismatch_error(refused.refused, refused.comparison)


def test_the_plan_checks_the_index_key_types_against_describe_table():
    """DynamoDB leaves an item whose index key has another type than the index declares out of the index; the spec's
    `partition_key_type`/`sort_key_type` say which. Against DescribeTable's AttributeDefinitions: a type that
    disagrees is an error (every item of the right type would be left out), one not declared a warning (an item of
    another type would get an index row DynamoDB has not), with the line to add."""
    from ddb2bt.mappers.table import SourceDescription

    source = SourceDescription(table="T", partition_key="pk", sort_key="sk",
                               key_types={"pk": "S", "sk": "S", "status": "S", "amount": "N"})  # fmt: skip
    items = [{"pk": {"S": "C#1"}, "sk": {"S": "O#1"}, "status": {"S": "OPEN"}, "amount": {"N": "3"}}]

    def codes(**types) -> list[tuple[str, str, str]]:
        spec = own_table_spec("t").model_dump(by_alias=True, exclude_none=True)
        spec["indexes"][0].update(types)
        plan = build_plan(MappingSpec.model_validate(spec), items, source)
        return [(lint.severity, lint.where, lint.message) for lint in plan.lints if lint.code.startswith("index-key-type")]

    assert codes(partition_key_type="S", sort_key_type="N") == []
    ((severity, where, message),) = codes(partition_key_type="S")
    assert severity == "warning" and where == "indexes[0].sort_key_type" and "add sort_key_type: N" in message
    ((severity, where, message),) = codes(partition_key_type="S", sort_key_type="S")
    assert severity == "error" and where == "indexes[0].sort_key_type" and "DescribeTable declares N" in message


def test_the_plan_checks_each_index_against_describe_table():
    """An index declared otherwise than DynamoDB has it (its keys, its projection, or no such index) would write
    index rows that answer otherwise than the index: a warning naming what differs (parity then shows the
    difference; a deliberate choice is the user's)."""
    from ddb2bt.mappers.table import IndexDescription, SourceDescription

    items = [{"pk": {"S": "C#1"}, "sk": {"S": "O#1"}, "status": {"S": "OPEN"}, "amount": {"N": "3"}}]

    def found(**described) -> list[tuple[str, str, str]]:
        index = IndexDescription(**{"name": "by_status", "kind": "GSI", "partition_key": "status",
                                    "sort_key": "amount", "projection": "KEYS_ONLY", **described})  # fmt: skip
        source = SourceDescription(table="T", partition_key="pk", sort_key="sk", global_indexes=(index,))
        plan = build_plan(own_table_spec("t"), items, source)
        return [(lint.severity, lint.where, lint.message) for lint in plan.lints if lint.code == "index-differs"]

    assert found() == []
    ((severity, where, message),) = found(projection="ALL")
    assert severity == "warning" and where == "indexes[0]" and "projection KEYS_ONLY, DescribeTable ALL" in message
    ((_, _, message),) = found(sort_key="placed")
    assert "global index with keys status + amount, DescribeTable global with status + placed" in message
    ((_, _, message),) = found(name="other")
    assert "DescribeTable has no index 'by_status'" in message
