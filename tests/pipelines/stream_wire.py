"""DynamoDB Streams answers as the service sends them on the wire, turned into what boto3 returns by botocore itself.

A hand-made dict of what boto3 "returns" proves only that the test agrees with its writer (issue 20: the
hand-made records said ``userIdentity.type``, botocore says ``userIdentity.Type``). Here a test writes the
JSON body of a GetRecords / DescribeStream / GetShardIterator answer (the member names of botocore's service
model, ``botocore/data/dynamodbstreams/2012-08-10/service-2.json``: timestamps as epoch seconds, binary as
base64 text) and :func:`parse` hands it to the parser a boto3 client uses, with the operation's output shape;
:func:`wire_error` builds the exception a client raises for an error body. :func:`example` gives the answers
of the examples that ship inside botocore (``examples-1.json``), which AWS wrote, not this project.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from botocore.session import get_session

SERVICE = "dynamodbstreams"
ERROR_PREFIX = "com.amazonaws.dynamodb.v20120810#"
"""How the JSON protocol names an error in ``__type`` (botocore keeps what follows ``#``)."""

TTL_IDENTITY = {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
"""``userIdentity`` of a record the TTL process made, as GetRecords sends it (the model's member names; AWS's TTL
page and Lambda events write the same two fields ``principalId`` and ``type``)."""


@functools.lru_cache(maxsize=1)
def _session() -> Any:
    return get_session()


@functools.lru_cache(maxsize=1)
def _model() -> Any:
    return _session().get_service_model(SERVICE)


def parse(operation: str, body: dict[str, Any] | str | bytes, status: int = 200) -> dict[str, Any]:
    """What a boto3 client returns for this wire answer (a JSON body of ``operation``, e.g. "GetRecords")."""
    raw = body if isinstance(body, bytes) else (body if isinstance(body, str) else json.dumps(body)).encode()
    shape = _model().operation_model(operation).output_shape
    parser = _session().get_component("response_parser_factory").create_parser(_model().metadata["protocol"])
    response = {"status_code": status, "body": raw,
                "headers": {"content-type": "application/x-amz-json-1.0", "x-amzn-requestid": "wire"}}
    return parser.parse(response, shape)


@functools.lru_cache(maxsize=1)
def _client() -> Any:
    """A client only for its exception classes; it never sends a request."""
    return _session().create_client(SERVICE, region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                                    aws_access_key_id="testing", aws_secret_access_key="testing")


def wire_error(operation: str, code: str, message: str, status: int = 400) -> Exception:
    """The exception a boto3 client raises when the service answers ``{"__type": ..., "message": ...}``."""
    parsed = parse(operation, {"__type": ERROR_PREFIX + code, "message": message}, status)
    return _client().exceptions.from_code(parsed["Error"]["Code"])(parsed, operation)


def example(operation: str) -> dict[str, Any]:
    """The wire body of the first example botocore ships for ``operation`` (examples-1.json)."""
    examples = _session().get_component("data_loader").load_service_model(SERVICE, "examples-1")
    return examples["examples"][operation][0]["output"]


def record(event: str, keys: dict, *, old: dict | None = None, new: dict | None = None, sequence: str,
           created: float, identity: dict | None = None, region: str = "us-east-1") -> dict[str, Any]:
    """One ``Record`` of a GetRecords body, NEW_AND_OLD_IMAGES, as the wire carries it (images in DynamoDB JSON)."""
    data: dict[str, Any] = {"ApproximateCreationDateTime": created, "Keys": keys, "SequenceNumber": sequence,
                            "SizeBytes": len(json.dumps([keys, old, new])), "StreamViewType": "NEW_AND_OLD_IMAGES"}
    if old is not None:
        data["OldImage"] = old
    if new is not None:
        data["NewImage"] = new
    wire: dict[str, Any] = {"awsRegion": region, "dynamodb": data, "eventID": f"e{sequence[-12:]}",
                            "eventName": event, "eventSource": "aws:dynamodb", "eventVersion": "1.1"}
    if identity is not None:
        wire["userIdentity"] = identity
    return wire


def shard(shard_id: str, parent: str | None, start: str, end: str | None = None) -> dict[str, Any]:
    """One ``Shard`` of a DescribeStream body (no ParentShardId for a root, no EndingSequenceNumber while open)."""
    entry: dict[str, Any] = {"ShardId": shard_id, "SequenceNumberRange": {"StartingSequenceNumber": start}}
    if parent is not None:
        entry["ParentShardId"] = parent
    if end is not None:
        entry["SequenceNumberRange"]["EndingSequenceNumber"] = end
    return entry


def described_shards(shards: list[dict[str, Any]], arn: str = "arn:aws:dynamodb:us-east-1:123456789012:table/T/"
                     "stream/2026-11-22T12:00:00.000") -> list[dict[str, Any]]:
    """DescribeStream's Shards as boto3 returns them, from the wire entries."""
    body = {"StreamDescription": {"StreamArn": arn, "StreamStatus": "ENABLED", "StreamViewType": "NEW_AND_OLD_IMAGES",
                                  "CreationRequestDateTime": 1.7958e9, "TableName": "T", "Shards": shards}}
    return parse("DescribeStream", body)["StreamDescription"]["Shards"]
