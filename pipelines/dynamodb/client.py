"""The DynamoDB low-level client and what the migration needs to know about the source table.

Items are read with the *low-level* client so they stay in wire format (``{"N": "1.50"}``): the
resource API would deserialize numbers and lose the exact text. Settings are a small frozen
dataclass rather than a client, because Beam pickles DoFns and a boto3 client is neither
picklable nor thread-safe to share across processes; each worker builds its own in ``setup``.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError

from ...mappers.table import SourceDescription
from . import wire_json
from .aws import aws_client

log = logging.getLogger(__name__)

RetryMode = Literal["adaptive", "standard", "legacy"]


@dataclass(frozen=True)
class ClientSettings:
    """Everything needed to build a DynamoDB client on a worker; never holds credentials.

    Credentials come from the usual AWS chain (env, profile, instance role) on each worker, so
    nothing secret is pickled into the pipeline graph or written to logs.
    """

    region: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    role_arn: str | None = None
    """An AWS role assumed with this machine's Google identity (:mod:`.aws_web_identity`), renewed by botocore."""
    retry_mode: RetryMode = "adaptive"
    """adaptive adds client-side rate limiting on throttles, which suits a long bulk scan."""
    max_attempts: int = 5
    """Attempts per request inside botocore, the first one included (``total_max_attempts``: botocore's
    own ``max_attempts`` key counts retries only). The scan asks for fewer (``RetryPolicy.botocore_attempts``):
    botocore retries silently, the scan's own retry reports every retry and gives up after a deadline.
    With the timeouts below, one call against a server that accepts and never answers ends within
    5 x (5 + 20) s plus backoff, about two minutes; a refused connection within seconds."""
    max_pool_connections: int = 16
    connect_timeout: float = 5.0
    read_timeout: float = 20.0
    """Seconds to wait for an answer (botocore's default is 60); a 1 MB Scan page takes well under one."""

    @classmethod
    def from_source(cls, source: Any, **overrides: Any) -> ClientSettings:
        """Settings from a ``SourceSpec`` (or anything with region/endpoint_url/profile attributes)."""
        values: dict[str, Any] = {name: getattr(source, name, None) for name in ("region", "endpoint_url", "profile", "role_arn")}
        values.update(overrides)
        return cls(**values)


def make_client(settings: ClientSettings) -> Any:
    """A low-level ``dynamodb`` client with botocore's retry mode configured (endpoints: :mod:`.aws`)."""
    config = Config(
        retries={"mode": settings.retry_mode, "total_max_attempts": settings.max_attempts},
        max_pool_connections=settings.max_pool_connections,
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
    )
    log.debug("DynamoDB client: retries=%s/%d", settings.retry_mode, settings.max_attempts)
    client = aws_client("dynamodb", endpoint_url=settings.endpoint_url, region=settings.region,
                        profile=settings.profile, config=config, role_arn=settings.role_arn)
    client.meta.events.register("after-call.dynamodb", refuse_damaged, unique_id="ddb2bt-crc32")
    return client


class DamagedAnswer(HTTPClientError):
    """A DynamoDB answer whose body does not match its ``x-amz-crc32`` after botocore's last attempt. botocore retries
    such an answer, but once its attempts are spent it returns the last one as a success: a damaged page whose JSON
    still parses (a byte changed in a value) would have been taken for the table's data. An HTTPClientError, so that
    every caller that retries a broken connection (the scan's own retries) retries this too."""

    fmt = ("DynamoDB's answer to {operation} does not match its x-amz-crc32 checksum after {attempts} attempts "
           "(damaged on the way)")


def refuse_damaged(http_response: Any = None, model: Any = None, parsed: Any = None, **_: Any) -> None:
    """botocore's ``after-call`` event: raise :class:`DamagedAnswer` for a 200 answer whose CRC32 does not match
    (the raw body: a hook that rewrote the parsed body, such as :func:`keep_field_raw`'s, changes nothing here)."""
    if http_response is None or http_response.status_code != 200:
        return
    expected = http_response.headers.get("x-amz-crc32")
    if expected is None or zlib.crc32(http_response.content) & 0xFFFFFFFF == int(expected):
        return
    metadata = (parsed or {}).get("ResponseMetadata", {})  # botocore's retries, counted by the scan as a page's
    raise DamagedAnswer(response={"ResponseMetadata": metadata}, operation=getattr(model, "name", "a request"),
                        attempts=1 + (metadata.get("RetryAttempts", 0) or 0), error="damaged answer")


def describe_raw(client: Any, table: str) -> tuple[dict, dict | None]:
    """Raw DescribeTable and DescribeTimeToLive responses; the latter None where the server lacks the call (dynalite).

    The two requests go out together (a client is thread-safe): every run waits for them before it starts, and a
    region away that is one round trip instead of two. DescribeTable's error is raised as it is."""

    def time_to_live() -> dict | ClientError:
        try:
            return client.describe_time_to_live(TableName=table)
        except ClientError as err:
            return err

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ddb2bt-describe") as pool:
        asked = pool.submit(time_to_live)
        response = client.describe_table(TableName=table)  # its error leaves once the other request is answered
        ttl = asked.result()
    if isinstance(ttl, ClientError):  # said only for a table that DescribeTable found
        log.info("DescribeTimeToLive unavailable for %s (%s); TTL unknown", table, ttl.response["Error"].get("Code"))
        return response, None
    return response, ttl


def describe_source(client: Any, table: str) -> SourceDescription:
    """Describe the table; raises ``botocore.exceptions.ClientError`` (e.g. ResourceNotFoundException) as is."""
    return SourceDescription.from_describe_table(*describe_raw(client, table))


def create_table(client: Any, table: str, partition_key: str, sort_key: str | None = None, key_type: str = "S",
                 stream: bool = False) -> None:
    """An on-demand table with string (or `key_type`) keys, returned once ACTIVE: for demos, tests and benchmarks.

    ``stream``: with a NEW_AND_OLD_IMAGES stream, what `ddb2bt tail` reads (dynalite accepts and ignores it).
    Waits because a strict server (dynalite, DynamoDB itself) answers ResourceNotFound until the table is ACTIVE.
    """
    keys = [(partition_key, "HASH")] + ([(sort_key, "RANGE")] if sort_key else [])
    streamed = {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}} if stream else {}
    client.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": name, "KeyType": kind} for name, kind in keys],
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": key_type} for name, _ in keys],
        **streamed,
    )
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 0.1, "MaxAttempts": 300})


def put_items(client: Any, table: str, items: Iterable[dict]) -> int:
    """BatchWriteItem in batches of 25, sending unprocessed items again until none are left; the count written."""
    written, batch = 0, []
    for item in items:
        batch.append({"PutRequest": {"Item": item}})
        if len(batch) == 25:
            written += _write_batch(client, table, batch)
            batch = []
    return written + (_write_batch(client, table, batch) if batch else 0)


def _write_batch(client: Any, table: str, requests: list[dict]) -> int:
    count = len(requests)
    while requests:
        requests = client.batch_write_item(RequestItems={table: requests}).get("UnprocessedItems", {}).get(table, [])
    return count


def keep_field_raw(client: Any, operation: str, field: str) -> None:
    """Let ``operation``'s answers keep ``field`` (items, in Scan's Items or BatchGetItem's Responses) as the raw
    JSON (parsed by :func:`.wire_json.loads`), skipping botocore's per-value parsing (the scan's main
    client cost: docs/PERFORMANCE.md). Items stay in wire format, except that ``B`` values stay base64 text, the export form the
    mapper, the comparison and dead letters take. The rest of the answer is parsed by botocore as usual. Touches botocore's response dict (pinned)."""
    client.meta.events.register(f"before-parse.dynamodb.{operation}", partial(_raw_field, field),
                                unique_id=f"ddb2bt-raw-{operation}-{field}")


def _raw_field(field: str, response_dict: dict, customized_response_dict: dict, **_: Any) -> None:
    if response_dict.get("status_code") != 200 or not response_dict.get("body"):
        return
    try:
        data = wire_json.loads(response_dict["body"])
    except ValueError:  # cut short or corrupt: left to botocore, whose CRC32 check retries it (and the caller after)
        return
    if not isinstance(data, dict):
        return
    items = data.pop(field, None)
    if items is not None:
        customized_response_dict[field] = items
        response_dict["body"] = json.dumps(data).encode()
