"""A backfill and incremental exports over a simulated change log: what the catch-up tests share."""

import random
from ddb2bt.pipelines.cutover.workload import make_spec, random_item, random_keys
from .export_fixtures import EXPORT_TIME, write_export
from ddb2bt.pipelines.dynamodb.export_writer import compact, write_incremental_export
from ddb2bt.app.migrate import migrate
from ddb2bt.app.options import RunOptions
from ddb2bt.mappers.changes import Change, kind_of_change
from ddb2bt.pipelines.cutover.timeline import iso_to_us


T0 = iso_to_us(EXPORT_TIME)


HOUR = 3_600_000_000


def simulate(rng: random.Random, table: dict, steps: int, start_us: int, end_us: int, posts: int = 6) -> list[Change]:
    """Random puts (new items, changed attributes and timestamps, switched entities) and deletes on ``table``."""
    log = []
    for step in range(steps):
        pk, sk = random_keys(rng, posts)
        key = (pk, sk)
        old = table.get(key)
        new = None if old is not None and rng.random() < 0.25 else random_item(rng, pk, sk)
        if old is None and new is None:
            continue
        time_us = start_us + (end_us - start_us) * step // steps
        time_us -= time_us % 1000
        if new is None:
            del table[key]
        else:
            table[key] = new
        log.append(Change({"pk": {"S": pk}, "sk": {"S": sk}}, old, new, kind_of_change(old, new), time_us))
    return log


def backfill(tmp_path, name: str, items: list[dict]):
    export_dir = write_export(tmp_path / "full", items, files=2, table=name)
    spec = make_spec(name, export={"path": export_dir})
    result = migrate(spec, RunOptions(run_dir=str(tmp_path / "run")))
    assert result.counters["items_read"] == len(items)
    return spec


def incremental(tmp_path, log, start_us, end_us, name: str, **kwargs) -> str:
    records = compact(log, start_us, end_us, ("pk", "sk"))
    return write_incremental_export(tmp_path / f"inc-{start_us}", records, start_us, end_us, table=name, **kwargs)
