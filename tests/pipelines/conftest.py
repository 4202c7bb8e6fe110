"""Fixtures of the pipeline tests."""

import uuid

import boto3
import pytest

from ddb2bt.pipelines.local import servers as local_servers
from ddb2bt.pipelines.dynamodb.client import create_table, put_items

from .tables import KILL_ITEMS, kill_spec


@pytest.fixture(scope="module")
def kill_source(dynalite):
    """One DynamoDB table of KILL_ITEMS items, loaded once for the kill tests."""
    table = f"k{uuid.uuid4().hex[:12]}"
    items = [{"pk": {"S": f"p{i % 97}"}, "sk": {"S": f"i{i:06d}"}, "n": {"N": str(i)},
              "text": {"S": f"item {i} " + "x" * 150}} for i in range(KILL_ITEMS)]
    with local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
        client = boto3.client("dynamodb", endpoint_url=dynalite.endpoint, region_name="us-east-1")
        create_table(client, table, "pk", "sk")
        put_items(client, table, items)
    return dynalite.endpoint, table, items


@pytest.fixture(scope="module")
def servers(bigtable_emulator, moto_server):
    """moto_server, with this module's google-cloud-bigtable clients pointed at the emulator (a hypothesis test takes
    no function-scoped fixture): the round-trip properties' servers."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in local_servers.emulator_env(bigtable_emulator.endpoint).items():
            patch.setenv(key, value)
        yield moto_server


@pytest.fixture
def small_source(dynalite, unique_name):
    """300 items in two scan segments, with the spec that migrates them: (dynalite, spec, items), for the tests of
    a misbehaving source (tests/pipelines/test_faults.py, test_http_faults.py)."""
    items = [{"pk": {"S": f"p{i % 7}"}, "sk": {"S": f"i{i:04d}"}, "b": {"B": bytes([i % 256]) * 3},
              "n": {"N": str(i)}} for i in range(300)]
    client = boto3.client("dynamodb", endpoint_url=dynalite.endpoint, region_name="us-east-1")
    create_table(client, unique_name, "pk", "sk")
    put_items(client, unique_name, items)
    spec = kill_spec(unique_name, dynalite.endpoint, migration_time="2024-01-01T00:00:00Z")
    return dynalite, spec.model_copy(update={"source": spec.source.model_copy(update={"total_segments": 2})}), items
