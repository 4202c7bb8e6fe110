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
