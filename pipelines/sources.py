"""Items from a spec's source without Beam: a sample for the dry run, or everything for `validate --full`."""

from __future__ import annotations

from ..mappers.spec import SourceSpec


def read_items(source: SourceSpec, limit: int | None = None) -> list[dict]:
    """The first `limit` items (a few scan pages, never a full scan), or every item (one sequential scan)."""
    if source.export is not None:
        from apache_beam.options.pipeline_options import PipelineOptions

        from .dynamodb.aws import s3_beam_args
        from .dynamodb.export import iter_export_items

        # Beam's S3 filesystem wants options even outside a pipeline; its endpoint by the project's rule (.aws).
        options = PipelineOptions(s3_beam_args([], source))
        return list(iter_export_items(source.export.path, limit=limit, options=options))
    from .dynamodb.client import ClientSettings, make_client
    from .dynamodb.scan import sample_items, scan_segment

    table = source.table
    assert table is not None, "a spec without an export names its table"  # SourceSpec's own rule
    client = make_client(ClientSettings.from_source(source))
    if limit is None:
        return list(scan_segment(client, table))
    return sample_items(client, table, limit)
