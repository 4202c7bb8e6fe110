"""Resumable runs: which segments of a scan (or data files of an export) are completely migrated.

Layout inside a run directory (local, gs:// or s3://, through Beam's FileSystems)::

    checkpoint.json        {"spec_hash": ..., "total_segments": N, "table": ..., "now_ms": ...}   by the launcher
    segments/<n>.done      one empty marker per completed segment                  written by workers
    segments/<n>.at        a scan segment's savepoint: where it goes on            written by workers

An export run keeps the same checkpoint: its data files are its segments, numbered by their place
in the manifest (``total_segments`` is the file count, ``table`` the export's path).

One file per segment rather than a shared list: workers on different machines mark segments
concurrently, and object stores have no atomic read-modify-write. A marker is written only
after every row of the segment is durably in Bigtable *and* its dead letters are in a part
file (see :mod:`.pipeline`), so ``--resume`` may skip it without losing anything.

Inside a segment, a savepoint (``<n>.at``) holds the LastEvaluatedKey of the last Scan page whose
rows (and dead letters) are stored, written the same way after each page; ``--resume`` starts
that segment there (``ExclusiveStartKey``), so a killed run reads again at most the pages that
were in flight. The key is kept as DynamoDB JSON with ``B`` values in base64, so binary keys come
back byte for byte. On a local disk it is replaced atomically; object stores replace whole
objects, and there it is written at most once a second per segment (Cloud Storage's limit on
writes to one object). Re-running a
segment that was partly written is safe: cells carry deterministic timestamps, so the rewrite
replaces each cell with itself. That needs the same "now" (the default cell timestamp and TTL
cut-off when the spec sets no ``migration_time``): the run's ``now_ms`` is stored here and a
resumed run takes it back, or cells the first attempt wrote would get a second version.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator
from ...mappers.errors import ServiceError, UsageError
from .dead_letters import create_private
from .json_files import NotAsWritten, json_object, read_json

CHECKPOINT_FILE = "checkpoint.json"
SEGMENTS_DIR = "segments"


class ResumeError(UsageError):
    """The run directory cannot be resumed with this spec or segment count."""


class RunFolderError(ServiceError):
    """The run folder stopped taking writes mid-run (disk full, read-only, over quota). What was marked before is
    true (a marker or savepoint is written only after what it stands for is stored), so the run resumes once it is
    writable again: a ServiceError, which the CLI ends with the reconciliation and the resume command."""


@contextmanager
def folder_writes(folder: str) -> Iterator[None]:
    """Writes into the run folder ``folder`` while a run goes on: an OSError (ENOSPC, EROFS, EDQUOT, EACCES) becomes a
    :class:`RunFolderError` naming the folder, which keeps its kind across Beam's re-raise; else it was "a bug"."""
    try:
        yield
    except (ConnectionError, TimeoutError):  # an object store's network: the service's error, as it is
        raise
    except OSError as err:
        raise RunFolderError(f"the run folder {folder} cannot be written ({err.strerror or err})",
                             "free space there (or make it writable again)") from err


VALIDATION_MARKER = "validate.json"
"""What a validation's run folder holds (pipelines/validate/files.py) and a migration's never does."""


def refuse_validation_folder(run_dir: str) -> None:
    """UsageError when ``run_dir`` is a validation's run folder (its checkpoint is no migration's): for a migration,
    before :meth:`Checkpoint.refuse_taken` or a resume would misname it (validate keeps a checkpoint of its own)."""
    from apache_beam.io.filesystems import FileSystems

    if FileSystems.exists(_join(run_dir, VALIDATION_MARKER)):
        raise UsageError(f"{run_dir} is the run folder of a validation, not of a migration",
                         "give migrate a --run-dir of its own (or resume the validation with `ddb2bt validate`)")


NOT_COMPARED = {"source": {"endpoint_url", "region", "profile", "role_arn", "read_budget", "on_demand_rcu", "total_segments"},
                "target": {"app_profile"}}
"""Settings that say how to reach or pace a service, not what is migrated: a resumed run may change
them (``localhost`` for ``127.0.0.1``, another profile or read budget). Segment counts are compared
on their own, with an error of their own."""


def spec_hash(spec: Any) -> str:
    """A stable hash of what the spec migrates (after key names were filled in), blind to :data:`NOT_COMPARED`."""
    return spec_data_hash(spec.model_dump(mode="json", by_alias=True))


def spec_data_hash(data: dict[str, Any]) -> str:
    """:func:`spec_hash` of a spec as its JSON data (``model_dump(mode="json", by_alias=True)``), e.g. one saved."""
    data = {key: dict(value) if isinstance(value, dict) else value for key, value in data.items()}
    for section, names in NOT_COMPARED.items():
        for name in names:
            (data.get(section) or {}).pop(name, None)
    text = json.dumps(data, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _join(*parts: str) -> str:
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.join(*parts)


def _write(path: str, data: bytes, *, private: bool = False) -> None:
    """``data`` as the whole of ``path``: on this machine written beside it and renamed over it, so a kill or a full
    disk leaves the old file or the new one, never half of one (an empty checkpoint.json made a run folder that
    could not be resumed); ``private``: mode 0600 (user data). An object store's object appears whole on close."""
    from apache_beam.io.filesystems import FileSystems

    if "://" in path:
        with FileSystems.create(path) as handle:
            handle.write(data)
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)  # as Beam's create did
    partial = f"{path}.{os.getpid()}.tmp"
    try:
        with create_private(partial) if private else open(partial, "wb") as handle:
            handle.write(data)
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


@dataclass(frozen=True)
class Checkpoint:
    """A run directory's checkpoint: what it was started with, and how to mark progress."""

    run_dir: str
    spec_hash: str
    total_segments: int
    table: str
    now_ms: int | None = None
    """The run's "now" in ms: reuse it for every attempt (None only for checkpoints from before it was stored)."""

    @classmethod
    def refuse_taken(cls, run_dir: str) -> None:
        """ResumeError when ``run_dir`` already holds a run (a new run must not start there); reads only."""
        from apache_beam.io.filesystems import FileSystems

        if FileSystems.exists(_join(run_dir, CHECKPOINT_FILE)):
            raise ResumeError(
                f"{run_dir} already holds a migration run; pass --resume to continue it or choose another run directory."
            )

    @classmethod
    def start(cls, run_dir: str, spec_hash_: str, total_segments: int, table: str, resume: bool,
              now_ms: int | None = None, *, export: bool = False) -> Checkpoint:
        """Create the checkpoint of a new run (storing ``now_ms``), or check that a resumed run matches its own.

        ``export``: the run reads an export, whose data files are the segments (for the error messages).

        A resumed run's checkpoint carries the ``now_ms`` stored by the first attempt, whatever is
        passed: build the pipeline with ``checkpoint.now_ms``.
        """
        path = _join(run_dir, CHECKPOINT_FILE)
        if not resume:
            cls.refuse_taken(run_dir)
            _write(path, json.dumps({"spec_hash": spec_hash_, "total_segments": total_segments, "table": table,
                                     "now_ms": now_ms}, indent=2).encode())
            return cls(run_dir, spec_hash_, total_segments, table, now_ms)
        saved = read_checkpoint(run_dir)
        if saved is None:
            raise ResumeError(f"nothing to resume: {path} does not exist.")
        if saved["spec_hash"] != spec_hash_:
            raise ResumeError(
                f"the spec changed since the run in {run_dir} started (what it maps or where it writes); segments "
                "already written used the old spec. Resume with the original spec, or start a new run."
            )
        if saved["total_segments"] != total_segments and export:
            raise ResumeError(
                f"the run in {run_dir} read an export of {saved['total_segments']} data files; its manifest now lists "
                f"{total_segments}: the export changed since the run started. Start a new run."
            )
        if saved["total_segments"] != total_segments:
            raise ResumeError(
                f"the run in {run_dir} used {saved['total_segments']} scan segments, not {total_segments}; segment "
                "numbers only mean the same items with the same total. Resume without --total-segments "
                f"or with --total-segments {saved['total_segments']}."
            )
        return cls(run_dir, spec_hash_, total_segments, table, saved.get("now_ms"))

    @staticmethod
    def saved_total_segments(run_dir: str) -> int | None:
        """The segment count a run directory was started with, if any (so resume needs no repeat of it)."""
        saved = read_checkpoint(run_dir)
        return None if saved is None else int(saved["total_segments"])

    def completed(self) -> frozenset[int]:
        return completed_segments(self.run_dir)


def read_checkpoint(run_dir: str) -> dict[str, Any] | None:
    """``run_dir``'s checkpoint.json as a run writes it, or None when there is none; a ResumeError naming the file and
    what is wrong otherwise (a file damaged or edited: it was 'unexpected JSONDecodeError ... (a bug)', or a "now" of
    'soon' used)."""
    return read_json(_join(run_dir, CHECKPOINT_FILE), _as_checkpoint, error=ResumeError, written="a checkpoint a run wrote",
                     fix="start the run again with another --run-dir (it writes every row again)")


def _as_checkpoint(data: Any) -> dict[str, Any]:
    saved = json_object(data)
    for name, ok in (("spec_hash", lambda v: isinstance(v, str)),
                     ("total_segments", lambda v: type(v) is int and v >= 1),
                     ("now_ms", lambda v: v is None or type(v) is int)):
        if not ok(saved.get(name)):
            raise NotAsWritten(f"{name} {saved.get(name)!r}")
    return saved


def completed_segments(run_dir: str) -> frozenset[int]:
    from apache_beam.io.filesystems import FileSystems

    pattern = _join(run_dir, SEGMENTS_DIR, "*.done")
    found = FileSystems.match([pattern])[0].metadata_list
    names = (meta.path.rsplit("/", 1)[-1].rsplit("\\", 1)[-1] for meta in found)
    numbers = (name[: -len(".done")] for name in names)
    return frozenset(int(number) for number in numbers if number.isascii() and number.isdigit())  # markers runs write


def mark_segment_done(run_dir: str, segment: int) -> None:
    """Record one segment as completely migrated (idempotent)."""
    with folder_writes(run_dir):
        _write(_join(run_dir, SEGMENTS_DIR, f"{segment}.done"), b"")


def key_to_json(key: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB key (wire format as botocore parses it: ``B`` as bytes) as JSON-safe DynamoDB JSON, ``B`` in base64."""
    out: dict[str, Any] = {}
    for name, value in key.items():
        (tag, payload), = value.items()
        if tag == "B":
            payload = base64.b64encode(payload if isinstance(payload, bytes) else base64.b64decode(payload)).decode()
        elif tag not in ("S", "N"):
            raise ValueError(f"key attribute {name!r} has type {tag}; DynamoDB keys are S, N or B")
        out[name] = {tag: payload}
    return out


def key_from_json(data: dict[str, Any]) -> dict[str, Any]:
    """:func:`key_to_json` undone: ``B`` back to bytes, as botocore takes an ``ExclusiveStartKey``."""
    return {name: {tag: base64.b64decode(payload, validate=True) if tag == "B" else payload
                   for tag, payload in value.items()} for name, value in data.items()}


def save_position(run_dir: str, segment: int, key: dict[str, Any]) -> None:
    """Record where scan segment ``segment`` goes on (the LastEvaluatedKey of its last stored page)."""
    data = json.dumps({"segment": segment, "ExclusiveStartKey": key_to_json(key)}).encode()
    path = _join(run_dir, SEGMENTS_DIR, f"{segment}.at")
    with folder_writes(run_dir):
        _write(path, data, private=True)  # a key's values are user data: 0600, as dead letters are


def saved_positions(run_dir: str) -> dict[int, dict[str, Any]]:
    """Segment -> ExclusiveStartKey for the segments with a savepoint and no done marker (an unreadable savepoint
    counts as none: that segment is read from its start, which is safe)."""
    from apache_beam.io.filesystems import FileSystems

    done = completed_segments(run_dir)
    found: dict[int, dict[str, Any]] = {}
    for meta in FileSystems.match([_join(run_dir, SEGMENTS_DIR, "*.at")])[0].metadata_list:
        name = meta.path.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
        try:
            segment = int(name[: -len(".at")])
            if segment in done:
                continue
            with FileSystems.open(meta.path) as handle:
                saved = json.loads(handle.read())
            found[segment] = key_from_json(saved["ExclusiveStartKey"])
        except (ValueError, KeyError, TypeError, AttributeError, OSError):
            continue
    return found


def segment_progress(run_dir: str) -> tuple[int, int | None]:
    """(segments done, total segments or None before the run has started): what a progress bar shows.

    Markers are written as each segment's rows are stored, so polling them from another thread
    tracks a DirectRunner run that Beam itself reports only at the end.
    """
    total = Checkpoint.saved_total_segments(run_dir)
    return (len(completed_segments(run_dir)) if total is not None else 0), total
