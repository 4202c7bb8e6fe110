"""What a run keeps on disk can be trusted: its own dead letters (0600), exports checked before writing,
a checkpoint that brings back the run's "now" and compares specs by what they migrate."""

from __future__ import annotations

import gzip
import os
import stat

import pytest

from ddb2bt.mappers.errors import UsageError
from ddb2bt.mappers.spec import MappingSpec
from ddb2bt.pipelines.run import checkpoint as ckpt
from ddb2bt.pipelines.run.dead_letters import (
    DeadLetterDestinationError,
    check_dead_letter_destination,
    consolidate,
    write_part,
)
from ddb2bt.pipelines.dynamodb.export import ExportError, iter_export_items, read_manifest, verify_export
from tests.pipelines.export_fixtures import make_items, write_export


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# --------------------------------------------------------------------------- dead letters


def test_a_dead_letter_path_belongs_to_one_run(tmp_path):
    path = str(tmp_path / "run" / "dead_letters.jsonl")
    check_dead_letter_destination(path)  # new and writable
    write_part(path, ['{"a": 1}'])
    with pytest.raises(DeadLetterDestinationError, match="another run") as refused:
        check_dead_letter_destination(path)
    assert isinstance(refused.value, UsageError)
    check_dead_letter_destination(path, resume=True)  # the same run, continued
    consolidate(path)
    with pytest.raises(DeadLetterDestinationError, match="another run"):
        check_dead_letter_destination(path)
    assert not [name for name in os.listdir(path + ".parts") if name.startswith(".probe")]


def test_a_dead_letter_path_that_cannot_be_written_is_refused_before_the_run(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(DeadLetterDestinationError, match="cannot be written"):
        check_dead_letter_destination(str(tmp_path / "a-file" / "dead_letters.jsonl"))


def test_dead_letter_files_are_0600_even_when_they_existed(tmp_path):
    path = tmp_path / "dead_letters.jsonl"
    path.write_text("old\n")
    os.chmod(path, 0o644)
    part = write_part(str(path), ['{"item": 1}'])
    assert consolidate(str(path)) == 1
    assert mode(path) == 0o600 and mode(part) == 0o600
    assert path.read_text() == '{"item": 1}\n'


# --------------------------------------------------------------------------- broken exports


@pytest.fixture
def export(tmp_path):
    export_dir = write_export(tmp_path / "export", make_items(60, padding=20), files=3)
    return export_dir, read_manifest(export_dir).files


def test_an_intact_export_verifies(export):
    export_dir, files = export
    assert verify_export(export_dir).files == files


def test_a_cut_short_gzip_is_found_before_writing_and_named_when_read(export):
    export_dir, files = export
    damaged = next(f for f in files if f.item_count)
    data = open(damaged.path, "rb").read()
    with open(damaged.path, "wb") as handle:
        handle.write(data[: len(data) // 2])
    with pytest.raises(ExportError, match="damaged") as found:
        verify_export(export_dir)
    assert damaged.path in str(found.value) and "MD5" in str(found.value)
    with pytest.raises(ExportError, match="cut short") as read:
        list(iter_export_items(export_dir))
    assert damaged.path in str(read.value)


def test_a_file_that_is_not_gzip_is_named(export):
    export_dir, files = export
    with open(files[0].path, "wb") as handle:
        handle.write(b'{"Item": {"pk": {"S": "plain text"}}}\n')
    with pytest.raises(ExportError, match=files[0].path):
        verify_export(export_dir)
    with pytest.raises(ExportError, match="not valid gzip") as read:
        list(iter_export_items(export_dir))
    assert files[0].path in str(read.value)


def test_a_missing_data_file_is_found_before_writing(export):
    export_dir, files = export
    os.remove(files[-1].path)
    with pytest.raises(ExportError, match="is missing") as found:
        verify_export(export_dir)
    assert files[-1].path in str(found.value)
    with pytest.raises(ExportError, match="cannot be read"):
        list(iter_export_items(export_dir))


def test_a_corrupt_line_is_named_with_its_file_and_line(export):
    export_dir, files = export
    with open(files[0].path, "wb") as handle:
        handle.write(gzip.compress(b'{"Item": {"pk": {"S": "a"}}}\n\xff\xfe not json\n'))
    with pytest.raises(ExportError, match=f"{files[0].path} line 2"):
        list(iter_export_items(export_dir))


# --------------------------------------------------------------------------- checkpoint


def spec(**source) -> MappingSpec:
    return MappingSpec.model_validate({
        "source": {"table": "T", "endpoint_url": "http://localhost:8000", "region": "us-east-1",
                   "partition_key": "pk", **source},
        "target": {"table": "T", "families": {"d": None}},
        "entities": [{"name": "e", "row_key": "{pk}", "rest": {"family": "d"}}],
    })


def test_a_resumed_run_gets_back_the_first_attempts_now(tmp_path):
    run_dir = str(tmp_path / "run")
    first = ckpt.Checkpoint.start(run_dir, ckpt.spec_hash(spec()), 4, "T", resume=False, now_ms=1_700_000_000_123)
    assert first.now_ms == 1_700_000_000_123
    again = ckpt.Checkpoint.start(run_dir, ckpt.spec_hash(spec()), 4, "T", resume=True, now_ms=1_800_000_000_000)
    assert again.now_ms == 1_700_000_000_123


def test_resume_compares_what_the_spec_migrates_not_how_it_connects():
    same = ckpt.spec_hash(spec())
    assert ckpt.spec_hash(spec(endpoint_url="http://127.0.0.1:8000")) == same
    assert ckpt.spec_hash(spec(region="eu-west-1", profile="other", read_budget=0.2, total_segments=8)) == same
    assert ckpt.spec_hash(spec(table="Other")) != same
    changed_mapping = spec().model_dump(by_alias=True)
    changed_mapping["entities"][0]["row_key"] = "x#{pk}"
    assert ckpt.spec_hash(MappingSpec.model_validate(changed_mapping)) != same


@pytest.mark.parametrize("text, problem", [
    ('{"spec_hash": 5', "not JSON"),
    ("[]", "not a JSON object"),
    ('{"spec_hash": "abc", "total_segments": "x", "table": "T", "now_ms": 1}', "total_segments 'x'"),
    ('{"spec_hash": "abc", "total_segments": 0, "table": "T", "now_ms": 1}', "total_segments 0"),
    ('{"total_segments": 4, "table": "T", "now_ms": 1}', "spec_hash None"),
    ('{"spec_hash": "abc", "total_segments": 4, "table": "T", "now_ms": "soon"}', "now_ms 'soon'"),
])
def test_a_damaged_checkpoint_is_named_with_what_to_do(tmp_path, text, problem):
    """A run folder's checkpoint.json that is not what a run wrote there: resuming it said "unexpected
    JSONDecodeError ... (a bug: please report it)" (or TypeError, ValueError), or used a "now" of 'soon'. Now one
    ResumeError (exit 2) naming the file, what is wrong and what to do, from each reader of it."""
    run_dir = tmp_path / "run"
    (run_dir / "segments").mkdir(parents=True)
    (run_dir / "checkpoint.json").write_text(text)
    for read in (lambda: ckpt.Checkpoint.start(str(run_dir), "abc", 4, "T", resume=True),
                 lambda: ckpt.Checkpoint.saved_total_segments(str(run_dir))):
        with pytest.raises(ckpt.ResumeError) as refused:
            read()
        message = str(refused.value)
        assert message.startswith(f"{run_dir}/checkpoint.json is not a checkpoint a run wrote ({problem}"), message
        assert message.endswith("start the run again with another --run-dir (it writes every row again)"), message


def test_a_stray_file_among_the_done_markers_is_no_segment_done(tmp_path):
    """segments/ holding a file that is no marker a run writes ('abc.done'): resume said "unexpected ValueError:
    invalid literal for int() ... (a bug)"; it marks no segment done (that segment is read again, which is safe)."""
    run_dir = tmp_path / "run"
    (run_dir / "segments").mkdir(parents=True)
    for name in ("0.done", "3.done", "abc.done", "-1.done", ".done"):
        (run_dir / "segments" / name).write_bytes(b"")
    assert ckpt.completed_segments(str(run_dir)) == frozenset({0, 3})


@pytest.mark.parametrize("text, problem", [("{not json", "not JSON"), ('{"a": 1}', "unexpected keyword argument 'a'"),
                                           ("[1]", "TypeError"), ('{"phases": [5]}', "TypeError")])
def test_a_damaged_cutover_file_is_named_with_what_to_do(tmp_path, text, problem):
    """cutover.json, tail.json and tail.stopped.json damaged or edited: cutover-status, catch-up, tail and redrive said
    'unexpected JSONDecodeError ... (a bug)' or 'unexpected TypeError: Timeline.__init__() got an unexpected keyword
    argument'; now one line naming the file (a usage error: exit 2)."""
    from ddb2bt.pipelines.cutover import tail, timeline
    from ddb2bt.pipelines.run.json_files import RunFileError

    (tmp_path / timeline.TIMELINE_FILE).write_text(text)
    with pytest.raises(RunFileError) as raised:
        timeline.peek(str(tmp_path))
    assert isinstance(raised.value, UsageError) and problem in raised.value.one_line()
    assert str(tmp_path / timeline.TIMELINE_FILE) in raised.value.one_line()
    (tmp_path / tail.TAIL_FILE).write_text(text)
    with pytest.raises(RunFileError, match="tail.json is not as ddb2bt wrote it"):
        tail.load_state(str(tmp_path))


@pytest.mark.parametrize("text", ["{not json", "[1]", '{"stopped_us": "soon"}'])
def test_a_damaged_tail_stop_record_is_named(tmp_path, text):
    from ddb2bt.pipelines.cutover import tail
    from ddb2bt.pipelines.run.json_files import RunFileError

    (tmp_path / tail.STOPPED_FILE).write_text(text)
    with pytest.raises(RunFileError, match="tail.stopped.json is not as ddb2bt wrote it"):
        tail.stopped_since(str(tmp_path), tail.TailState("arn", 0, {}, {}, 0, []))


@pytest.mark.parametrize("text", ["{not json", "[1]", "\xff\xfe"])
def test_a_damaged_validation_marker_is_named_with_what_to_do(tmp_path, text):
    from ddb2bt.pipelines.validate.files import start_marker

    (tmp_path / ckpt.VALIDATION_MARKER).write_bytes(text.encode("latin-1"))
    with pytest.raises(ckpt.ResumeError, match="validate.json is not as ddb2bt wrote it"):
        start_marker(str(tmp_path), {"sample": None}, resume=True)


# --------------------------------------------------------------------------- the one reader of run-folder JSON


def test_a_run_file_is_read_through_its_parse_or_is_none_when_absent(tmp_path):
    from ddb2bt.pipelines.run.json_files import json_object, read_json

    path = tmp_path / "state.json"
    assert read_json(str(path)) is None
    path.write_text('{"a": [1, 2]}')
    assert read_json(str(path)) == {"a": [1, 2]}
    assert read_json(str(path), json_object) == {"a": [1, 2]}
    assert read_json(str(path), lambda data: data["a"][1]) == 2


@pytest.mark.parametrize("text, parse, problem", [
    ("{not json", None, "(not JSON: Expecting property name enclosed in double quotes)"),
    ("\xff\xfe\xfd", None, "(not JSON: "),
    ("[1]", "json_object", "(not a JSON object: [1])"),
    ("{}", lambda data: data["stopped_us"], "(no field 'stopped_us')"),
    ('{"n": "soon"}', lambda data: int(data["n"]), "(ValueError: invalid literal for int() with base 10: 'soon')"),
    ("[1]", lambda data: data.get("n"), "(AttributeError: 'list' object has no attribute 'get')"),
])
def test_a_damaged_run_file_is_refused_in_one_line_naming_it_with_what_to_do(tmp_path, text, parse, problem):
    """Whatever is wrong (not JSON, not the object a parse expects, a field missing or of another type), one
    RunFileError (exit 2), by default: the file, what is wrong, and what to do; no traceback of a JSONDecodeError,
    KeyError or TypeError ('a bug')."""
    from ddb2bt.pipelines.run.json_files import RunFileError, json_object, read_json

    path = tmp_path / "state.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(RunFileError) as refused:
        read_json(str(path), json_object if parse == "json_object" else parse)
    assert isinstance(refused.value, UsageError) and refused.value.__cause__ is None
    assert refused.value.one_line() == str(refused.value)  # one line
    assert str(refused.value).startswith(f"{path} is not as ddb2bt wrote it {problem}"), str(refused.value)
    assert str(refused.value).endswith("; restore it, or move the run folder aside and start that step again in a new one")


def test_a_readers_own_refusal_says_what_the_file_should_be_and_what_to_do(tmp_path):
    """A reader names its own error class, what the file is and its own advice; a parse's NotAsWritten is shown as
    it is."""
    from ddb2bt.pipelines.run.json_files import NotAsWritten, read_json

    path = tmp_path / "record.json"
    path.write_text('{"ranges": 5}')

    def ranges(data):
        if not isinstance(data["ranges"], list):
            raise NotAsWritten(f"ranges {data['ranges']!r}")
        return data["ranges"]

    with pytest.raises(ckpt.ResumeError, match=r"record.json is not a record a run wrote \(ranges 5\); start again"):
        read_json(str(path), ranges, error=ckpt.ResumeError, written="a record a run wrote", fix="start again")


@pytest.mark.parametrize("name", ["checkpoint.json", "redrive.json"])
def test_a_damaged_file_a_redrive_reads_back_is_named(tmp_path, name):
    """A redrive reads the "now", the table and the cutover its folder recorded: a damaged checkpoint.json or
    redrive.json said 'unexpected JSONDecodeError ... (a bug)' (or AttributeError for JSON that is no object)."""
    from ddb2bt.app.redrive_folder import cutover_of, recorded_now, recorded_table
    from ddb2bt.pipelines.run.json_files import RunFileError

    (tmp_path / name).write_text("[1]")
    readers = [recorded_now, recorded_table] + ([cutover_of] if name == "redrive.json" else [])
    for read in readers:
        with pytest.raises(RunFileError, match=f"{name} is not as ddb2bt wrote it \\(not a JSON object"):
            read(str(tmp_path))


def test_a_damaged_backfill_checkpoint_is_named_to_the_catch_up(tmp_path):
    """The catch-up and cutover-status read the backfill's checkpoint.json by the checkpoint's own rule: a field a
    run always writes missing was 'unexpected KeyError ... (a bug)', JSON that is no object an AttributeError."""
    from ddb2bt.pipelines.cutover import timeline

    for text, problem in (('{"spec_hash": "x", "now_ms": 1, "table": "T"}', "total_segments None"),
                          ("[1]", "not a JSON object")):
        (tmp_path / "checkpoint.json").write_text(text)
        with pytest.raises(ckpt.ResumeError, match=f"checkpoint.json is not a checkpoint a run wrote \\({problem}"):
            timeline.find_backfill(str(tmp_path), spec())
