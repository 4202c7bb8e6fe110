"""Dead letters: one JSON line per item that did not reach Bigtable, with the item itself.

Every stage that can give up on an item (source, map, write) emits a :class:`DeadLetter` rather
than logging and moving on, so the reconciliation ``read = written + dead-lettered + skipped``
can hold and the item can be fixed and replayed. The item is kept in DynamoDB JSON (``B`` as
base64, sets as lists) exactly as read, never through ``float``.

Dead-letter files hold user data (whole items). Locally they are created with mode 0600; on
gs:// or s3:// the bucket's access control applies, so put them somewhere only the migration's
operators can read.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any, NamedTuple

STAGES = ("source", "map", "write")


class DeadLetter(NamedTuple):
    """An item that was not migrated, and why."""

    item: dict[str, Any]
    stage: str
    reason: str
    entity: str | None = None
    attribute: str | None = None
    row_key: bytes | None = None

    def to_json(self) -> str:
        """The dead-letter line described in docs/ARCHITECTURE.md."""
        return json.dumps(
            {
                "item": item_to_json(self.item),
                "entity": self.entity,
                "attribute": self.attribute,
                "stage": self.stage,
                "reason": self.reason,
                "row_key": None if self.row_key is None else self.row_key.decode("utf-8", "backslashreplace"),
            },
            ensure_ascii=False,
            sort_keys=True,
        )


def item_to_json(item: Any) -> Any:
    """DynamoDB wire format made JSON-safe: bytes become base64 text (as in DynamoDB exports)."""
    if isinstance(item, dict):
        return {key: item_to_json(value) for key, value in item.items()}
    if isinstance(item, (list, tuple, set, frozenset)):
        return [item_to_json(value) for value in item]
    if isinstance(item, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(item)).decode("ascii")
    return item


def restrict_local_file(path: str) -> None:
    """Make a local dead-letter file readable by its owner only (it holds user data).

    Remote paths (gs://, s3://) are left to the bucket's access control.
    """
    if "://" not in path and os.path.exists(path):
        os.chmod(path, 0o600)
