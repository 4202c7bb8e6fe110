"""A table's DynamoDB stream as a change source: shards read after their parents, resumed after a sequence number.

:class:`StreamChanges` is the stream (NEW_AND_OLD_IMAGES) as a :class:`~ddb2bt.pipelines.change_source.ChangeSource`.

* Each shard's next iterator is kept from turn to turn (in memory), and empty pages with a next
  iterator are followed (up to :data:`EMPTY_PAGES_PER_TURN` a turn): a stream may answer several
  empty pages before a shard's next records (trimmed ones at TRIM_HORIZON, say), which a reader
  starting over from its saved position every turn would never get past. A shard iterator that
  expired (they live 15 minutes), and the first after a restart, come from the saved position.
* A position the stream no longer holds (24-hour retention), a stream re-enabled since, or a start
  older than the retention is a :class:`StreamRetentionError` pointing to incremental-export catch-up.
* TTL deletions (userIdentity: Service, dynamodb.amazonaws.com; see :func:`is_ttl_delete`) are changes
  flagged ``ttl``, applied like any delete by the tail, so the target mirrors the table, and counted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from ...mappers.changes import Change, kind_of_change
from ...mappers.errors import UsageError
from ..change_source import ChangePage, ChangeSource, ChangeWindow, Piece
from ..source import SourceRead
from .client import refuse_damaged

RETENTION_US = 24 * 3_600_000_000
START_MARGIN_US = 2_000_000
PAGE_LIMIT = 1000
PAGES_PER_TURN = 20
EMPTY_PAGES_PER_TURN = 3


class StreamRetentionError(UsageError):
    """The stream no longer holds the records the timeline needs: catch up from an incremental export first."""


RETENTION_HINT = ("catch up with an incremental export from the timeline's end (`ddb2bt catch-up SPEC --run-dir R "
                  "--export PATH`; ExportFromTime = the time above), then start the tail again")

TTL_IDENTITY = ("Service", "dynamodb.amazonaws.com")


def is_ttl_delete(record: dict[str, Any]) -> bool:
    """Whether DynamoDB's TTL process made the record: its ``userIdentity`` is the service dynamodb.amazonaws.com.

    botocore returns the members as the service model names them (``Type``, ``PrincipalId``: GetRecords'
    wire JSON); AWS's TTL page and Lambda's stream events write them ``type`` and ``principalId``. Both count.
    """
    identity = record.get("userIdentity") or {}
    kind = identity.get("Type", identity.get("type"))
    principal = identity.get("PrincipalId", identity.get("principalId"))
    return (kind, principal) == TTL_IDENTITY


def to_change(record: dict[str, Any]) -> Change:
    """A stream record as a Change (ApproximateCreationDateTime in µs; TTL deletions flagged)."""
    data = record["dynamodb"]
    moment = data.get("ApproximateCreationDateTime")
    time_us = int(moment.timestamp() * 1_000_000) if hasattr(moment, "timestamp") else int(float(moment or 0) * 1e6)
    ttl = is_ttl_delete(record)
    old, new = data.get("OldImage"), data.get("NewImage")
    return Change(data["Keys"], old, new, record.get("eventName") or kind_of_change(old, new), time_us,
                  data.get("SequenceNumber", ""), ttl)


def _error_code(error: Exception) -> str:
    return str((getattr(error, "response", None) or {}).get("Error", {}).get("Code", ""))


def require_streams_api(streams: Any) -> None:
    """Refuse a Streams endpoint that has no Streams API at all (dynalite answers UnknownOperationException)."""
    try:
        streams.list_streams(Limit=1)
    except Exception as error:
        if _error_code(error) != "UnknownOperationException":
            return  # whatever else is wrong shows where the stream itself is read
        from ..run.service_errors import redact

        raise UsageError(f"{redact(str(streams.meta.endpoint_url))} does not serve DynamoDB Streams (dynalite has "
                         "none), so the tail has no stream to read", "run the local servers with moto (`ddb2bt local "
                         "up --dynamodb moto`), or point AWS_ENDPOINT_URL_DYNAMODB_STREAMS at the server holding the "
                         "table's stream") from None


def make_streams_client(settings: Any) -> Any:
    """A ``dynamodbstreams`` client with the DynamoDB client's region, profile and timeouts; its endpoint follows the
    DynamoDB one where that is local (:func:`ddb2bt.pipelines.dynamodb.aws.endpoint_for`)."""
    from botocore.config import Config

    from .aws import aws_client

    config = Config(retries={"mode": "standard", "total_max_attempts": settings.max_attempts},
                    connect_timeout=settings.connect_timeout, read_timeout=settings.read_timeout)
    client = aws_client("dynamodbstreams", endpoint_url=settings.endpoint_url, region=settings.region,
                        profile=settings.profile, config=config)
    # botocore checks x-amz-crc32 for the dynamodb service alone: a GetRecords page damaged on the way whose JSON
    # still parses would be applied as the table's changes. Refused instead (the tail stops; its restart reads the
    # page again from the saved position).
    client.meta.events.register("after-call", refuse_damaged, unique_id="ddb2bt-crc32")
    return client


class StreamChanges(ChangeSource):
    """The stream of table ``table``: its window's id is the stream's ARN; its pieces are the shards (DescribeStream),
    each with its parent; a position is the sequence number of the last record applied."""

    kind = "dynamodb stream"
    pieces_name = "stream shards"

    changes_name = "stream record(s)"

    def __init__(self, table: str, dynamodb: Any, streams: Any, *,
                 now_us: Any = lambda: int(time.time() * 1_000_000), page_limit: int | None = None) -> None:
        self.table, self.dynamodb, self.streams, self.now_us = table, dynamodb, streams, now_us
        self.page_limit = page_limit
        """Records a GetRecords page (None: :data:`PAGE_LIMIT`)."""
        self.stream_seconds = 0.0
        """Time spent waiting for GetRecords (the rest is mapping and writing), for benchmarks and tuning."""
        self.iterators: dict[str, tuple[str | None, str]] = {}
        """Each shard's next iterator where the last read of it stopped, with the position it follows."""
        self._arn: str | None = None

    @classmethod
    def of(cls, spec: Any) -> StreamChanges:
        """The stream of the spec's source table (the tail refuses a spec without one first), with clients from the
        spec's source settings."""
        from .client import ClientSettings, make_client

        settings = ClientSettings.from_source(spec.source)
        return cls(spec.source.table, make_client(settings), make_streams_client(settings))

    @classmethod
    def reading(cls, streams: Any, stream_arn: str, *, page_limit: int | None = None) -> StreamChanges:
        """The stream ``stream_arn`` read with a ``dynamodbstreams`` client alone (no table described: its window is
        not checked)."""
        source = cls(stream_arn.split(":table/", 1)[-1].split("/stream/", 1)[0], None, streams, page_limit=page_limit)
        source._arn = stream_arn
        return source

    def name(self) -> str:
        return f"the stream of {self.table}"

    def window(self) -> ChangeWindow:
        description = self.dynamodb.describe_table(TableName=self.table)["Table"]
        stream_arn = description.get("LatestStreamArn")
        view = (description.get("StreamSpecification") or {}).get("StreamViewType")
        if not stream_arn or not (description.get("StreamSpecification") or {}).get("StreamEnabled", True):
            require_streams_api(self.streams)
            raise UsageError(f"table {self.table} has no DynamoDB stream",
                             "enable one with view NEW_AND_OLD_IMAGES (it must exist since the backfill started)")
        if view is None:  # a stream disabled since: its ARN stays, its specification goes
            raise UsageError(f"the stream of {self.table} ({stream_arn}) is no longer enabled",
                             "enable a stream with view NEW_AND_OLD_IMAGES; a new stream does not hold the changes "
                             "the old one did: catch up from an incremental export, then start the tail again")
        if view != "NEW_AND_OLD_IMAGES":
            raise UsageError(f"the stream of {self.table} has view {view}: without old images the cells a change "
                             "removes cannot be found", "enable the stream with NEW_AND_OLD_IMAGES")
        self._arn = stream_arn
        return ChangeWindow(stream_arn)

    @property
    def arn(self) -> str:
        if self._arn is None:
            self.window()
        assert self._arn is not None
        return self._arn

    def check(self, key_names: tuple[str, ...] = (), *, from_us: int | None = None,
              resuming: str | None = None, keep: bool = False) -> None:
        """A checkpoint of another stream (re-enabled since) lost its positions; a first start needs the stream to
        hold ``from_us`` (the timeline's end): within the retention, and after the stream was enabled."""
        from ..cutover.timeline import us_to_iso

        if resuming is not None:
            if resuming != self.arn:
                raise StreamRetentionError(f"the stream of {self.table} changed since the tail started "
                                           f"({resuming} → {self.arn}): positions are lost", RETENTION_HINT)
            return
        if from_us is None:
            return
        if self.now_us() - (from_us - START_MARGIN_US) >= RETENTION_US:
            raise StreamRetentionError(f"the timeline ends at {us_to_iso(from_us)}, more than the stream's "
                                       "24-hour retention ago", RETENTION_HINT)
        stream = self.streams.describe_stream(StreamArn=self.arn)["StreamDescription"]
        created = stream.get("CreationRequestDateTime")
        if created is not None and int(created.timestamp() * 1_000_000) > from_us:
            raise StreamRetentionError(f"the stream of {self.table} was enabled at "
                                       f"{us_to_iso(int(created.timestamp() * 1e6))}, after the timeline's end "
                                       f"({us_to_iso(from_us)}): the changes between are in no stream", RETENTION_HINT)

    def read(self, p: Any) -> SourceRead:
        raise UsageError(f"{self.name()} is followed by `ddb2bt tail`, page by page from saved positions; it is no "
                         "window of changes a batch job reads", "catch up from an incremental export")

    def pieces(self) -> list[Piece]:
        """Every shard of the stream (DescribeStream pages)."""
        shards: list[Piece] = []
        start: dict[str, Any] = {}
        while True:
            page = self.streams.describe_stream(StreamArn=self.arn, **start)["StreamDescription"]
            shards += [Piece(shard["ShardId"], shard.get("ParentShardId")) for shard in page.get("Shards", [])]
            last = page.get("LastEvaluatedShardId")
            if not last:
                break
            start = {"ExclusiveStartShardId": last}
        return shards

    def lost(self, piece: str) -> Exception:
        return StreamRetentionError(f"shard {piece} is no longer in the stream (past its 24-hour retention) before "
                                    "the tail finished reading it", RETENTION_HINT)

    def _iterator(self, shard_id: str, position: str | None) -> str | None:
        kind = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": position} if position \
            else {"ShardIteratorType": "TRIM_HORIZON"}
        try:
            return self.streams.get_shard_iterator(StreamArn=self.arn, ShardId=shard_id, **kind)["ShardIterator"]
        except Exception as error:
            if _error_code(error) == "TrimmedDataAccessException":
                raise StreamRetentionError(f"shard {shard_id} no longer holds the records after {position} "
                                           "(past the 24-hour retention)", RETENTION_HINT) from None
            raise

    def pages(self, piece: str, position: str | None) -> Iterator[ChangePage]:
        """A turn of up to PAGES_PER_TURN pages (EMPTY_PAGES_PER_TURN empty ones in a row) of the shard after
        ``position``; the shard's next iterator is kept for the next turn, which uses it if it asks for the same
        position (a reader that goes back, or reads the shard again from elsewhere, gets an iterator of its own)."""
        kept = self.iterators.pop(piece, None)
        iterator = kept[1] if kept is not None and kept[0] == position else self._iterator(piece, position)
        pages = empty = 0
        while iterator and pages < PAGES_PER_TURN and empty < EMPTY_PAGES_PER_TURN:
            asked = time.perf_counter()
            try:
                page = self.streams.get_records(ShardIterator=iterator, Limit=self.page_limit or PAGE_LIMIT)
            except Exception as error:
                code = _error_code(error)
                if code == "ExpiredIteratorException":  # 15 minutes old: renew it from the saved position
                    iterator = self._iterator(piece, position)
                    continue
                if code == "TrimmedDataAccessException":
                    raise StreamRetentionError(f"shard {piece}: the records after {position} are past the "
                                               "stream's retention", RETENTION_HINT) from None
                raise
            finally:
                self.stream_seconds += time.perf_counter() - asked
            pages += 1
            records = page.get("Records", [])
            changes = [to_change(record) for record in records]
            iterator = page.get("NextShardIterator")
            # resumed once the page is applied; a page that failed drops the iterator: the saved position next
            yield ChangePage(changes, changes[-1].sequence if changes else position, done=not iterator)
            position = changes[-1].sequence if changes else position
            empty = 0 if records else empty + 1
        if iterator:
            self.iterators[piece] = (position, iterator)
        elif not pages:  # no iterator to read the shard with: nothing is left in it
            yield ChangePage([], position, done=True)
