"""The parity section: how many parity checks a second `ddb2bt parity` runs, against dynalite and the emulator.

``python -m benchmarks.parity_section [--items N] [--rounds R] [--partitions P]`` starts dynalite and the Bigtable
emulator, loads a generated table (numeric sort keys: negatives, decimals, 38 digits; a sparse GSI on (status,
amount) carried as index rows in a table of its own), migrates it, then runs ``check_parity`` R times. Each run tries
every pattern (the six key-condition operators, the whole partition, GetItem, two index queries) on P partitions, as
declared and in the other order, in one request and a page at a time, and with a limit: a *case* is one DynamoDB
query (all its pages) and one Bigtable read, decoded and compared item for item. Figures: cases per second over the
whole command (start-up, DescribeTable and the sample read included) for each run, their spread, and the load
average. Results go to ``benchmarks/results/parity.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import RESULTS, machine

NUMBERS = ["-1E+125", "-12345678901234567890123456789012345678", "-10", "-1.5", "-1", "-0.000001", "0", "1E-130",
           "0.5", "1", "1.5", "9", "10", "99.99", "12345678901234567890123456789012345678", "9.99E+125"]


def items(count: int) -> list[dict[str, Any]]:
    """`count` items over count/20 partitions; every third has a status (sparse GSI) with an amount unique in it."""
    out = []
    for number in range(count):
        partition, position = divmod(number, 20)
        sk = NUMBERS[position % len(NUMBERS)] if position < len(NUMBERS) else f"{position}.{partition}"
        item = {"pk": {"S": f"p{partition}"}, "sk": {"N": sk}, "payload": {"S": f"item {number}"}}
        if number % 3 == 0:
            item["status"] = {"S": ["OPEN", "SHIPPED"][number % 2]}
            item["amount"] = {"N": f"-{number}.5" if number % 4 else str(number)}
        out.append(item)
    return out


def spec_data(table: str, endpoint: str) -> dict[str, Any]:
    by_status = {"name": "by_status", "type": "global", "partition_key": "status", "sort_key": "amount"}
    patterns: list[dict[str, Any]] = [{"name": f"op_{number}", "sort_key": {"operator": operator}}
                                      for number, operator in enumerate(["=", "<", "<=", ">", ">=", "between"])]
    patterns += [{"name": "partition"}, {"name": "get", "operation": "get_item"},
                 {"name": "status", "index": by_status},
                 {"name": "status_newest", "index": by_status, "scan_index_forward": False, "limit": 3}]
    return {
        "source": {"table": table, "endpoint_url": endpoint, "region": "us-east-1"},
        "target": {"table": table, "families": {"d": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [{"name": "item", "row_key": "{pk}#{sk|sortable_number}",
                      "columns": [{"attribute": "payload", "family": "d", "encoding": "utf8"}],
                      "rest": {"family": "d"}}],
        "indexes": [{**by_status, "projection": {"type": "ALL"}, "target": {"table": f"{table}.by_status"},
                     "family": "i"}],
        "access_patterns": patterns,
    }


def measure(count: int, rounds: int, partitions: int) -> dict[str, Any]:
    import boto3

    from ddb2bt.app.migrate import migrate
    from ddb2bt.app.options import RunOptions
    from ddb2bt.app.parity import check_parity
    from ddb2bt.mappers.spec import MappingSpec
    from ddb2bt.pipelines.local import servers as local_servers

    table = "paritybench"
    with local_servers.dynalite() as dynamo, local_servers.bigtable_emulator() as emulator, \
            local_servers.patched_environ(local_servers.emulator_env(emulator.endpoint)), \
            tempfile.TemporaryDirectory() as workdir:  # fmt: skip
        client = boto3.client("dynamodb", endpoint_url=dynamo.endpoint, region_name="us-east-1")
        client.create_table(
            TableName=table, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": name, "AttributeType": kind} for name, kind in
                                  (("pk", "S"), ("sk", "N"), ("status", "S"), ("amount", "N"))],
            GlobalSecondaryIndexes=[{"IndexName": "by_status", "Projection": {"ProjectionType": "ALL"},
                                     "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"},
                                                   {"AttributeName": "amount", "KeyType": "RANGE"}]}])  # fmt: skip
        client.get_waiter("table_exists").wait(TableName=table)
        for item in items(count):
            client.put_item(TableName=table, Item=item)
        spec = MappingSpec.model_validate(spec_data(table, dynamo.endpoint))
        migrated = migrate(spec, RunOptions(run_dir=f"{workdir}/run"))
        assert migrated.ok, migrated.problems
        runs = []
        for number in range(rounds):
            load = os.getloadavg()[0]
            began = time.perf_counter()
            result = check_parity(spec, sample=count, partitions=partitions)
            seconds = time.perf_counter() - began
            report = result.to_json()["reconciliation"]
            assert result.ok and report["cases_tried"] == report["cases_same"], result.to_json()
            runs.append({"round": number + 1, "cases": report["cases_tried"], "seconds": seconds,
                         "cases_per_s": report["cases_tried"] / seconds, "load_before": load})
            print(f"round {number + 1}: {report['cases_tried']} cases in {seconds:.1f} s, "
                  f"{report['cases_tried'] / seconds:.1f}/s (load {load:.1f})", flush=True)
    rates = [run["cases_per_s"] for run in runs]
    return {"items": count, "partitions": partitions, "patterns": len(spec.access_patterns), "runs": runs,
            "cases_per_s_median": statistics.median(rates), "cases_per_s_min": min(rates),
            "cases_per_s_max": max(rates), "load_average": os.getloadavg(), "machine": machine()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args()
    result = measure(args.items, args.rounds, args.partitions)
    Path(RESULTS).mkdir(parents=True, exist_ok=True)
    (Path(RESULTS) / "parity.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({key: value for key, value in result.items() if key != "machine"}, indent=1))


if __name__ == "__main__":
    main()
