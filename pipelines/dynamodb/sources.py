"""DynamoDB as a :class:`~ddb2bt.pipelines.source.Source`: the live table (a parallel Scan) and a full export.

Thin adapters: the reading itself is :mod:`.scan` and :mod:`.export`; the random samples are
:mod:`ddb2bt.pipelines.dynamodb.sample`'s.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from apache_beam.options.pipeline_options import PipelineOptions

from ..run.service_errors import redact
from ..source import Snapshot, Source, SourceRead
from .sample import export_sample, scan_sample
from .aws import s3_beam_args
from .client import ClientSettings, describe_source, make_client
from .export import ExportError, ExportManifest, ReadDynamoDBExport, iter_export_items, read_manifest, verify_export
from .scan import ScanDynamoDB, choose_total_segments, sample_items, scan_segment

if TYPE_CHECKING:
    from ...mappers.table import SourceDescription
    from ...mappers.spec import SourceSpec

SOURCE_DRIFT = {"item_count", "size_bytes"}
"""DescribeTable figures that move on their own (refreshed about every six hours): not part of what a plan reviewed."""


class ScanSource(Source):
    """The live table, read by a parallel Scan paced by its read capacity; segments resume from savepoints."""

    kind = "scan"
    pieces_name = "scan segments"
    positions = True
    live = True

    def __init__(self, spec: SourceSpec, description: SourceDescription | None = None) -> None:
        assert spec.table is not None, "a spec without an export names its table"  # SourceSpec's own rule
        self.spec, self.table = spec, spec.table
        self.description = description
        """The read rate's capacity, when given (:meth:`described`); else each scan worker asks DescribeTable."""

    def name(self) -> str:
        return self.table

    def describe(self) -> SourceDescription:
        return describe_source(make_client(ClientSettings.from_source(self.spec)), self.table)

    def described(self, description: SourceDescription | None) -> ScanSource:
        return ScanSource(self.spec, description)

    def choose_pieces(self, description: SourceDescription | None) -> int:
        return choose_total_segments(description.size_bytes if description else 0)

    def expected_items(self, description: SourceDescription | None, total: int, done: frozenset[int],
                       pipeline_options: Any = None) -> tuple[int | None, str]:
        if description is None or not description.item_count:
            return None, ""
        return description.item_count * (total - len(done)) // total, "DescribeTable, refreshed about every six hours"

    def state(self, description: SourceDescription | None) -> dict[str, Any]:
        described = description.model_dump(mode="json", exclude=SOURCE_DRIFT) if description is not None else None
        endpoint = redact(self.spec.endpoint_url) if self.spec.endpoint_url else None  # a plan file holds no secret
        return {"table": self.table, "endpoint_url": endpoint, "region": self.spec.region, "description": described}

    def read(self, p: Any, *, total_segments: int = 1, completed: frozenset[int] = frozenset(),
             mark_done: bool = False, segments_in_flight: int | None = None,
             start_keys: dict[int, dict[str, Any]] | None = None, progress_dir: str | None = None,
             count_read: bool = True) -> SourceRead:
        # a scan's segments are always followed by their done markers (validate's checkpoint needs them too);
        # mark_done says whether savepoints follow its pages. Its reader is the migration's writer, which passes a
        # barrier on once everything before it is stored: the segments read at once may interleave their pages.
        # Validate (no savepoints) compares a segment's rows together: segment after segment.
        return SourceRead(p | "Scan" >> ScanDynamoDB(self.spec, total_segments, completed_segments=completed,
                                                     segments_in_flight=segments_in_flight, start_keys=start_keys,
                                                     savepoints=mark_done, progress_dir=progress_dir,
                                                     interleave=mark_done, table_info=self.description))

    def items(self, limit: int | None = None) -> list[dict]:
        client = make_client(ClientSettings.from_source(self.spec))
        if limit is None:
            return list(scan_segment(client, self.table))
        return sample_items(client, self.table, limit)

    def random_sample(self, n: int, *, item_count: int = 0, seed: int | None = None) -> list[dict]:
        return scan_sample(self.spec, n, random.Random(seed), item_count)


class ExportSource(Source):
    """A full export (DYNAMODB_JSON or ION) in S3, Cloud Storage or a folder: its data files are the pieces, each checked
    against the manifest's count and MD5; a snapshot at its exportTime."""

    kind = "export"
    pieces_name = "export data files"

    def __init__(self, spec: SourceSpec) -> None:
        assert spec.export is not None
        self.spec, self.path = spec, spec.export.path

    def _options(self) -> PipelineOptions:
        # Beam's S3 filesystem wants options even outside a pipeline; its endpoint by the project's rule (.aws)
        return PipelineOptions(s3_beam_args([], self.spec))

    def name(self) -> str:
        return self.spec.table or self.path

    def check(self, pipeline_options: Any = None) -> int:
        manifest = verify_export(self.path, pipeline_options)  # damaged files: refused before writing
        self._of_the_table(manifest)
        return len(manifest.files)

    def _of_the_table(self, manifest: ExportManifest) -> None:
        """ExportError when the spec names a table and the export's summary names another: its items would be
        written as the named table's (a wrong path, or a folder of another table's exports)."""
        named = self.spec.table
        if not named or manifest.table is None:
            return
        wanted = named.rpartition("table/")[2].partition("/")[0] if named.startswith("arn:") else named
        if manifest.table.name != wanted:
            raise ExportError(f"the export in {manifest.export_dir} is of table {manifest.table.name} "
                              f"({manifest.table.arn}), but source.table is {named}",
                              f"point source.export.path at an export of {named}, or fix source.table")

    def locations(self) -> dict[str, str | None]:
        return {"source.export.path": self.path}

    def expected_items(self, description: SourceDescription | None, total: int, done: frozenset[int],
                       pipeline_options: Any = None) -> tuple[int | None, str]:
        files = read_manifest(self.path, pipeline_options).files
        return sum(f.item_count for number, f in enumerate(files) if number not in done), "the export's manifest"

    def state(self, description: SourceDescription | None) -> dict[str, Any]:
        manifest = read_manifest(self.path, self._options())
        return {"export": self.path, "export_id": manifest.export_id, "item_count": manifest.item_count,
                "files": sorted([f.key, f.item_count, f.md5 or f.etag] for f in manifest.files)}

    def snapshot(self) -> Snapshot:
        manifest = read_manifest(self.path)
        table = None if manifest.table is None else {"arn": manifest.table.arn, "table_id": manifest.table.table_id}
        return Snapshot(manifest.export_time, f"full export {manifest.export_id} at {manifest.export_time}",
                        f"the export in {manifest.export_dir}", table)

    def read(self, p: Any, *, total_segments: int = 1, completed: frozenset[int] = frozenset(),
             mark_done: bool = False, segments_in_flight: int | None = None,
             start_keys: dict[int, dict[str, Any]] | None = None, progress_dir: str | None = None,
             count_read: bool = True) -> SourceRead:
        read = p | "ReadExport" >> ReadDynamoDBExport(self.path, completed_files=completed, mark_done=mark_done)
        return SourceRead(read["batches"], read["count_mismatch"])

    def items(self, limit: int | None = None) -> list[dict]:
        self._of_the_table(read_manifest(self.path, self._options()))  # the plan's sample: it says so too
        return list(iter_export_items(self.path, limit=limit, options=self._options()))

    def random_sample(self, n: int, *, item_count: int = 0, seed: int | None = None) -> list[dict]:
        self._of_the_table(read_manifest(self.path, self._options()))
        return export_sample(self.path, n, random.Random(seed))
