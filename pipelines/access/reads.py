"""The two reads `parity` compares: a pattern as DynamoDB answers it (GetItem, or Query page by page) and its
translation as Bigtable answers it (ReadRows with the translated keys, ranges, filter and limit)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ...mappers.gc import GcView
from ...mappers.results import Cell

if TYPE_CHECKING:
    from ...mappers.access import BigtableRead
    from ...mappers.spec import AccessPattern, TargetSpec


def dynamodb_items(client: Any, table: str, pattern: AccessPattern, keys: tuple[str, str | None], partition: dict,
                   operands: list[dict], page_size: int | None = None) -> list[dict]:  # fmt: skip
    """The items the pattern returns: GetItem, or a Query paginated with `page_size` items a page until `limit`."""
    pk, sk = keys
    names = {"#pk": pk}
    values: dict[str, dict] = {":pk": partition}
    extra: dict[str, Any] = {}
    if pattern.projection:
        projected = {f"#p{i}": name for i, name in enumerate(pattern.projection)}
        names_for_projection = dict(projected)
        extra["ProjectionExpression"] = ", ".join(projected)
    else:
        names_for_projection = {}
    if pattern.operation == "get_item":
        key = {pk: partition} | ({sk: operands[0]} if sk else {})
        if names_for_projection:
            extra["ExpressionAttributeNames"] = names_for_projection
        found = client.get_item(TableName=table, Key=key, ConsistentRead=True, **extra).get("Item")
        return [found] if found else []
    condition = "#pk = :pk"
    if pattern.sort_key is not None:
        from ...mappers.access import operand_value

        names["#sk"] = sk or ""
        operator = pattern.sort_key.operator
        operands = [operand_value(v) for v in pattern.sort_key.values] or operands  # fixed in the spec, else given
        values[":a"] = operands[0]
        if operator == "between":
            values[":b"] = operands[1]
            condition += " AND #sk BETWEEN :a AND :b"
        elif operator == "begins_with":
            condition += " AND begins_with(#sk, :a)"
        else:
            condition += f" AND #sk {operator} :a"
    request: dict[str, Any] = {
        "TableName": table, "KeyConditionExpression": condition, "ExpressionAttributeNames": names | names_for_projection,
        "ExpressionAttributeValues": values, "ScanIndexForward": pattern.scan_index_forward, **extra,
    }  # fmt: skip
    if pattern.index is not None:
        request["IndexName"] = pattern.index.name
    else:
        request["ConsistentRead"] = True
    out: list[dict] = []
    while True:
        want = [n for n in (page_size, pattern.limit and pattern.limit - len(out)) if n]
        if want:
            request["Limit"] = min(want)
        page = client.query(**request)
        out.extend(page.get("Items", []))
        start = page.get("LastEvaluatedKey")
        if not start or (pattern.limit and len(out) >= pattern.limit):
            return out[: pattern.limit] if pattern.limit else out
        request["ExclusiveStartKey"] = start


class BigtableReader:
    """A data client on the target table; `rows(read)` answers a translated read. Close it (or use ``with``)."""

    def __init__(self, target: TargetSpec):
        from google.cloud.bigtable.data import BigtableDataClient

        self._client = BigtableDataClient(project=target.project)
        self._target = target
        self.table = self._client.get_table(target.instance, target.table, app_profile_id=target.app_profile)
        self._tables = {target.table: self.table}

    def _table(self, name: str) -> Any:
        """The table a read names: the target's, or an index's own (same instance and app profile)."""
        if name not in self._tables:
            self._tables[name] = self._client.get_table(self._target.instance, name,
                                                        app_profile_id=self._target.app_profile)
        return self._tables[name]

    def rows(self, read: BigtableRead) -> list[tuple[bytes, list[Cell]]]:
        from google.cloud.bigtable.data import ReadRowsQuery, RowRange, row_filters

        if read.empty:
            return []
        row_filter: Any = None
        if read.cell_filter is not None:
            f = read.cell_filter
            row_filter = row_filters.ColumnRangeFilter(f.family, f.qualifier, f.qualifier)
            if f.cells:
                row_filter = row_filters.RowFilterChain([row_filter, row_filters.CellsColumnLimitFilter(f.cells)])
        query = ReadRowsQuery(
            row_keys=list(read.row_keys),
            row_ranges=[RowRange(r.start, r.end or None, r.start_inclusive, r.end_inclusive) for r in read.ranges],
            limit=read.rows_limit, row_filter=row_filter,
        )  # fmt: skip
        visible = GcView(self._target.families, time.time_ns() // 1000)  # what GC condemns, not yet collected
        rows = [(row.row_key, visible([Cell(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells]))
                for row in self._table(read.table).read_rows(query)]  # fmt: skip
        if read.reverse_rows:
            rows.reverse()
        if read.keep_rows:
            rows = rows[: read.keep_rows]
        return rows

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> BigtableReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
