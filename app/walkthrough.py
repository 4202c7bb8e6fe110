"""docs/CUTOVER.md's worked example, the DynamoDB side: what AWS and the application would do, done on the local servers.

``ddb2bt local walkthrough STEP`` after ``eval "$(ddb2bt local up)"``:

* ``create``: a table with a NEW_AND_OLD_IMAGES stream and 60 posts and comments (15 posts, each its own item and
  three comments; every key once);
* ``full-export``: a full export of the table as it is now (what ExportTableToPointInTime writes, in AWS's layout) in
  DIR/full, and the spec that migrates from it in DIR/spec.json;
* ``changes``: 80 random puts, attribute removals and deletes on those keys (the application keeps writing);
* ``incremental-export``: an incremental export of the window [the full export's time, now), made from the stream's
  records (what an incremental export of that window holds), in DIR/inc.

Every step refuses a DynamoDB that is not local: it creates and changes a table. Nothing here prints.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

from ..mappers.errors import UsageError
from ..mappers.units import iso_to_micros, micros_to_iso
from ..pipelines.cutover import workload

POSTS = 15
"""Post ids of the walkthrough's table: 15 × (the post and 3 comments) = 60 items."""
CHANGES = 80
DEFAULT_TABLE = "posts"
DEFAULT_DIR = Path("out/cutover")
STEPS = ("create", "full-export", "changes", "incremental-export")
START = 'start the local servers and point this shell at them first: eval "$(ddb2bt local up)"'


@dataclass(frozen=True)
class StepResult:
    step: str
    table: str
    items: int
    """The items the table holds after the step."""
    export_dir: str | None = None
    spec: str | None = None
    start_us: int | None = None
    """The export's time (full) or its window's start (incremental)."""
    end_us: int | None = None
    records: int | None = None
    """Changed items in an incremental export."""


def run_step(step: str, table: str = DEFAULT_TABLE, folder: Path = DEFAULT_DIR,
             rng: random.Random | None = None) -> StepResult:
    if step not in STEPS:
        raise UsageError(f"unknown walkthrough step {step!r}", f"choose one of {', '.join(STEPS)}")
    endpoint = local_endpoint()
    rng = rng or random.Random(time.time_ns())
    folder.mkdir(parents=True, exist_ok=True)
    client = workload.dynamodb()
    if step == "create":
        return _create(client, table, rng)
    _require_table(client, table)
    if step == "full-export":
        return _full_export(client, table, folder)
    if step == "changes":
        workload.workload(client, table, rng, CHANGES, posts=POSTS)
        return StepResult(step, table, len(workload.table_items(client, table)), records=CHANGES)
    return _incremental_export(client, endpoint, table, folder)


def local_endpoint() -> str:
    """The DynamoDB endpoint the shell points at (``AWS_ENDPOINT_URL_DYNAMODB``, ...), refused unless it is local."""
    import boto3

    from ..pipelines.dynamodb.aws import dynamodb_endpoint, is_local

    endpoint = dynamodb_endpoint(boto3.session.Session(region_name=workload.REGION), None)
    if not is_local(endpoint):
        raise UsageError(f"the walkthrough creates and changes a DynamoDB table, and this shell's DynamoDB is "
                         f"{endpoint or 'AWS'}, not a local one", START)
    return endpoint


def _create(client, table: str, rng: random.Random) -> StepResult:
    from botocore.exceptions import ClientError

    try:
        workload.create_streamed_table(None, table)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "ResourceInUseException":
            raise UsageError(f"table {table!r} exists already",
                             "choose another --table, or start afresh: ddb2bt local down; ddb2bt local up") from None
        raise
    for pk, sk in workload.every_key(POSTS):
        client.put_item(TableName=table, Item=workload.random_item(rng, pk, sk))
    return StepResult("create", table, len(workload.table_items(client, table)))


def _require_table(client, table: str) -> None:
    from botocore.exceptions import ClientError

    try:
        client.describe_table(TableName=table)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise UsageError(f"table {table!r} does not exist",
                             f"make it first: ddb2bt local walkthrough create --table {table}") from None
        raise


def _empty(path: Path, option: str) -> None:
    if path.exists() and any(path.iterdir()):
        raise UsageError(f"{path} holds an export already (the walkthrough writes one per folder)",
                         f"choose another {option}")


def _now_ms_us() -> int:
    """Now in microseconds, on a whole millisecond (export times are), and strictly before any later write."""
    micros = time.time_ns() // 1000
    micros -= micros % 1000
    time.sleep(0.01)
    return micros


def _full_export(client, table: str, folder: Path) -> StepResult:
    from ..pipelines.dynamodb.export_writer import write_export

    _empty(folder / "full", "--dir")
    micros = _now_ms_us()
    items = workload.table_items(client, table)
    export_id = f"{micros // 1000:014d}-{hashlib.sha1(table.encode()).hexdigest()[:8]}"
    export_dir = write_export(folder / "full", items, files=2, table=table, export_time=micros_to_iso(micros),
                              export_id=export_id)
    spec = workload.make_spec(table, export={"path": export_dir})
    spec_path = folder / "spec.json"
    spec_path.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True), indent=2) + "\n", encoding="utf-8")
    return StepResult("full-export", table, len(items), export_dir=export_dir, spec=str(spec_path), start_us=micros)


def _incremental_export(client, endpoint: str, table: str, folder: Path) -> StepResult:
    from ..pipelines.dynamodb.export_writer import compact, write_incremental_export

    summaries = sorted((folder / "full").rglob("manifest-summary.json"))
    if not summaries:
        raise UsageError(f"no full export in {folder / 'full'}",
                         f"make it first: ddb2bt local walkthrough full-export --table {table} --dir {folder}")
    _empty(folder / "inc", "--dir")
    start = iso_to_micros(json.loads(summaries[0].read_text(encoding="utf-8"))["exportTime"])
    end = _now_ms_us()
    records = compact(workload.stream_changes(endpoint, table), start, end, ("pk", "sk"))
    export_dir = write_incremental_export(folder / "inc", records, start, end, table=table)
    return StepResult("incremental-export", table, len(workload.table_items(client, table)), export_dir=export_dir,
                      start_us=start, end_us=end, records=len(records))
