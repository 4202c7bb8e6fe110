"""The sinks (:class:`~.sink.Sink`) of items and rows: Bigtable (migrate, redrive, validate's repairs) and DynamoDB
(rollback's target, as a Beam step). The change sink (catch-up) is :class:`.cutover.catchup.ChangeSink`.

Thin adapters: the writing itself is :mod:`.bigtable.sink`'s ``WriteToBigtable`` and :mod:`.dynamodb.sink`'s
``DynamoWriter``.
"""

from __future__ import annotations

from typing import Any, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from ..mappers.errors import UsageError
from .bigtable.sink import Destination, FlowControl, WriteToBigtable, ensure_table
from .bigtable.target import describe_target, probe_target
from .dynamodb.client import ClientSettings, make_client
from .dynamodb.sink import DynamoWriter, WriteBudget, send_requests_raw
from .run.dead_letters import DeadLetter
from .run.metrics import NAMESPACE
from .run.service_errors import redact
from .sink import Sink


class BigtableSink(Sink):
    """Mapped rows into the spec's Bigtable table; rows Bigtable refuses for good come out as dead letters."""

    kind = "bigtable"

    def __init__(self, target: Any, flow: FlowControl | None = None, *, progress_dir: str | None = None,
                 must_exist: bool = False) -> None:
        self.target, self.flow, self.progress_dir, self.must_exist = target, flow, progress_dir, must_exist

    def describe(self) -> str:
        return describe_target(self.target)

    def check(self) -> None:
        probe_target(self.target, must_exist=self.must_exist)  # a dead Bigtable fails here, in seconds

    def prepare(self, *, create: bool = True) -> None:
        ensure_table(self.target, create=create)

    def write(self, batches: Any, label: str | None = None) -> Any:
        destination = Destination.from_target(self.target)
        return batches | (label or "WriteToBigtable") >> WriteToBigtable(destination, self.flow,
                                                                         progress_dir=self.progress_dir)


class _PutItemsFn(beam.DoFn):
    def __init__(self, settings: ClientSettings, table: str, key_names: tuple[str, ...], wcu: float | None,
                 retry_seconds: float) -> None:
        self._settings, self._table, self._keys = settings, table, key_names
        self._wcu, self._retry_seconds = wcu, retry_seconds
        self._written = Metrics.counter(NAMESPACE, "items_written")
        self._refused = Metrics.counter(NAMESPACE, "write_failures")

    def setup(self) -> None:
        client = make_client(self._settings)
        send_requests_raw(client)  # items travel in the wire format (B as base64 text), as the sources give them
        self._writer = DynamoWriter(client, self._table, self._keys, WriteBudget(self._wcu),
                                    retry_seconds=self._retry_seconds)

    def process(self, element: Any) -> Iterator[Any]:
        if not isinstance(element, list):  # a barrier: every item before it is written or refused
            yield element
            return
        refused = self._writer.write(element)
        self._written.inc(len(element) - len(refused))
        self._refused.inc(len(refused))
        for item, reason in refused:
            yield DeadLetter(item, "write", reason)


class DynamoDBSink(Sink):
    """Items (in DynamoDB's wire format) into an existing DynamoDB table with BatchWriteItem, within ``wcu`` write
    units per second per worker; items DynamoDB refuses come out as dead letters."""

    kind = "dynamodb"

    def __init__(self, settings: ClientSettings, table: str, key_names: tuple[str, ...], *, wcu: float | None = None,
                 retry_seconds: float = 120.0) -> None:
        self.settings, self.table, self.key_names = settings, table, tuple(key_names)
        self.wcu, self.retry_seconds = wcu, retry_seconds

    def describe(self) -> str:
        where = f" at {redact(self.settings.endpoint_url)}" if self.settings.endpoint_url else ""
        return f"DynamoDB table {self.table}{where}"

    def check(self) -> None:
        from botocore.exceptions import ClientError

        try:
            make_client(self.settings).describe_table(TableName=self.table)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            raise UsageError(f"there is no DynamoDB table {self.table} to write into",
                             "create it (with the source's key schema) or name another table") from None

    def prepare(self, *, create: bool = True) -> None:
        self.check()  # DynamoDB tables are made with their key schema and capacity by their owners, never here

    def write(self, batches: Any, label: str | None = None) -> Any:
        return batches | (label or "WriteToDynamoDB") >> beam.ParDo(_PutItemsFn(
            self.settings, self.table, self.key_names, self.wcu, self.retry_seconds))
