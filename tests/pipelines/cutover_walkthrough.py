"""The DynamoDB side of docs/CUTOVER.md's local walkthrough: what AWS would do, done on the local servers.

``python -m tests.pipelines.cutover_walkthrough STEP --endpoint URL --table NAME --dir DIR`` with STEP:

* ``create``: a table with a NEW_AND_OLD_IMAGES stream and 60 posts/comments (the spec in DIR/spec.json);
* ``full-export``: a full export of the table as it is now (what ExportTableToPointInTime writes), in DIR/full;
* ``changes``: 80 random puts, attribute removals and deletes (the application keeps writing);
* ``incremental-export``: an incremental export from the full export's time to now, written from the
  stream's records (what an incremental export of that window holds), in DIR/inc.

Each step prints what it made. tests/pipelines/test_cutover_walkthrough.py runs the walkthrough as documented.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import boto3

from ddb2bt.pipelines.timeline import iso_to_us, us_to_iso

from .cutover_workload import make_spec, random_item, random_keys
from .export_fixtures import write_export
from ddb2bt.pipelines.export_writer import compact, write_incremental_export
from .streams import stream_changes
from .streams import create_streamed_table, table_items, workload


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.pipelines.cutover_walkthrough")
    parser.add_argument("step", choices=("create", "full-export", "changes", "incremental-export"))
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--table", default="posts")
    parser.add_argument("--dir", default="out/cutover")
    args = parser.parse_args(argv)
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    client = boto3.client("dynamodb", endpoint_url=args.endpoint, region_name="us-east-1")
    rng = random.Random(time.time_ns())
    if args.step == "create":
        create_streamed_table(args.endpoint, args.table)
        for _ in range(60):
            client.put_item(TableName=args.table, Item=random_item(rng, *random_keys(rng, 10)))
        print(f"table {args.table}: {len(table_items(client, args.table))} items, stream NEW_AND_OLD_IMAGES")
    elif args.step == "full-export":
        micros = int(time.time() * 1_000_000)
        micros -= micros % 1000
        time.sleep(0.01)
        export_dir = write_export(folder / "full", table_items(client, args.table), files=2, table=args.table)
        summary = next((folder / "full").rglob("manifest-summary.json"))
        summary.write_text(json.dumps({**json.loads(summary.read_text()), "exportTime": us_to_iso(micros)}))
        spec = make_spec(args.table, endpoint_url=args.endpoint, export={"path": export_dir})
        (folder / "spec.json").write_text(json.dumps(spec.model_dump(mode="json", by_alias=True), indent=2))
        print(f"full export at {us_to_iso(micros)}: {export_dir}; spec: {folder / 'spec.json'}")
    elif args.step == "changes":
        workload(client, args.table, rng, 80, posts=10)
        print(f"80 changes; the table now holds {len(table_items(client, args.table))} items")
    else:
        summary = next((folder / "full").rglob("manifest-summary.json"))
        start = iso_to_us(json.loads(summary.read_text())["exportTime"])
        time.sleep(0.01)
        end = int(time.time() * 1_000_000)
        end -= end % 1000
        records = compact(stream_changes(args.endpoint, args.table), start, end, ("pk", "sk"))
        export_dir = write_incremental_export(folder / "inc", records, start, end, table=args.table)
        print(f"incremental export {us_to_iso(start)} .. {us_to_iso(end)}: {len(records)} changed items: {export_dir}")


if __name__ == "__main__":
    main()
