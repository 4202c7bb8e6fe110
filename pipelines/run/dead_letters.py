"""Dead letters: one JSON line per item that did not reach Bigtable, with the item itself.

Every stage that can give up on an item (source, map, write) emits a :class:`DeadLetter` rather
than logging and moving on, so the reconciliation ``read = written + dead-lettered + skipped``
can hold and the item can be fixed and replayed. The item is kept in DynamoDB JSON (``B`` as
base64, sets as lists) exactly as read, never through ``float``.

Dead-letter files hold user data (whole items). Locally they are always mode 0600 (also a file
that existed before); on gs:// or s3:// the bucket's access control applies, so put them
somewhere only the migration's operators can read.

A dead-letter file belongs to one run: :func:`check_dead_letter_destination`, called before the
run starts, refuses a path that holds another run's dead letters (a resumed run continues its
own) and one that cannot be written, so neither is found out after the whole migration.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple

from ...mappers.attrvalue import to_export_json
from ...mappers.errors import Ddb2btError, UsageError
from ...mappers.limits import DeadLetterLimit

STAGES = ("source", "map", "write")


class DeadLetter(NamedTuple):
    """An item that was not migrated, and why."""

    item: dict[str, Any] | None
    """None for a letter about no one item (an export file whose count does not match its manifest)."""
    stage: str
    reason: str
    entity: str | None = None
    attribute: str | None = None
    row_key: bytes | None = None

    def to_json(self) -> str:
        """The dead-letter line described in docs/ARCHITECTURE.md."""
        return json.dumps(
            {
                "item": to_export_json(self.item),
                "entity": self.entity,
                "attribute": self.attribute,
                "stage": self.stage,
                "reason": self.reason,
                "row_key": None if self.row_key is None else self.row_key.decode("utf-8", "backslashreplace"),
            },
            ensure_ascii=False,
            sort_keys=True,
        )


class ItemsMapped(NamedTuple):
    """In band after each mapped batch: how many items it held, so that the dead letters can be judged against them."""

    items: int


class TooManyDeadLetters(Ddb2btError):
    """More items were dead-lettered than ``--max-dead-letters`` allows: the spec (or the data) needs fixing first.

    Exit 1, not 2: the run started (and wrote what it could) before it stopped; exit 2 says nothing started."""


class DeadLetterGate:
    """Counts the items and dead letters one worker sees and says when the run must stop (see ``DeadLetterLimit``)."""

    def __init__(self, limit: DeadLetterLimit | None, dead_letter_path: str, run_dir: str | None) -> None:
        self.limit, self.path, self.run_dir = limit, dead_letter_path, run_dir
        self.items = self.dead = 0
        self.reasons: Counter[str] = Counter()

    def letter(self, letter: DeadLetter) -> bool:
        """Count one dead letter of an item; True when a count limit is passed (a share waits for the batch's tally)."""
        self.dead += 1
        if self.limit is None:
            return False
        self.reasons[f"{letter.entity or '(no entity)'}: {letter.reason}"[:200]] += 1
        return self.limit.count is not None and self.limit.exceeded(self.dead, self.items)

    def mapped(self, count: int) -> bool:
        """Count the items of a mapped batch (its tally follows its dead letters); True when the run must stop."""
        self.items += count
        return self.limit is not None and self.limit.exceeded(self.dead, self.items)

    def error(self) -> TooManyDeadLetters:
        assert self.limit is not None
        reason, times = self.reasons.most_common(1)[0] if self.reasons else ("?", 0)
        accept = ("resume with --max-dead-letters 100%" if self.run_dir
                  else "run again with a higher --max-dead-letters")  # the CLI follows with the exact command
        return TooManyDeadLetters(
            f"migration stopped: {self.limit.describe(self.dead, self.items)} (counted by one worker); most often "
            f"({times}x) {reason}; the dead letters so far are in {self.path}",
            f"fix the spec or the data (`ddb2bt migrate-plan` shows the cause) and run again, or accept these items "
            f"as dead letters: {accept}",
        )


def parts_dir(dead_letter_path: str) -> str:
    """Where workers put dead-letter part files before :func:`consolidate` joins them."""
    return dead_letter_path + ".parts"


class DeadLetterDestinationError(UsageError):
    """The dead-letter path holds another run's dead letters, or cannot be written."""


def create_private(path: str) -> Any:
    """A writable binary file; local files are 0600 from the start, and made 0600 if they existed (user data)."""
    if "://" not in path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # O_CREAT's mode applies only to a new file
        return os.fdopen(fd, "wb")
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.create(path)


def check_writable(path: str) -> None:
    """OSError unless the local file ``path`` can be written, creating nothing: it is no folder, and its nearest
    existing folder takes a new file (a temporary probe: access() says yes to root where nothing can be made).
    A remote path (gs://, s3://) passes: it is probed when the run starts."""
    import tempfile

    if "://" in path:
        return
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a folder")
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder) and folder != os.path.dirname(folder):
        folder = os.path.dirname(folder)
    with tempfile.TemporaryFile(dir=folder):
        pass


def check_dead_letter_destination(path: str, *, resume: bool = False, create: bool = True) -> None:
    """Before a run: ``path`` is this run's own, and writable; :class:`DeadLetterDestinationError` if not.

    A new run refuses a path that already holds a dead-letter file with letters in it, or part files: the final file
    is joined from every part there, so another run's dead letters would be mixed in. A resumed run
    (``resume``) continues its own parts. Writability is tested by writing (and deleting) a probe
    file where the parts go; with ``create`` False (while a run is prepared, when nothing may be created yet),
    by :func:`check_writable` for a local path only.
    """
    import uuid

    from apache_beam.io.filesystems import FileSystems

    parts = FileSystems.join(parts_dir(path), "part-*.jsonl")
    if not resume and (_holds_letters(path) or FileSystems.match([parts])[0].metadata_list):
        raise DeadLetterDestinationError(
            f"dead-letter path {path} is not empty (another run's dead letters, or a file that is not ours): it "
            "would be overwritten",
            "choose a new --dead-letter path (or run folder), move the old file and its .parts folder away, "
            "or pass --resume to continue the run whose dead letters they are",
        )
    if not create:
        try:
            check_writable(path)
        except OSError as err:
            raise DeadLetterDestinationError(f"dead letters cannot be written to {path}: {err.strerror or err}",
                                             "choose a --dead-letter path this user can write") from None
        return
    probe = FileSystems.join(parts_dir(path), f".probe-{uuid.uuid4().hex}")
    try:
        with create_private(probe) as handle:
            handle.write(b"")
        FileSystems.delete([probe])
    except OSError as err:
        raise DeadLetterDestinationError(f"dead letters cannot be written to {path}: {err}",
                                         "choose a --dead-letter path this user can write") from err


def _holds_letters(path: str) -> bool:
    """Whether ``path`` is a file with something in it. An empty file (one the user made beforehand, e.g. to choose
    its place) holds no other run's letters: it is accepted, and a local one is made 0600 now, as the run's own
    file would be (a run without dead letters does not rewrite it)."""
    from apache_beam.io.filesystems import FileSystems

    if "://" not in path:
        if not os.path.isfile(path):
            return os.path.exists(path)  # a folder or a device: refused as not this run's
        if os.path.getsize(path):
            return True
        try:
            os.chmod(path, 0o600)
        except OSError as err:
            raise DeadLetterDestinationError(f"dead-letter path {path} cannot be made private (0600): "
                                             f"{err.strerror or err}", "choose a --dead-letter path this user owns") from None
        return False
    if not FileSystems.exists(path):
        return False
    return any(found.size_in_bytes for found in FileSystems.match([path])[0].metadata_list)


def write_part(dead_letter_path: str, lines: list[str]) -> str:
    """Write one part file of dead-letter lines (a unique name per call) and return its path."""
    import uuid

    from apache_beam.io.filesystems import FileSystems

    path = FileSystems.join(parts_dir(dead_letter_path), f"part-{uuid.uuid4().hex}.jsonl")
    with create_private(path) as handle:
        handle.write("".join(line + "\n" for line in lines).encode("utf-8"))
    return path


def consolidate(dead_letter_path: str) -> int:
    """Join every part file into the one dead-letter file; returns its number of lines.

    Parts stay where they are: a resumed run consolidates the earlier run's parts again, so the
    final file always covers the whole run. A bundle retried by the runner after it wrote its part
    could repeat lines; identical lines are written once.
    """
    local = "://" not in dead_letter_path
    # a local file is joined beside and renamed over: a disk that fills up mid-join leaves the file as it was (and
    # the parts), never a file cut short whose line count would be taken for the dead letters' (an object store's
    # object appears whole when closed)
    target = dead_letter_path + ".joining" if local else dead_letter_path
    lines = 0
    try:
        with create_private(target) as out:
            for line in _part_lines(dead_letter_path):
                out.write(line + b"\n")
                lines += 1
    except BaseException:
        if local:
            with contextlib.suppress(OSError):
                os.remove(target)
        raise
    if local:
        os.replace(target, dead_letter_path)
    return lines


def _part_lines(dead_letter_path: str) -> Iterator[bytes]:
    """The distinct lines of every part file, in the parts' name order."""
    from apache_beam.io.filesystems import FileSystems

    pattern = FileSystems.join(parts_dir(dead_letter_path), "part-*.jsonl")
    seen: set[bytes] = set()
    for meta in sorted(FileSystems.match([pattern])[0].metadata_list, key=lambda m: m.path):
        with FileSystems.open(meta.path) as part:
            for line in part.read().splitlines():
                if line and line not in seen:
                    seen.add(line)
                    yield line


def kept_in_parts(dead_letter_path: str) -> int:
    """The dead letters the part files hold (distinct lines), read without writing: what a join would count."""
    return sum(1 for _ in _part_lines(dead_letter_path))
