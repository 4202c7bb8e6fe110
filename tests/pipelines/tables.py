"""Tables and runs the pipeline tests share: a loaded DynamoDB table, `ddb2bt migrate` in a process of its own, the
kill tests' spec."""

import re
import boto3
import subprocess
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.dynamodb.client import create_table, put_items
from pathlib import Path
from tests.installed import DDB2BT


def load_table(endpoint: str, table: str, items: list[dict]) -> None:
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    create_table(client, table, "pk", "sk")
    put_items(client, table, items)


def dynamodb_calls(monkeypatch) -> list[str]:
    """The names of the DynamoDB operations every client ddb2bt makes from now on calls, in order."""
    from ddb2bt.pipelines.dynamodb import client as dynamodb_client

    calls: list[str] = []
    made = dynamodb_client.aws_client

    def counted(*args, **kwargs):
        client = made(*args, **kwargs)
        client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
        return client

    monkeypatch.setattr(dynamodb_client, "aws_client", counted)
    return calls




def run_through(proxy, spec: MappingSpec, tmp_path: Path) -> dict[str, int]:
    """The migration of ``spec`` in this process (in_memory) with its source reached through ``proxy`` (one of
    ``pipelines.local.proxy``'s); its counters."""
    from ddb2bt.pipelines.bigtable.sink import ensure_table
    from ddb2bt.pipelines.local.proxy import serving
    from ddb2bt.pipelines.pipeline import build_pipeline, query_counters
    from ddb2bt.pipelines.run.local_runner import new_pipeline

    with serving(proxy) as port:
        spec = spec.model_copy(update={"source": spec.source.model_copy(update={"endpoint_url": f"http://127.0.0.1:{port}"})})
        ensure_table(spec.target)
        p = new_pipeline()
        build_pipeline(p, spec, dead_letter=str(tmp_path / "dead.jsonl"), total_segments=spec.source.total_segments,
                       now_ms=0)
        result = p.run()
        result.wait_until_finish()
        return query_counters(result)


def migrate(spec_file: Path, run_dir: Path, *args: str, env: dict, **popen) -> subprocess.Popen:
    """`ddb2bt migrate` in its own process group (so a kill reaches the runner's worker processes too)."""
    return subprocess.Popen([DDB2BT, "migrate", str(spec_file), "--run-dir", str(run_dir), "--yes", *args], env=env,
                            cwd=spec_file.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, **popen)


KILL_ITEMS, KILL_SEGMENTS = 12_000, 10


def kill_spec(table: str, endpoint: str, **extra) -> MappingSpec:
    return MappingSpec.model_validate({
        "source": {"table": table, "endpoint_url": endpoint, "region": "us-east-1", "partition_key": "pk",
                   "sort_key": "sk", "total_segments": KILL_SEGMENTS},
        "target": {"table": table, "families": {"d": None}},
        "entities": [{"name": "thing", "row_key": "{pk}#{sk}", "rest": {"family": "d"}}],
        **extra,
    })


def numbers(pattern: str, text: str) -> tuple[int, ...]:
    """The numbers ``pattern``'s groups find in ``text``, thousands separators and all (`read 8,400 items`)."""
    found = re.search(pattern.replace(r"(\d+)", r"([\d,]+)"), text)
    assert found, f"{pattern!r} not in:\n{text}"
    return tuple(int(group.replace(",", "")) for group in found.groups())
