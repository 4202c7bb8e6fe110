"""A row key taken apart for a reader: its parts in order, what each is, and what the byte order means for reads.

The report shows a key as more than its template: which part is the table's partition key, which the
sort key, the delimiter and what happens to a value holding it, each transform in words, and what a
prefix or a range of keys returns (Bigtable sorts rows by key bytes).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..templates import Placeholder, parse_template

TRANSFORM_WORDS = {
    "part": "one part of the value split on a separator",
    "strip_prefix": "the value without a fixed prefix",
    "strip_suffix": "the value without a fixed suffix",
    "pad": "zero-padded to a fixed width, so that numbers sort in order",
    "sortable_number": "a number written so that byte order is numeric order (negatives first)",
    "reverse": "the text reversed, so that sequential ids spread over the key space",
    "reverse_timestamp": "a reversed timestamp: newest first",
    "reverse_domain": "a domain reversed (com.example.www), so that one site's keys sit together",
    "lower": "lower-cased (lossy: the case is not kept)",
    "upper": "upper-cased (lossy: the case is not kept)",
    "unshard": "the value without its write-shard suffix",
    "epoch_ms": "a time as epoch milliseconds",
    "epoch_s": "a time as epoch seconds",
}


class KeyPart(BaseModel):
    model_config = ConfigDict(frozen=True)
    text: str
    """The part as written in the template (`{pk|part(1)}`, `#`, `ORDER`)."""
    kind: str
    """salt, literal, delimiter, or the role of an attribute: partition key, sort key, attribute."""
    meaning: str


class KeyAnatomy(BaseModel):
    model_config = ConfigDict(frozen=True)
    parts: tuple[KeyPart, ...]
    delimiter: str
    on_delimiter: str
    order: str
    """What the byte order of these keys means for reads."""


def key_anatomy(template: str, delimiter: str, on_delimiter: str, salt_buckets: int | None,
                partition_key: str | None, sort_key: str | None) -> KeyAnatomy:
    pieces = parse_template(template).pieces
    parts: list[KeyPart] = []
    if salt_buckets:
        parts.append(KeyPart(text=f"0…{salt_buckets - 1}{delimiter}", kind="salt",
                             meaning=f"a bucket from 0 to {salt_buckets - 1} derived from the rest of the key: writes "
                                     f"spread over {salt_buckets} ranges; a range read runs once per bucket"))  # fmt: skip
    placeholders = [piece for piece in pieces if isinstance(piece, Placeholder)]
    for piece in pieces:
        if isinstance(piece, str):
            for index, literal in enumerate(piece.split(delimiter)):
                if index:
                    parts.append(KeyPart(text=delimiter, kind="delimiter", meaning="separates the parts"))
                if literal:
                    parts.append(KeyPart(text=literal, kind="literal", meaning="fixed text in every key"))
            continue
        role = ("partition key" if piece.attribute == partition_key else "sort key" if piece.attribute == sort_key
                else "attribute")
        words = [f"the {role} {piece.attribute!r}" if role != "attribute" else f"attribute {piece.attribute!r}"]
        words += [TRANSFORM_WORDS.get(call.name, call.name) for call in piece.transforms]
        if piece is not placeholders[-1]:
            words.append({"error": f"an item whose value holds {delimiter!r} is dead-lettered",
                          "escape": f"{delimiter!r} in a value is %-escaped, so the key reads back",
                          "allow": f"{delimiter!r} in a value is kept as is: the key cannot be split back into its "
                                   "parts (a declared loss)"}[on_delimiter])  # fmt: skip
        text = "{" + "|".join([piece.attribute, *(_call(call.name, call.args) for call in piece.transforms)]) + "}"
        parts.append(KeyPart(text=text, kind=role, meaning="; ".join(words)))
    return KeyAnatomy(parts=tuple(parts), delimiter=delimiter, on_delimiter=on_delimiter,
                      order=_order(placeholders, partition_key, sort_key, salt_buckets))


def _call(name: str, args: tuple) -> str:
    return f"{name}({', '.join(map(repr, args))})" if args else name


def _order(placeholders: list[Placeholder], partition_key: str | None, sort_key: str | None, salt: int | None) -> str:
    if not placeholders:
        return "Every item writes the same row."
    first = placeholders[0]
    names = [piece.attribute for piece in placeholders]
    transforms = {call.name for piece in placeholders for call in piece.transforms}
    sentences = [f"Rows sort by the bytes of the key, so by {first.attribute!r} first: a prefix read "
                 f"(everything of one {first.attribute!r}) is one contiguous range."]
    if partition_key in names and sort_key in names and names.index(partition_key) < names.index(sort_key):
        sentences.append(f"Within one {partition_key!r}, rows come in {sort_key!r} order as bytes, as a DynamoDB Query "
                         "returns them for a string sort key (numbers only when padded or sortable_number).")
    elif partition_key in names and sort_key and sort_key not in names:
        sentences.append(f"The sort key {sort_key!r} is not in the row key: every item of one {partition_key!r} "
                         "writes the same row (its items are folded into it).")
    if "reverse_timestamp" in transforms:
        sentences.append("A reversed timestamp puts the newest first: the first rows of a prefix are the latest.")
    if salt:
        sentences.append(f"The salt bucket comes first: a range read becomes {salt} reads, one per bucket.")
    return " ".join(sentences)
