"""Secondary indexes as index rows, against real servers: a single-table design with a GSI (numeric sort key:
negatives, decimals, 38 digits; several items per index key; sparse) and a KEYS_ONLY GSI without a sort key, on
dynalite; `migrate` writes the index rows (exactly those of the mapper, counted apart from the items), and
`ddb2bt parity` runs the index patterns on dynalite and, translated, on the index rows: same items, same order."""

from __future__ import annotations


import json

import boto3
import pytest

from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.app.parity import check_parity
from ddb2bt.app.validate import validate
from ddb2bt.mappers.access import translate
from ddb2bt.mappers.analysis.access_plan import decode_rows, example_cases, pattern_plans
from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.decode import compile_decoder
from ddb2bt.mappers.results import Cell
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.mappers.validate.records import bytes_from_json
from ddb2bt.pipelines.cutover.parity import Parity, compare
from ddb2bt.pipelines.access.reads import dynamodb_items
from ddb2bt.pipelines.run.local_runner import new_pipeline

from .cells import drop_rows, expected_cells, read_cells

NUMBERS = ["-1e125", "-12.5", "-1", "-0.001", "0", "0.001", "1", "1.5", "10", "12345678901234567890123456789012345678",
           "9.99e125"]


def single_table_items() -> list[dict]:
    items = []
    for customer in range(3):
        pk = {"S": f"CUSTOMER#{customer}"}
        items.append({"pk": pk, "sk": {"S": "PROFILE"}, "type": {"S": "customer"}, "name": {"S": f"Ann {customer}"}})
        for order in range(8):
            item = {"pk": pk, "sk": {"S": f"ORDER#{order:03}"}, "type": {"S": "order"}, "total": {"N": str(order)}}
            if order % 4 != 3:  # sparse: some orders have no status
                item["status"] = {"S": ["OPEN", "SHIPPED", "OPEN"][order % 4]}
                item["amount"] = {"N": NUMBERS[(customer * 8 + order) % len(NUMBERS)]}  # ties across customers
            items.append(item)
    return items


def create_table(client, name: str) -> None:
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": t} for a, t in
                              (("pk", "S"), ("sk", "S"), ("status", "S"), ("amount", "N"), ("type", "S"))],
        GlobalSecondaryIndexes=[
            {"IndexName": "by_status", "Projection": {"ProjectionType": "ALL"},
             "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"}, {"AttributeName": "amount", "KeyType": "RANGE"}]},
            {"IndexName": "by_type", "Projection": {"ProjectionType": "KEYS_ONLY"},
             "KeySchema": [{"AttributeName": "type", "KeyType": "HASH"}]},
        ])  # fmt: skip
    client.get_waiter("table_exists").wait(TableName=name)


def index_spec(name: str, endpoint: str, where: str = "prefix") -> MappingSpec:
    """by_status under a prefix of the main table, or (`where` "table") in a table of its own; by_type under a prefix."""
    by_status = {"name": "by_status", "type": "global", "partition_key": "status", "sort_key": "amount"}
    by_type = {"name": "by_type", "type": "global", "partition_key": "type"}
    patterns = [{"name": f"status_{i}", "index": by_status, "sort_key": {"operator": op}}
                for i, op in enumerate(["=", "<", "<=", ">", ">=", "between"])]
    patterns += [{"name": "status", "index": by_status}, {"name": "newest", "index": by_status,
                                                          "scan_index_forward": False, "limit": 3}]
    # (no pattern on by_type: DynamoDB does not specify the order of items with equal index keys, and dynalite's
    # differs from the table-key order index rows keep; see docs/ACCESS_PATTERNS.md#index-rows)
    return MappingSpec.model_validate({
        "source": {"table": name, "endpoint_url": endpoint, "region": "us-east-1"},
        "target": {"table": name, "families": {"d": {"max_versions": 1}, "i": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "item", "row_key": {"template": "{pk}#{sk}", "on_delimiter": "escape"}, "rest": {"family": "d"}}],
        "indexes": [{**by_status, "projection": {"type": "ALL"}, "family": "i",
                     "target": {"prefix": "~by_status#"} if where == "prefix" else {"table": f"{name}.by_status"}},
                    {**by_type, "projection": {"type": "KEYS_ONLY"}, "target": {"prefix": "~by_type#"}, "family": "i"}],
        "access_patterns": patterns,
    })


def migrated(dynalite, name: str, tmp_path, where: str = "prefix") -> tuple:
    """The single-table items loaded into a dynalite table with both GSIs, migrated: (client, items, spec, result)."""
    client = boto3.client("dynamodb", endpoint_url=dynalite.endpoint, region_name="us-east-1")
    create_table(client, name)
    items = single_table_items()
    for item in items:
        client.put_item(TableName=name, Item=item)
    spec = index_spec(name, dynalite.endpoint, where)
    result = migrate(spec, RunOptions(run_dir=str(tmp_path / "run"), total_segments=2))
    assert result.ok, result.problems
    return client, items, spec, result


@pytest.mark.parametrize("where", ["prefix", "table"])
def test_migrate_writes_index_rows_and_index_patterns_have_parity(bigtable_env, dynalite, unique_name, tmp_path, where):
    client, items, spec, result = migrated(dynalite, unique_name, tmp_path, where)
    keyed = spec.with_keys("pk", "sk")
    assert read_cells(spec.target) == expected_cells(keyed, items)
    in_status = sum("status" in item for item in items)
    assert result.counters["rows_written"] == len(items)  # items, as the reconciliation counts them
    assert result.counters["index_rows_written"] == in_status + len(items)
    index_keys = [key for key in read_cells(spec.target) if key.startswith(b"~")]
    assert len(index_keys) == (in_status if where == "prefix" else 0) + len(items)
    if where == "table":  # by_status's rows in its own table, exactly the mapper's
        own = spec.target.model_copy(update={"table": f"{unique_name}.by_status"})
        assert read_cells(own) == expected_cells(keyed, items, table=own.table)
        assert len(read_cells(own)) == in_status

    parity = check_parity(spec, sample=1000, partitions=3)
    report = parity.to_json()
    assert parity.ok, json.dumps([p for p in report["patterns"] if p.get("differences")])[:3000]
    assert report["reconciliation"]["patterns_compared"] == len(spec.access_patterns)
    assert report["reconciliation"]["cases_tried"] == report["reconciliation"]["cases_same"] > 50

    # migrate-plan's snippet for each index pattern, executed as a user would paste it: DynamoDB's items
    types = {"pk": "S", "sk": "S", "status": "S", "amount": "N"}
    decoder = compile_decoder(keyed, types)
    compiled = compile_spec(keyed)
    plans, _ = pattern_plans(keyed, items, [compiled.map_item(i) for i in items], decoder, types)
    for plan, pattern in zip(plans, keyed.access_patterns):
        translation = translate(keyed, pattern, types)
        ((partition, operands),) = example_cases(translation, items)
        namespace: dict = {}
        exec(plan.python, namespace)  # noqa: S102 - the generated snippet is what the test checks
        rows = [(row.row_key, [Cell(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells])
                for row in namespace["rows"]]
        want = dynamodb_items(client, unique_name, pattern, ("status", "amount"), partition, operands)
        assert want, plan.name
        assert translation.finish(decode_rows(decoder, rows, translation.index_rows), partition, operands) == want


@pytest.mark.parametrize("where", ["prefix", "table"])
def test_validate_checks_index_rows_like_any_other_rows(bigtable_env, dynalite, unique_name, tmp_path, where):
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell

    client, items, spec, _result = migrated(dynalite, unique_name, tmp_path, where)
    status_target = spec.target if where == "prefix" else spec.target.model_copy(update={"table": f"{unique_name}.by_status"})
    clean = validate(spec, RunOptions(run_dir=str(tmp_path / "clean"), total_segments=2))
    assert clean.ok, (clean.counts, clean.problems, clean.first)
    assert clean.totals["items_compared"] == len(items)
    assert clean.totals["index_rows_compared"] == len(items) + sum("status" in item for item in items)

    good, good_status = read_cells(spec.target), read_cells(status_target)
    status_rows = sorted(key for key in good_status if key.startswith(b"~by_status#") or where == "table")
    type_rows = sorted(key for key in good if key.startswith(b"~by_type#"))
    with BigtableDataClient(project=spec.target.project) as bt:
        timestamp = good_status[status_rows[0]][0][2]
        bt.get_table(spec.target.instance, status_target.table).bulk_mutate_rows([
            RowMutationEntry(status_rows[0], [SetCell("i", b"name", b'{"S":"wrong"}', timestamp)])])  # an extra cell
    # two index rows missing, dropped (not emptied: the repair writes them again, and the emulator may lose a write
    # into an emptied row)
    drop_rows(status_target, [status_rows[1]])
    drop_rows(spec.target, [type_rows[0]])
    # cutover-status's spot check compares an item's index rows too
    keyed = spec.with_keys("pk", "sk")
    keys = [{"pk": item["pk"], "sk": item["sk"]} for item in items]
    spot = Parity()
    differing = compare(client, unique_name, compile_spec(keyed), spec.target, keys, spot)
    assert spot.matching == len(items) - 2 and len(differing) == 2  # the extra cell is no missing one
    assert all(found["missing"] and found["row_key"] not in (type_rows[0], status_rows[1]) for found in differing)

    tampered = validate(spec, RunOptions(run_dir=str(tmp_path / "tampered"), total_segments=2), target_scan=True)
    assert not tampered.ok
    assert tampered.counts.get("missing_row") == 2, tampered.counts
    assert tampered.counts.get("extra_cell") == 1, tampered.counts
    repaired = validate(spec, RunOptions(run_dir=str(tmp_path / "repair"), total_segments=2), repair=True,
                        target_scan=True)
    assert repaired.finished and not repaired.problems, repaired.problems
    assert read_cells(spec.target) == good
    assert read_cells(status_target) == good_status  # the missing index row written back, the extra cell deleted
    again = validate(spec, RunOptions(run_dir=str(tmp_path / "again"), total_segments=2))
    assert again.counts.get("missing_row") is None and again.counts.get("missing_cell") is None, again.counts


@pytest.mark.parametrize("where", ["prefix", "table"])
def test_the_target_scan_finds_and_repairs_stray_index_rows(bigtable_env, dynalite, unique_name, tmp_path, where):
    """Index rows no item maps to (an item's old index key left behind, a row written by hand), in an index table
    and under an index prefix, are extra rows naming their index; correct index rows never are."""
    from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell

    _client, items, spec, _result = migrated(dynalite, unique_name, tmp_path, where)
    status_target = spec.target if where == "prefix" else spec.target.model_copy(update={"table": f"{unique_name}.by_status"})
    clean = validate(spec, RunOptions(run_dir=str(tmp_path / "clean"), total_segments=2), target_scan=True)
    assert clean.ok and not clean.counts, (clean.counts, clean.problems, clean.first)
    assert clean.counters["target_rows_scanned"] == len(read_cells(spec.target)) + (
        len(read_cells(status_target)) if where == "table" else 0)  # every table's rows were listed

    good, good_status = read_cells(spec.target), read_cells(status_target)
    status_rows = sorted(key for key in good_status if key.startswith(b"~by_status#") or where == "table")
    assert b"OPEN" in status_rows[0]
    moved = status_rows[0].replace(b"OPEN", b"CLOSED")  # the item's index key was OPEN before, say: its old row left
    by_hand = b"~by_type#written-by-hand"
    assert moved not in good_status and by_hand not in good
    with BigtableDataClient(project=spec.target.project) as bt:
        bt.get_table(spec.target.instance, status_target.table).bulk_mutate_rows([RowMutationEntry(
            moved, [SetCell(family, qualifier, value, ts) for family, qualifier, ts, value in good_status[status_rows[0]]])])
        bt.get_table(spec.target.instance, spec.target.table).bulk_mutate_rows([
            RowMutationEntry(by_hand, [SetCell("i", b"pk", b'{"S":"x"}', 1_000_000)])])
    strays = {moved: "by_status", by_hand: "by_type"}

    def extra_rows(result) -> dict:
        lines = [json.loads(line) for line in open(result.prepared.run_dir + "/differences.jsonl")]
        return {bytes_from_json(line["row_key"]): line.get("index") for line in lines if line["kind"] == "extra_row"}

    without = validate(spec, RunOptions(run_dir=str(tmp_path / "no-scan"), total_segments=2))
    assert without.ok  # what only the target scan can see
    found = validate(spec, RunOptions(run_dir=str(tmp_path / "found"), total_segments=2), target_scan=True)
    assert not found.ok and found.counts == {"extra_row": 2}, (found.counts, found.problems)
    assert extra_rows(found) == strays
    assert read_cells(status_target)[moved] and read_cells(spec.target)[by_hand]  # nothing written without --repair

    repaired = validate(spec, RunOptions(run_dir=str(tmp_path / "repair"), total_segments=2), repair=True,
                        target_scan=True)
    assert repaired.finished and not repaired.problems, repaired.problems
    assert extra_rows(repaired) == strays
    assert repaired.counters["cells_deleted"] == len(good_status[status_rows[0]]) + 1
    assert read_cells(spec.target) == good  # only the stray rows gone, every other cell as it was
    assert read_cells(status_target) == good_status
    again = validate(spec, RunOptions(run_dir=str(tmp_path / "again"), total_segments=2), target_scan=True)
    assert again.ok and not again.counts, again.counts


@pytest.mark.parametrize("target_scan", [False, True])
def test_validate_refuses_a_missing_index_table_before_anything_is_read(bigtable_env, dynalite, unique_name, tmp_path,
                                                                         target_scan):
    """An index's own table gone: validate says which index and table, the fix, and starts nothing (no run folder)."""
    from google.cloud.bigtable import Client

    from ddb2bt.mappers.errors import UsageError

    _client, _items, spec, _result = migrated(dynalite, unique_name, tmp_path, "table")
    Client(project=spec.target.project, admin=True).instance(spec.target.instance).table(
        f"{unique_name}.by_status").delete()
    run_dir = tmp_path / "validate"
    with pytest.raises(UsageError) as refused:
        validate(spec, RunOptions(run_dir=str(run_dir), total_segments=2), target_scan=target_scan)
    assert str(refused.value).startswith(f"index 'by_status': Bigtable table '{unique_name}.by_status' does not exist")
    assert "migrate first (it creates the index tables)" in str(refused.value) and "\n" not in str(refused.value)
    assert not run_dir.exists()


def test_an_item_whose_index_row_bigtable_refuses_is_one_dead_letter_and_counts_as_no_row(bigtable_env, unique_name,
                                                                                         tmp_path):
    import apache_beam as beam

    from ddb2bt.mappers.results import IndexRow, MappedRow
    from ddb2bt.mappers.spec import TargetSpec
    from ddb2bt.pipelines.bigtable.sink import WriteToBigtable, ensure_table
    from ddb2bt.pipelines.pipeline import query_counters

    target = TargetSpec(table=unique_name, families={"f": None})  # no family "nope": Bigtable refuses it for good
    ensure_table(target)

    def item_rows(name: str, index_family: str) -> tuple:
        index_row = IndexRow(b"~i#" + name.encode(), (Cell(index_family, b"pk", 1000, b'{"S":"x"}'),), "i")
        return MappedRow(name.encode(), (Cell("f", b"v", 1000, b"1"),), "thing", (), (index_row,)), {"pk": {"S": name}}

    pairs = [item_rows("a", "f"), item_rows("b", "nope"), item_rows("c", "f")]
    p = new_pipeline()
    letters = p | beam.Create([pairs]) | WriteToBigtable(target)
    _ = letters | beam.Map(lambda letter: (letter.item, letter.reason)) | beam.io.WriteToText(str(tmp_path / "letters"))
    result = p.run()
    result.wait_until_finish()
    counters = query_counters(result)
    assert (counters["rows_written"], counters["index_rows_written"], counters["write_failures"]) == (2, 2, 1)
    found = [line for path in tmp_path.glob("letters*") for line in path.read_text().splitlines()]
    assert len(found) == 1 and "{'S': 'b'}" in found[0] and "index" in found[0] and "~i#b" in found[0]
    cells = read_cells(target)
    assert b"~i#b" not in cells and {b"a", b"c", b"~i#a", b"~i#c"} <= set(cells)  # b's row: rewritten by a redrive
