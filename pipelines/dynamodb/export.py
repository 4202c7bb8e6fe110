"""Read a DynamoDB export to S3 (DYNAMODB_JSON or ION) instead of scanning the live table.

An export costs no read capacity and is a consistent snapshot, which makes it the better source
for big tables. Layout, under the export folder ``<prefix>/AWSDynamoDB/<exportId>/``:

* ``manifest-summary.json``: ``itemCount``, ``outputFormat``, ``exportTime``, ``manifestFilesS3Key``,
  ``tableArn``, ``tableId`` ...
* ``manifest-files.json``: JSON lines, one per data file: ``itemCount``, ``md5Checksum`` (base64),
  ``etag`` (an S3 ETag, often multipart: ``<hex>-1``), ``dataFileS3Key``
* data files: gzipped JSON lines, each ``{"Item": {...}}`` with ``B`` values as base64 text (an ION export:
  Ion lines ``$ion_1_0 {Item:{...}}``, read into the same records by :mod:`.ion_lines`); an empty
  partition gives an empty file (``itemCount`` 0). A full export keeps them in its own
  ``<exportId>/data/``; an incremental export writes them into the *shared* ``AWSDynamoDB/data/``
  folder beside the export folders.

Manifest keys name S3 objects as AWS wrote them: ``[prefix/]AWSDynamoDB/...`` (the summary's
``manifestFilesS3Key`` carries the prefix; an incremental export's ``dataFileS3Key`` is
``AWSDynamoDB/data/<name>.json.gz``, relative to the prefix). See :func:`resolve_key`.

Counts are checked, not trusted: a data file holding a different number of items than its
manifest line (or files that do not add up to the summary) is *reported* as a ``count_mismatch``
record and counter, so reconciliation can fail the run rather than lose items quietly. Paths go
through Beam's ``FileSystems``, so s3://, gs:// and local copies all work.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, TypeVar, cast

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from . import ion_lines, wire_json
from ..run.batches import BATCH_ITEMS, Batch, SegmentDone
from ..run.metrics import NAMESPACE
from ..run.service_errors import gcs_unreachable, s3_credentials_missing
from ...mappers.attrvalue import item_problem
from ...mappers.errors import UsageError
from ...mappers.units import iso_to_micros

T = TypeVar("T")

try:  # ISA-L's inflate reads the same gzip bytes for less CPU than zlib's; it is a dependency (pyproject.toml)
    from isal import igzip, isal_zlib

    GzipReader: Any = igzip.IGzipFile
    BAD_GZIP: tuple[type[Exception], ...] = (gzip.BadGzipFile, zlib.error, cast(type[Exception], isal_zlib.error))
    """What a gzip reader raises for data that is not gzip (ISA-L's raises gzip's BadGzipFile, and its own error
    where zlib's would raise zlib.error); a stream cut short is an EOFError from both."""
except ImportError:  # an environment set up before it was one: the standard library's reader, the same bytes
    GzipReader, BAD_GZIP = gzip.GzipFile, (gzip.BadGzipFile, zlib.error)

SUMMARY = "manifest-summary.json"
EXPORT_DIR = "AWSDynamoDB"
_KEY = re.compile(rf"(?:^|/){EXPORT_DIR}/(.+)$")


class ExportError(UsageError):
    """The path is not a readable DynamoDB export, or the export is not in a format we read."""


class ExportLineError(ExportError):
    """A line of a data file is not what an export holds there: the file reads, but is not as DynamoDB wrote it."""

    HINT = "restore the file as DynamoDB wrote it, or export the table again"

    def __init__(self, message: str, hint: str = "") -> None:  # Beam re-makes a step's error from its whole text
        super().__init__(message, hint)
        self.message = message
        """The message without the hint (in this process: an error rebuilt from Beam's text has only ``str()``)."""


@dataclass(frozen=True)
class ExportFile:
    path: str
    """Resolved location of the data file (s3://, gs:// or local)."""
    key: str
    """``dataFileS3Key`` as written in the manifest, for reports."""
    item_count: int
    md5: str | None = None
    etag: str | None = None


@dataclass(frozen=True)
class SourceTable:
    """The table an export is of, as its manifest-summary.json names it."""

    arn: str
    table_id: str | None

    @property
    def name(self) -> str:
        return self.arn.rpartition("table/")[2].partition("/")[0]

    @classmethod
    def of(cls, summary: dict[str, Any]) -> SourceTable | None:
        arn = summary.get("tableArn")
        return cls(str(arn), str(summary["tableId"]) if summary.get("tableId") else None) if arn else None

    def describe(self) -> str:
        return f"table {self.name} ({self.arn}" + (f", tableId {self.table_id})" if self.table_id else ")")


@dataclass(frozen=True)
class ExportManifest:
    export_dir: str
    """The folder holding manifest-summary.json."""
    export_id: str
    item_count: int
    """itemCount from manifest-summary.json."""
    output_format: str
    export_time: str | None
    files: tuple[ExportFile, ...]
    table: SourceTable | None = None

    @property
    def files_item_count(self) -> int:
        """The sum of the per-file counts in manifest-files.json (should equal item_count)."""
        return sum(f.item_count for f in self.files)


def _read_text(path: str) -> str:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return handle.read().decode("utf-8")


_EXPORT_ENTRIES = frozenset({SUMMARY, "manifest-files.json", "manifest-summary.md5", "manifest-files.md5",
                             "manifest-summary.checksum", "manifest-files.checksum", "_started", "data"})
"""What DynamoDB writes into an export folder (the .md5 files of older exports, .checksum of newer ones)."""


def find_export_dir(path: str) -> str:
    """The export folder for ``path``: itself, or the single export below it (``AWSDynamoDB/<id>``)."""
    path = path.rstrip("/")
    give = f"give the export's folder, [prefix/]{EXPORT_DIR}/<exportId> (the one holding {SUMMARY})"
    unreachable = (gcs_unreachable(path) or s3_credentials_missing(path, FileSystems._pipeline_options)
                   or s3_probe(path, give))
    if unreachable is not None:
        raise unreachable
    if FileSystems.exists(FileSystems.join(path, SUMMARY)):
        return path
    # a file of the export folder (the summary an S3 console shows, manifest-files.json, _started), its data folder
    # or a data file: the export folder holding it is meant
    folder, name = FileSystems.split(path)
    above = FileSystems.split(folder)[0] if FileSystems.split(folder)[1] == "data" else None
    for candidate in (folder if name in _EXPORT_ENTRIES else None, above):
        if candidate and FileSystems.exists(FileSystems.join(candidate, SUMMARY)):
            return candidate
    patterns = [FileSystems.join(path, EXPORT_DIR, "*", SUMMARY), FileSystems.join(path, "*", SUMMARY)]
    found = sorted({FileSystems.split(m.path)[0] for r in FileSystems.match(patterns) for m in r.metadata_list})
    if len(found) == 1:
        return found[0]
    if not found:
        absent = nothing_at(path)
        raise ExportError(absent, f"check the path (source.export.path, or --export); {give}") if absent else ExportError(
            f"no {SUMMARY} in {path} or in one export folder below it", give)
    raise ExportError(f"{path} holds {len(found)} exports; give one of: "
                      + ", ".join(f"{folder} ({_kind_of(folder)})" for folder in found[:_LISTED])
                      + (f" (and {len(found) - _LISTED} more)" if len(found) > _LISTED else ""),
                      "a full export (FULL_EXPORT) is source.export.path; incremental ones go to `ddb2bt catch-up "
                      "--export`, one after another")


_LISTED = 12
"""Exports named when a path holds several (their summaries are read to say which is which)."""


def _kind_of(export_dir: str) -> str:
    """"full export at <exportTime>" or "incremental export <from> .. <to>", as its summary says; AWS keeps a table's
    full and incremental exports side by side under one prefix, and their ids alone do not tell them apart."""
    try:
        summary = json.loads(_read_text(FileSystems.join(export_dir, SUMMARY)))
        kind = summary.get("exportType", "FULL_EXPORT")
        if kind == "INCREMENTAL_EXPORT":
            return f"incremental export {summary.get('exportFromTime')} .. {summary.get('exportToTime')}"
        return f"full export at {summary.get('exportTime')}" if kind == "FULL_EXPORT" else f"exportType {kind!r}"
    except (OSError, ValueError, AttributeError):  # said when this one is given; here it is only a label
        return "its manifest-summary.json does not read"


def nothing_at(path: str) -> str | None:
    """Why nothing at all is at a local ``path``: a folder that does not exist; else None (s3:// is asked before
    anything else: :func:`s3_probe`). Said before "no manifest-summary.json", which sent a user with a misspelt
    folder looking for a manifest."""
    if "://" not in path and not FileSystems.exists(path):
        return f"{path} does not exist"
    return None


PROBE_CONNECT_SECONDS, PROBE_READ_SECONDS = 10, 30
"""The bounds of the one request that looks at an s3:// path before Beam's file system does."""


def s3_probe(path: str, give: str) -> Exception | None:
    """For an s3:// path, one ListObjectsV2 of one key, with S3 settings Beam's file system uses but bounded timeouts
    and one retry: an error to raise when the bucket does not exist or nothing is stored under the prefix
    (ExportError, exit 2), or S3 cannot be reached (ServiceError, exit 3); else None (a refusal is left to the reads
    that follow: a role may read objects without listing them).

    Beam's S3 client retries an unreachable endpoint (an error with no HTTP status) with backoff for many minutes, and
    reads a missing bucket as an empty listing ("no manifest-summary.json"); a misspelt bucket or a wrong
    AWS_ENDPOINT_URL_S3 was then a search for a manifest, or minutes of silence."""
    if not path.startswith("s3://"):
        return None
    import boto3
    from apache_beam.options.pipeline_options import PipelineOptions, S3Options
    from botocore.config import Config
    from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError, ConnectTimeoutError, \
        ReadTimeoutError

    from ..run.service_errors import S3_HINT, redact

    bucket, _, prefix = path[len("s3://"):].partition("/")
    given = FileSystems._pipeline_options
    s3 = (given if isinstance(given, PipelineOptions) else PipelineOptions([])).view_as(S3Options)
    client = boto3.session.Session().client(
        "s3", region_name=s3.s3_region_name, api_version=s3.s3_api_version, use_ssl=not s3.s3_disable_ssl,
        verify=s3.s3_verify, endpoint_url=s3.s3_endpoint_url, aws_access_key_id=s3.s3_access_key_id,
        aws_secret_access_key=s3.s3_secret_access_key, aws_session_token=s3.s3_session_token,
        config=Config(connect_timeout=PROBE_CONNECT_SECONDS, read_timeout=PROBE_READ_SECONDS,
                      retries={"mode": "standard", "total_max_attempts": 2}))
    try:
        listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix.rstrip("/"), MaxKeys=1)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "NoSuchBucket":
            return ExportError(f"S3 bucket {bucket!r} does not exist (reading {path})", f"check the path (source.export.path, or --export); {give}")
        return None
    except (BotoConnectionError, ConnectTimeoutError, ReadTimeoutError) as err:
        from ...mappers.errors import ServiceError

        return ServiceError(f"cannot read {path}: S3 at {redact(client.meta.endpoint_url)} cannot be reached: {err}",
                            S3_HINT)
    if not listed.get("KeyCount"):
        return ExportError(f"nothing is stored under {path}: bucket {bucket!r} holds no object whose key starts with "
                           f"{prefix.rstrip('/')!r}" if prefix.strip("/") else f"S3 bucket {bucket!r} is empty "
                           f"(reading {path})", f"check the path (source.export.path, or --export); {give}")
    return None


def resolve_key(export_dir: str, key: str, summary: dict[str, Any]) -> str:
    """Locate a manifest key in this copy of the export, whatever prefix or folder the copy lives under.

    AWS names every object ``[s3Prefix/]AWSDynamoDB/<rest>``; the folder holding the export folder
    stands for ``AWSDynamoDB/``. So a key inside the export's own folder (``<exportId>/data/x.json.gz``,
    ``<exportId>/manifest-files.json``) is joined to the export folder (a copy may rename it), and any
    other key (an incremental export's ``data/x.json.gz``, in the shared data folder) to the folder above.
    """
    prefix = str(summary.get("s3Prefix") or "").strip("/")
    found = _KEY.match(key[len(prefix) + 1:]) if prefix and key.startswith(prefix + "/") else None
    found = found or _KEY.search(key)
    if not found:
        raise ExportError(f"manifest key {key!r} is not inside {EXPORT_DIR}/ (not a key DynamoDB wrote)")
    first, _, rest = found.group(1).partition("/")
    if rest and first in (export_id(export_dir, summary), FileSystems.split(export_dir)[1]):
        return FileSystems.join(export_dir, *rest.split("/"))
    return FileSystems.join(FileSystems.split(export_dir)[0], *found.group(1).split("/"))


def use_options(options: PipelineOptions | None) -> None:
    """Hand pipeline options (s3_region_name, s3_endpoint_url, ...) to Beam's file systems.

    Constructing a ``Pipeline`` does this already; a plain call outside a pipeline (a sample, a
    manifest check in the CLI) must pass options for s3://, whose file system refuses to work without.
    """
    if options is not None:
        FileSystems.set_options(options)


def read_manifest(path: str, options: PipelineOptions | None = None) -> ExportManifest:
    """Read manifest-summary.json and manifest-files.json of the export at (or just below) ``path``."""
    use_options(options)
    export_dir = find_export_dir(path)
    summary = read_summary(export_dir)
    output_format = summary.get("outputFormat", "DYNAMODB_JSON")
    check_format(output_format, export_dir)
    kind = summary.get("exportType", "FULL_EXPORT")
    if kind == "INCREMENTAL_EXPORT":
        raise ExportError(f"{export_dir}/{SUMMARY}: exportType INCREMENTAL_EXPORT holds changes, not a table: "
                          "give source.export.path a full export, and this one to `ddb2bt catch-up` after it")
    if kind != "FULL_EXPORT":
        raise ExportError(f"{export_dir}/{SUMMARY}: exportType {kind!r} is not one DynamoDB writes; give "
                          "source.export.path a full export (exportType FULL_EXPORT)")
    files = manifest_files(export_dir, summary)
    if "itemCount" not in summary:
        raise ExportError(f"{export_dir}/{SUMMARY} has no itemCount")
    again = "copy the export's manifest-summary.json again as DynamoDB wrote it"
    item_count = summary_item_count(summary, export_dir)
    export_time = summary.get("exportTime")
    if export_time is not None:
        try:
            iso_to_micros(str(export_time))
        except ValueError:
            raise ExportError(f"{export_dir}/{SUMMARY}: exportTime {export_time!r} is not an ISO-8601 time "
                              "(DynamoDB writes e.g. '2024-05-01T12:00:00.000Z')", again) from None
    return ExportManifest(export_dir, export_id(export_dir, summary), item_count, output_format,
                          None if export_time is None else str(export_time), files, SourceTable.of(summary))


def summary_item_count(summary: dict[str, Any], export_dir: str) -> int:
    """The summary's itemCount, a whole number as DynamoDB writes it; ExportError for anything else (text such as "5",
    2.5, true: int() read them as 5, 2 and 1, and the export's count was checked against that)."""
    count = summary["itemCount"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ExportError(f"{export_dir}/{SUMMARY}: itemCount {count!r} is not a whole number",
                          "copy the export's manifest-summary.json again as DynamoDB wrote it")
    return count


FORMATS = ("DYNAMODB_JSON", "ION")
"""The export formats DynamoDB writes (ExportFormat), both read: Ion lines become the records JSON lines are."""


def check_format(output_format: str, export_dir: str) -> None:
    """ExportError unless ``output_format`` (the summary's outputFormat) is one DynamoDB writes and we read."""
    if output_format not in FORMATS:
        raise ExportError(f"{export_dir}/{SUMMARY}: outputFormat {output_format!r} is not a DynamoDB export format",
                          f"DynamoDB exports as {' or '.join(FORMATS)}; check that this folder is a DynamoDB export")


def read_summary(export_dir: str) -> dict[str, Any]:
    """The export's manifest-summary.json (full or incremental); ExportError if it is not JSON."""
    try:
        summary = json.loads(_read_text(FileSystems.join(export_dir, SUMMARY)))
    except json.JSONDecodeError as err:
        raise ExportError(f"{export_dir}/{SUMMARY} is not JSON: {err}") from err
    if not isinstance(summary, dict):
        raise ExportError(f"{export_dir}/{SUMMARY} is not a manifest summary (a JSON object)")
    for field in _TEXT_FIELDS:  # a value of another kind was used as text later: 'unexpected ... (a bug)'
        if summary.get(field) is not None and not isinstance(summary[field], str):
            raise ExportError(f"{export_dir}/{SUMMARY}: {field} {summary[field]!r} is not text, as DynamoDB writes it",
                              "copy the export's manifest-summary.json again as DynamoDB wrote it")
    return summary


_TEXT_FIELDS = ("exportArn", "tableArn", "tableId", "exportTime", "manifestFilesS3Key", "s3Bucket", "s3Prefix",
                "outputFormat", "exportType", "outputView")
"""The summary's fields DynamoDB writes as text (or null)."""


def export_id(export_dir: str, summary: dict[str, Any]) -> str:
    """The export's id: the end of its ARN, else its folder's name."""
    return str(summary.get("exportArn", "")).rpartition("/")[2] or FileSystems.split(export_dir)[1]


def manifest_files(export_dir: str, summary: dict[str, Any]) -> tuple[ExportFile, ...]:
    """The data files manifest-files.json lists (where the summary says it is), with their item counts and checksums;
    ExportError naming the line that is not a manifest entry."""
    files_key = summary.get("manifestFilesS3Key")
    files_path = resolve_key(export_dir, files_key, summary) if files_key else FileSystems.join(export_dir, "manifest-files.json")
    files = []
    seen: dict[str, int] = {}
    for number, line in enumerate(_read_text(files_path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            key, count = entry["dataFileS3Key"], int(entry["itemCount"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise ExportError(f"{files_path} line {number} is not a manifest entry: {err!r}") from err
        # a value of another kind was used only later: 'unexpected ... (a bug)', or a count cut to an int
        problem = _entry_problem(entry) or (f"dataFileS3Key {key!r} is listed again (line {seen[key]} lists it)"
                                            if key in seen else None)
        seen.setdefault(key, number)
        if problem:
            raise ExportError(f"{files_path} line {number} is not a manifest entry: {problem}",
                              "copy the export's manifest-files.json again as DynamoDB wrote it")
        files.append(ExportFile(resolve_key(export_dir, key, summary), key, count, entry.get("md5Checksum"), entry.get("etag")))
    return tuple(files)


def _entry_problem(entry: dict[str, Any]) -> str | None:
    """What in a manifest-files.json entry is not what DynamoDB writes there, or None."""
    key, count, md5, etag = (entry.get(name) for name in ("dataFileS3Key", "itemCount", "md5Checksum", "etag"))
    if not isinstance(key, str) or not key:
        return f"dataFileS3Key {key!r} is not an object key"
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return f"itemCount {count!r} is not a whole number of items"
    if md5 is not None and not _is_base64_md5(md5):
        return (f"md5Checksum {md5!r} is not an MD5 in base64 (DynamoDB writes 24 characters, e.g. "
                "'yLVNWUe57fGz0jA1eDTzTg==')")
    if etag is not None and not isinstance(etag, str):
        return f"etag {etag!r} is not an ETag"
    return None


def _is_base64_md5(text: Any) -> bool:
    try:
        return isinstance(text, str) and len(base64.b64decode(text, validate=True)) == 16
    except ValueError:  # binascii.Error
        return False


def iter_file_items(path: str) -> Iterator[dict[str, Any]]:
    """The items of one data file: the ``Item`` of each JSON line, in wire format (``B`` as base64 text)."""
    for _size, item in _sized_file_items(path):
        yield item


def _sized_file_items(path: str, head: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(bytes of its line, item)`` for each item of a data file; a file that cannot be read is an ExportError."""
    return sized_records(path, export_item, "an export item", head=head)


class Damaged:
    """An export item holding a value DynamoDB never writes (``{"SS": "abc"}``, ``{"BOOL": "yes"}``): read, counted,
    and dead-lettered with ``problem`` (``(the attribute, what is wrong)``, :func:`item_problem`'s words), never
    mapped: the mapper would map some such as they are (a string's characters as a set)."""

    __slots__ = ("item", "problem")

    def __init__(self, item: dict[str, Any], problem: tuple[str | None, str]) -> None:
        self.item, self.problem = item, problem


_compiled_item_valid: Callable[[Any], bool | None] | None
try:
    from ._vouch import item_valid as _compiled_item_valid
except ImportError:  # not built (no C compiler where the package was installed): every value visited, same answer
    _compiled_item_valid = None


def checked_item(record: Any, line: bytes) -> dict[str, Any] | Damaged:
    """:func:`export_item` of the run, every value of it checked: where ``_vouch.c``'s ``item_valid`` reads the line
    as ``{"Item":{...}}`` with every value one DynamoDB writes (the incremental export's grammar, one pass over the
    bytes), the item; else :func:`item_problem` visits each value (the only judge: the grammar only vouches), and an
    item it finds a problem in is :class:`Damaged`. The same answer with or without the compiled module."""
    item = export_item(record)
    if _compiled_item_valid is not None and _compiled_item_valid(line) is True:
        return item
    found = item_problem(item)
    return item if found is None else Damaged(item, found)


def _checked_file_items(path: str) -> Iterator[tuple[int, dict[str, Any] | Damaged]]:
    """The run's ``(bytes of its line, item or Damaged)`` for each line of a data file (:func:`checked_item`)."""
    return sized_records(path, checked_item, "an export item", with_line=True)


def export_item(record: Any) -> dict[str, Any]:
    """The item of a full export's parsed line ``{"Item": {...}}``, its dicts and lists off the collector's lists;
    ValueError/KeyError, in our words, for a line that is no export item (a damaged file whose MD5 matches)."""
    if type(record) is not dict:
        raise ValueError(f"the line is {_shown(record)}, not an object {{\"Item\": {{...}}}}")
    item = record["Item"]
    if type(item) is not dict:
        raise ValueError(f"Item is {_shown(item)}, not an object of attributes")
    return wire_json.untracked(item)


def _valid_export_item(record: Any) -> dict[str, Any]:
    """:func:`export_item`, and every value of the item one DynamoDB writes (ValueError naming the first that is
    not); for the first lines, read before a run: the run dead-letters such an item (:func:`checked_item`)."""
    item = export_item(record)
    found = item_problem(item)
    if found is not None:
        raise ValueError(found[1])
    return item


def _shown(value: Any) -> str:
    """A parsed JSON value as JSON text, cut to 60 characters."""
    text = json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:60] + "…"


def line_detail(err: Exception) -> str:
    """What is wrong with an export line, from the error parsing it raised: our words, not Python's (a KeyError
    names the missing field; json's error says where the line stops being JSON)."""
    if isinstance(err, KeyError):
        return f"no field {err}"
    if isinstance(err, json.JSONDecodeError):
        return f"not JSON: {err.msg} at character {err.pos + 1}"
    if isinstance(err, UnicodeDecodeError):
        return f"not UTF-8 text: byte {err.object[err.start]:#04x} at character {err.start + 1}"
    return str(err) or repr(err)


def sized_records(path: str, parse: Callable[..., T], what: str, *, with_line: bool = False,
                  head: bool = False) -> Iterator[tuple[int, T]]:
    """``(bytes of its line, parse(record))`` for each JSON line of an export data file (full or incremental);
    ``with_line``: ``parse(record, line)``, the line's bytes beside what was parsed from them; ``head``: for reading
    only the first lines, below the file system's read buffer (Beam's is 16 MiB on s3:// and gs://: one request
    that large per file), in blocks of :data:`HEAD_BYTES`.

    A line ``parse`` refuses (KeyError/TypeError/ValueError) or a file that cannot be read is an ExportError
    naming the file (and line). Gzip is decoded by ISA-L's reader (``isal.igzip``, the standard library's API and
    errors; the standard library's own where isal is missing) over Beam's raw stream (a C reader is far faster than
    Beam's pure-Python compressed-file wrapper), a block of lines at a time (:func:`line_blocks`).
    """
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as buffered:
            raw = getattr(buffered, "raw", buffered) if head else buffered  # io.BufferedReader's unbuffered stream
            stream = GzipReader(fileobj=raw, mode="rb") if path.endswith(".gz") else raw
            number = 0
            for block in line_blocks(stream, HEAD_BYTES if head else BLOCK_BYTES):
                # Ion lines (ExportFormat ION) start with the version marker; JSON lines never do
                loads = ion_lines.loads if ion_lines.is_ion(block) else wire_json.loader_for(block)
                for line in block.split(b"\n"):
                    number += 1
                    if not line.strip():
                        continue
                    try:
                        parsed = parse(loads(line), line) if with_line else parse(loads(line))
                    except (ValueError, KeyError, TypeError) as err:
                        raise ExportLineError(f"{path} line {number} is not {what}: {line_detail(err)}",
                                              ExportLineError.HINT) from err
                    yield len(line) + 1, parsed
    except EOFError as err:
        raise ExportError(f"{path} is cut short (its gzip stream ends early): {err}",
                          "copy the export again; the manifest's md5 shows which files differ") from err
    except BAD_GZIP as err:
        raise ExportError(f"{path} is not valid gzip data: {err}", "copy the export again") from err
    except OSError as err:  # missing or unreadable (Beam's BeamIOError is an OSError too)
        raise ExportError(f"{path} cannot be read: {err}") from err


BLOCK_BYTES = 1 << 20
"""How much of a data file (decompressed) is read at a time."""
HEAD_BYTES = 1 << 16
"""How much of a data file's first lines :func:`check_lines_start` reads before a run (at least one whole line)."""
CHECKS_AT_ONCE = 16
"""Data files whose first lines are read at once before a run (requests to S3 or GCS, each a round trip)."""


def line_blocks(stream: Any, size: int = BLOCK_BYTES) -> Iterator[bytes]:
    """``stream``'s bytes in blocks of whole lines, each without its last newline: split at ``\\n``, a block gives
    the lines the stream's own line iteration gives (newlines left off). Reading a block at a time and splitting it
    costs a fraction of reading line by line through the gzip reader."""
    rest = b""
    while chunk := stream.read(size):
        end = chunk.rfind(b"\n")
        if end < 0:
            rest += chunk
            continue
        yield rest + chunk[:end]
        rest = chunk[end + 1:]
    if rest:
        yield rest


def file_batches(records: Iterable[tuple[int, Any]]) -> Iterator[Batch]:
    """A data file's ``(line bytes, record)`` pairs in batches of :data:`BATCH_ITEMS`, each knowing its bytes."""
    batch = Batch()
    for size, record in records:
        if record.__class__ is Damaged:  # its place and problem, for the map step to dead-letter it
            batch.damaged = {**(batch.damaged or {}), len(batch): record.problem}
            record = record.item
        batch.append(record)
        batch.nbytes += size
        if len(batch) == BATCH_ITEMS:
            yield batch
            batch = Batch()
    if batch:
        yield batch


def verify_export(path: str, options: PipelineOptions | None = None) -> ExportManifest:
    """Check, before anything is written, that every data file the manifest lists is there and intact.

    Each file's MD5 is compared with the manifest's ``md5Checksum`` (base64), or ``etag`` where
    that is a plain MD5: local and gs:// files are read once for it; on s3:// the object's ETag
    is compared without reading it. Raises :class:`ExportError` naming every bad file; returns the manifest.
    """
    manifest = read_manifest(path, options)
    problems = [problem for data_file in manifest.files if (problem := file_problem(data_file))]
    if problems:
        raise ExportError(f"the export in {manifest.export_dir} is damaged: {'; '.join(problems)}",
                          "copy the export again (or export the table again); nothing was written")
    if len(manifest.files) > 1:  # thousands of files on S3: their round trips overlap (the first error is raised)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(CHECKS_AT_ONCE, len(manifest.files)), "ddb2bt-export-check") as pool:
            list(pool.map(check_lines_start, manifest.files))
    else:
        for data_file in manifest.files:
            check_lines_start(data_file)
    return manifest


def check_lines_start(data_file: ExportFile, budget: int = HEAD_BYTES) -> None:
    """The first lines of a data file (about ``budget`` bytes of them, at least one) read as the run reads them: a
    file whose MD5 matches its manifest but that holds no export items (written so, or edited with its manifest) is
    refused before anything is created or written, not once the run has made the table; so is one whose items hold
    a value DynamoDB never writes (``{"SS": "abc"}``: the run would map some such as they are). Damage further in is
    found by the run: a line that is no item stops it, an item holding such a value is a dead letter (checked_item)."""
    seen = 0
    try:
        for size, _item in sized_records(data_file.path, _valid_export_item, "an export item", head=True):
            seen += size
            if seen >= budget:
                return
    except ExportError as err:
        if "; " in str(err) and not isinstance(err, ExportLineError):  # it says what to do already
            raise
        raise ExportError(getattr(err, "message", str(err)),
                          "the file matches its manifest's MD5, so copying it again will not help: export "
                          "the table again (or restore the file as DynamoDB wrote it); nothing was written") from err


def file_problem(data_file: ExportFile) -> str | None:
    """What is wrong with one data file, or None."""
    if not FileSystems.exists(data_file.path):
        shared = not re.search(rf"(?:^|/){EXPORT_DIR}/[^/]+/data/", data_file.key)
        return f"{data_file.path} is missing" + (
            f" (manifest key {data_file.key}: an incremental export's data files are in the shared "
            f"{EXPORT_DIR}/data/ folder beside the export folders; copy that folder too)" if shared else "")
    expected_hex = (base64.b64decode(data_file.md5).hex() if data_file.md5
                    else data_file.etag.strip('"') if data_file.etag and "-" not in data_file.etag else None)
    if expected_hex is None:
        return None
    if data_file.path.startswith("s3://") and data_file.etag and "-" not in data_file.etag:
        found = str(FileSystems.checksum(data_file.path)).strip('"')
    else:
        digest = hashlib.md5()
        with FileSystems.open(data_file.path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        found = digest.hexdigest()
    return None if found == expected_hex else f"{data_file.path} does not match its manifest MD5 (changed or cut short)"


def iter_export_items(path: str, limit: int | None = None,
                      options: PipelineOptions | None = None) -> Iterator[dict[str, Any]]:
    """Items of the whole export, file by file (for samples and small tools; the pipeline reads in parallel)."""
    produced = 0
    for data_file in read_manifest(path, options).files:
        for item in iter_file_items(data_file.path):
            if limit is not None and produced >= limit:
                return
            produced += 1
            yield item


def mismatch_record(kind: str, where: str, expected: int, actual: int) -> dict[str, Any]:
    """A count_mismatch record: ``kind`` is "file" (one data file) or "total" (the whole export)."""
    return {"kind": kind, "file": where, "expected": expected, "actual": actual}


class _ReadExportFileFn(beam.DoFn):
    """Reads one data file, given as ``(its number in the manifest, ExportFile)``, into item batches.

    With ``mark_done`` the file's batches are followed by ``SegmentDone(number)`` in the same stream,
    as a scan segment's are, so the run folder records the file once its rows are stored; only when
    it held what its manifest line says: a file whose count differs is read again by ``--resume``
    (its rows are rewritten identically), so its count mismatch is reported again and never lost.
    """

    def __init__(self, mark_done: bool = False) -> None:
        self._mark_done = mark_done
        self._items = Metrics.counter(NAMESPACE, "items_read")
        self._files = Metrics.counter(NAMESPACE, "export_files_read")
        self._mismatches = Metrics.counter(NAMESPACE, "export_count_mismatch")

    def process(self, element: tuple[int, ExportFile]) -> Iterable[Any]:
        number, data_file = element
        count = 0
        for batch in file_batches(_checked_file_items(data_file.path)):
            count += len(batch)
            yield batch
        self._items.inc(count)
        self._files.inc()
        yield beam.pvalue.TaggedOutput("file_counts", count)
        if count != data_file.item_count:
            self._mismatches.inc()
            yield beam.pvalue.TaggedOutput("count_mismatch",
                                           mismatch_record("file", data_file.key, data_file.item_count, count))
        elif self._mark_done:
            yield SegmentDone(number)


def _check_total(actual: int, expected: int, where: str) -> Iterable[dict[str, Any]]:
    if actual != expected:
        Metrics.counter(NAMESPACE, "export_count_mismatch").inc()
        yield mismatch_record("total", where, expected, actual)


class ReadDynamoDBExport(beam.PTransform):
    """Items of a DynamoDB export: ``{"batches": PCollection[Batch], "count_mismatch": PCollection[dict]}``.

    Items travel in batches (:class:`~.batches.Batch`) of up to ``BATCH_ITEMS``.

    The manifest is read when the transform is built (it is small, and a wrong path should fail
    before any worker starts); ``.manifest`` gives the expected counts to the pipeline's report.
    Each data file is one element, spread over the workers by ``Create``'s own Reshuffle, so files are read in parallel.

    For a resumable run, data files play the part of scan segments, numbered by their place in the
    manifest: ``mark_done`` follows each file's batches with its ``SegmentDone`` (see
    :class:`_ReadExportFileFn`), and ``completed_files`` (from the run's checkpoint) are left out;
    the export's total is then checked against what the files left to read should add up to.
    """

    def __init__(self, path: str, manifest: ExportManifest | None = None, *,
                 completed_files: frozenset[int] | set[int] = frozenset(), mark_done: bool = False) -> None:
        super().__init__()
        self.manifest = manifest or read_manifest(path)
        self._completed, self._mark_done = frozenset(completed_files), mark_done

    def expand(self, pbegin: beam.pvalue.PBegin) -> dict[str, beam.PCollection]:
        manifest = self.manifest
        files = [(number, f) for number, f in enumerate(manifest.files) if number not in self._completed]
        done_items = sum(f.item_count for number, f in enumerate(manifest.files) if number in self._completed)
        read = (
            pbegin
            | "Files" >> beam.Create(files)  # its own Reshuffle spreads the files (a second one spread nothing more)
            | "Read" >> beam.ParDo(_ReadExportFileFn(self._mark_done)).with_output_types(Batch).with_outputs(
                "file_counts", "count_mismatch", main="batches")
        )
        total = (
            read.file_counts
            | "Total" >> beam.CombineGlobally(sum)
            | "CheckTotal" >> beam.FlatMap(_check_total, manifest.item_count - done_items,
                                           f"{manifest.export_dir}/{SUMMARY}")
        )
        mismatches = (read.count_mismatch, total) | "Mismatches" >> beam.Flatten()
        return {"batches": read.batches, "count_mismatch": mismatches}
