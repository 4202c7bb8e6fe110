"""An incremental export is parsed once when the catch-up runs in this process: the apply takes the changes the
check read and checked (pipelines/dynamodb/incremental_export.py check_export's ``keep``), exactly those, and only the
read they were kept for."""

from __future__ import annotations

import gzip
import shutil
import tempfile
from pathlib import Path

import apache_beam as beam
import pytest

from ddb2bt.pipelines.dynamodb import incremental_export
from ddb2bt.pipelines.dynamodb.export import ExportError
from ddb2bt.pipelines.dynamodb.incremental_export import ReadIncrementalExport, check_export, read_incremental_manifest
from ddb2bt.pipelines.run.local_runner import new_pipeline
from apache_beam.options.pipeline_options import PipelineOptions

DOCUMENTED = Path(__file__).resolve().parents[1] / "data" / "aws_exports" / "documented" / "ddb" / "posts"
INC1 = "01714568400000-b2c3d4e5"  # the documented layout's first incremental export: 4 changes in 3 files (one empty)


def _read(manifest, kept: str | None = None) -> list:
    """The changes ReadIncrementalExport gives, as comparable text (written out by the pipeline: a closure's list
    would be a pickled copy)."""
    with tempfile.TemporaryDirectory() as out:
        with new_pipeline(PipelineOptions(["--direct_running_mode=in_memory"])) as p:
            read = p | ReadIncrementalExport(manifest, kept)
            _ = (read["batches"] | beam.FlatMap(lambda batch: [repr(change) for change in batch])
                 | beam.io.WriteToText(f"{out}/changes"))
        return sorted(line for path in Path(out).glob("changes*") for line in path.read_text().splitlines())


@pytest.fixture
def export(tmp_path):
    root = tmp_path / "posts"
    shutil.copytree(DOCUMENTED, root)
    return read_incremental_manifest(str(root / "AWSDynamoDB" / INC1))


def test_kept_changes_are_what_a_fresh_read_gives_and_the_file_is_not_read_again(export):
    fresh = _read(export)
    assert len(fresh) == 4 and all("Change(keys=" in line for line in fresh)
    assert check_export(export, ("pk", "sk"), keep="run") == 4
    for data_file in export.files:  # the apply must not need the files any more: it takes what was checked
        Path(data_file.path).unlink()
    assert _read(export, "run") == fresh


def test_only_the_read_the_changes_were_kept_for_takes_them(export):
    """A read no check of its own preceded (another run in this process, a file copied again since) reads the files,
    and a later keeping check drops what an earlier one kept."""
    fresh = _read(export)
    check_export(export, ("pk", "sk"), keep="first")
    check_export(export, ("pk", "sk"), keep="second")
    assert set(incremental_export._checked) == {"second"}
    for data_file in export.files:
        Path(data_file.path).unlink()
    for name in (None, "first"):
        with pytest.raises(Exception, match="cannot be read"):
            _read(export, name)
    assert _read(export, "second") == fresh


def test_without_keep_every_file_is_read_again(export):
    assert check_export(export, ("pk", "sk")) == 4
    for data_file in export.files:
        Path(data_file.path).unlink()
    with pytest.raises(Exception, match="cannot be read"):
        _read(export)


def test_the_budget_keeps_whole_files_only(export, monkeypatch):
    monkeypatch.setattr(incremental_export, "CHECKED_KEPT_BYTES", 10)  # less than the first file's lines
    assert check_export(export, ("pk", "sk"), keep="run") == 4
    assert incremental_export._checked == {}  # nothing half-kept: the file is read again whole


def test_a_refused_export_keeps_nothing(export):
    """The check refuses an export whose last file holds a bad line: the changes of the files before it are dropped."""
    last = next(f for f in reversed(export.files) if f.item_count)
    with gzip.open(last.path, "ab") as data:
        data.write(b'{"Keys": {"pk": {"S": "x"}}, "NewImage": {"pk": {"S": "x"}}}\n')  # no WriteTimestampMicros
    with pytest.raises(ExportError, match="WriteTimestampMicros"):
        check_export(export, ("pk",), keep="run")
    assert incremental_export._checked == {}


def test_the_change_source_reads_what_its_own_check_kept(export):
    """The catch-up's path: IncrementalExportChanges.check(keep=True), then its read(p), applies what was checked."""
    from ddb2bt.pipelines.dynamodb.incremental_export import IncrementalExportChanges

    fresh = _read(export)
    source = IncrementalExportChanges(export.export_dir)
    source.check(("pk", "sk"), keep=True)
    for data_file in export.files:
        Path(data_file.path).unlink()
    with tempfile.TemporaryDirectory() as out:
        with new_pipeline(PipelineOptions(["--direct_running_mode=in_memory"])) as p:
            _ = (source.read(p).batches | beam.FlatMap(lambda batch: [repr(change) for change in batch])
                 | beam.io.WriteToText(f"{out}/changes"))
        assert sorted(line for path in Path(out).glob("changes*") for line in path.read_text().splitlines()) == fresh


def test_what_a_change_source_kept_goes_with_it(export):
    """A catch-up that fails between its check and its job (its target unreachable, say) leaves nothing kept once its
    source is dropped; while the source lives, its read takes what its check kept."""
    import gc

    from ddb2bt.pipelines.dynamodb.incremental_export import IncrementalExportChanges

    source = IncrementalExportChanges(export.export_dir)
    source.check(("pk", "sk"), keep=True)
    assert len(incremental_export._checked) == 1
    del source
    gc.collect()
    assert incremental_export._checked == {}


def test_the_kept_changes_are_frozen_out_of_the_collector_until_their_read_is_done(export):
    """While kept, the checked changes are left out of every collection (gc.freeze); once the read that takes them has
    given them all, the collector walks them (and everything else) as usual again, and it is on throughout."""
    import gc

    assert gc.get_freeze_count() == 0
    check_export(export, ("pk", "sk"), keep="run")
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    frozen = {id(change.keys) for _, change in incremental_export._checked["run"][export.files[0].path]}
    assert frozen and not frozen & {id(o) for o in gc.get_objects()}  # a frozen object is in no generation
    fresh_read = _read(export, "run")
    assert len(fresh_read) == 4
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    assert incremental_export._checked == {}


def test_a_refused_export_freezes_nothing_and_leaves_the_collector_on(export):
    import gc

    last = next(f for f in reversed(export.files) if f.item_count)
    with gzip.open(last.path, "ab") as data:
        data.write(b'{"Keys": {"pk": {"S": "x"}}, "NewImage": {"pk": {"S": "x"}}}\n')  # no WriteTimestampMicros
    with pytest.raises(ExportError):
        check_export(export, ("pk",), keep="run")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_change_source_dropped_before_its_job_thaws_what_its_check_froze(export):
    import gc

    from ddb2bt.pipelines.dynamodb.incremental_export import IncrementalExportChanges

    source = IncrementalExportChanges(export.export_dir)
    source.check(("pk", "sk"), keep=True)
    assert gc.get_freeze_count() > 0
    del source
    gc.collect()
    assert gc.get_freeze_count() == 0 and incremental_export._checked == {}


def test_a_collector_the_caller_turned_off_stays_off_and_nothing_is_frozen(export):
    import gc

    gc.disable()
    try:
        check_export(export, ("pk", "sk"), keep="run")
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
    assert len(_read(export, "run")) == 4
