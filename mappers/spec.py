"""The mapping spec: one DynamoDB table -> one Bigtable table, declared in YAML or JSON.

Pydantic checks the shape (a misspelt key is an error, never a silent default); templates are
parsed here too, so a bad transform is reported at its field path. Checks that need the whole
spec (families declared, entities reachable, key attributes known) live in :mod:`.checks`.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import sys
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, PlainValidator, ValidationError,
    ValidatorFunctionWrapHandler, WithJsonSchema, WrapValidator, field_validator, model_validator,
)
from pydantic_core import PydanticCustomError

from .limits import SCAN_SEGMENTS_MAX
from .numbers import DecimalError, parse_number
from .templates import parse_template
from .units import parse_duration

INT32_MAX = 2**31 - 1
"""Largest value of a protobuf int32 field (Bigtable's GC max_num_versions)."""
MAX_AGE_LIMIT = timedelta(days=3_652_500)
"""Longest max_age: a protobuf Duration holds at most 10,000 years (315,576,000,000 seconds)."""


def _parse_duration(value: Any) -> Any:
    try:
        if isinstance(value, str) and not value.startswith("P"):  # "P30D": ISO 8601, as model_dump(mode="json") writes
            return parse_duration(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return timedelta(seconds=value)
    except OverflowError:  # more days than a timedelta holds
        raise ValueError(f"{value!r} is longer than Bigtable allows (at most {MAX_AGE_LIMIT.days}d, 10,000 years)") from None
    return value


Duration = Annotated[timedelta, BeforeValidator(_parse_duration)]


def _time(value: Any, handler: ValidatorFunctionWrapHandler) -> datetime:
    """A time, or one error saying how to write one (pydantic's own reads "input is too short" for `1e400`)."""
    try:
        return handler(value)
    except ValidationError:
        shown = repr(value) if isinstance(value, str) else str(value)
        raise ValueError(f"{shown} is not a time: write an ISO-8601 time such as '2024-01-01T00:00:00Z' "
                         "(UTC when no offset is given)") from None  # fmt: skip


def _cell_time(value: datetime) -> datetime:
    """A time cells are written at: UTC (when no offset is given), and not before 1970."""
    value = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    if value < datetime(1970, 1, 1, tzinfo=timezone.utc):
        raise ValueError(f"{value.isoformat()} is before 1970; Bigtable cell timestamps cannot be negative")
    return value


CellTime = Annotated[datetime, WrapValidator(_time)]


class StrictModel(BaseModel):
    """Shared base: unknown keys are errors and specs are immutable once loaded.

    Each field's attribute docstring is its description in the JSON Schema (spec.schema.json), added when a schema
    is generated rather than by pydantic's ``use_attribute_docstrings``, which reads each model's source through the
    call stack at import: every ddb2bt process (and every Beam worker) imports the spec, few generate its schema.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any, /) -> Any:
        schema = handler(core_schema)
        properties = handler.resolve_ref_schema(schema).get("properties", {})
        documented = _attribute_docstrings(cls)
        for name, field in cls.model_fields.items():
            key = name if name in properties else field.alias
            if field.description is None and name in documented and key in properties:
                properties[key]["description"] = documented[name]
        return schema


def _attribute_docstrings(model: type) -> dict[str, str]:
    """``model``'s fields' attribute docstrings (its bases' first), read as pydantic's ``use_attribute_docstrings``
    reads them: a string statement right after an annotated assignment, ``inspect.cleandoc``-ed."""
    found: dict[str, str] = {}
    for base in reversed(model.__mro__):
        if issubclass(base, StrictModel):
            found.update(_module_docstrings(base.__module__).get(base.__qualname__, {}))
    return found


@functools.lru_cache(maxsize=None)
def _module_docstrings(module: str) -> dict[str, dict[str, str]]:
    """Per top-level class of ``module``: its attribute docstrings (one parse of the module's source)."""
    tree = ast.parse(inspect.getsource(sys.modules[module]))
    return {node.name: _class_docstrings(node) for node in tree.body if isinstance(node, ast.ClassDef)}


def _class_docstrings(node: ast.ClassDef) -> dict[str, str]:
    out: dict[str, str] = {}
    target, previous = None, None
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            target = statement.target.id
        elif (previous is ast.AnnAssign and target and isinstance(statement, ast.Expr)
              and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)):
            out[target] = inspect.cleandoc(statement.value.value)
            target = None
        previous = type(statement)
    return out


# --------------------------------------------------------------------------- source


class ExportSource(StrictModel):
    """A DynamoDB export to S3 (DYNAMODB_JSON format), read instead of scanning the live table."""

    path: str
    """Folder of the export: the one holding `manifest-summary.json` (s3://, gs:// or a local path)."""


class SourceSpec(StrictModel):
    table: str | None = None
    """DynamoDB table name (required unless `export` is given)."""
    partition_key: str | None = None
    """Partition key attribute name; read from DescribeTable when omitted."""
    sort_key: str | None = None
    """Sort key attribute name, if the table has one; read from DescribeTable when omitted."""
    region: str | None = None
    """AWS region; the usual AWS configuration (env, profile) applies when omitted."""
    endpoint_url: str | None = None
    """DynamoDB endpoint, e.g. a local DynamoDB (http://127.0.0.1:8000)."""
    profile: str | None = None
    """AWS profile name from the shared config files."""
    role_arn: str | None = None
    """AWS IAM role assumed with this machine's Google identity (Dataflow workers; see docs/DATAFLOW.md)."""
    export: ExportSource | None = None
    """Read a DynamoDB export instead of scanning the table (costs no read capacity)."""
    consistent_read: bool = False
    """Strongly consistent scan reads (twice the read capacity)."""
    total_segments: Annotated[int, Field(ge=1, le=SCAN_SEGMENTS_MAX, strict=True)] | None = None
    """Parallel scan segments; chosen from the table size (about one per GiB) when omitted."""
    read_budget: Annotated[float, Field(gt=0, le=1, strict=True)] = 0.5  # strict: `true` is no fraction (it read as 1.0)
    """Fraction of the table's read capacity the scan may consume."""
    on_demand_rcu: Annotated[int, Field(ge=1, le=INT32_MAX, strict=True)] = 4000
    """Read capacity units assumed for on-demand tables, which publish none."""

    @model_validator(mode="after")
    def _table_or_export(self) -> SourceSpec:
        if not self.table and not self.export:
            raise ValueError("give source.table (a live table) or source.export (an export folder)")
        return self


# --------------------------------------------------------------------------- target


class GcPolicy(StrictModel):
    """A column family's garbage-collection policy; nothing set means keep every version."""

    max_versions: Annotated[int, Field(ge=1, le=INT32_MAX, strict=True)] | None = None
    """Keep at most this many cells per column."""
    max_age: Duration | None = None
    """Drop cells whose timestamp is older than this ('30d', '12h', ...)."""
    combine: Literal["union", "intersection"] = "union"
    """With both rules: union drops a cell when either says so, intersection only when both do."""
    aggregate: Literal["sum"] | None = None
    """sum: an aggregate family of Int64 counters (Bigtable sums what `AddToCell` adds), for columns of encoding
    int64 only; the application then increments with `AddToCell` instead of DynamoDB's `UpdateItem ... ADD`."""

    @model_validator(mode="after")
    def _counters_keep_versions(self) -> GcPolicy:
        if self.aggregate and (self.max_versions is not None or self.max_age is not None):
            raise ValueError("an aggregate family keeps no GC rule: a counter is the sum of its cells, and GC would "
                             "drop increments (remove max_versions and max_age)")
        return self

    @field_validator("max_age")
    @classmethod
    def _max_age_in_ms(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and (value.total_seconds() <= 0 or value % timedelta(milliseconds=1)):
            raise ValueError("max_age must be a positive whole number of milliseconds")
        if value is not None and value > MAX_AGE_LIMIT:
            raise ValueError(f"max_age is longer than Bigtable allows (at most {MAX_AGE_LIMIT.days}d, 10,000 years)")
        return value


_FAMILY_NAME = re.compile(r"^[-_.a-zA-Z0-9]+$")
_TABLE_ID = re.compile(r"^[_a-zA-Z0-9][-_.a-zA-Z0-9]{0,49}$")  # Bigtable's CreateTable rule, at most 50 characters


def table_id(value: str) -> str:
    """`value`, checked as a Bigtable table id."""
    if not _TABLE_ID.match(value):
        usable = re.sub(r"[^-_.a-zA-Z0-9]+", "_", value).strip("_-.")[:50]
        raise ValueError(
            f"{value!r} is not a Bigtable table id: 1-50 letters, digits, '_', '-' or '.', not starting with '-' or '.'"
            + (f" (e.g. {usable!r})" if usable else "")
        )
    return value


class TargetSpec(StrictModel):
    project: str = "ddb2bt-local"
    """Google Cloud project (any name works against the emulator)."""
    instance: str = "ddb2bt-local"
    """Bigtable instance id."""
    table: str
    """Bigtable table id; created with the families below when missing."""
    app_profile: str | None = None
    """Bigtable app profile for the writes (single-cluster routing is a good choice for bulk loads)."""
    families: dict[str, Annotated[GcPolicy, BeforeValidator(lambda policy: GcPolicy() if policy is None else policy)]]
    """Column families and their GC policies, e.g. `{SKU: {max_versions: 1}}`; an empty policy keeps every version."""

    @field_validator("table")
    @classmethod
    def _table_id(cls, value: str) -> str:
        return table_id(value)

    @field_validator("families")
    @classmethod
    def _family_names(cls, value: dict[str, GcPolicy]) -> dict[str, GcPolicy]:
        if not value:
            raise ValueError("declare at least one column family")
        for name in value:
            if not _FAMILY_NAME.match(name) or len(name) > 64:
                raise ValueError(f"family name {name!r} must be 1-64 characters of letters, digits, '-', '_' or '.'")
        return value


# --------------------------------------------------------------------------- entities


def _spec_number(value: Any) -> Any:
    """A number written in the spec as the exact Decimal DynamoDB would hold; strings and booleans pass unchanged.

    The loader reads YAML and JSON numbers as Decimals built from their text, so none went through float;
    a float (a spec built in Python, or read back by a JSON reader) counts as its shortest exact text.
    `{N: "..."}` (DynamoDB JSON) is accepted too: it is how a number no float holds is written to JSON.
    """
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, dict) and set(value) == {"N"} and isinstance(value["N"], str):
        text = value["N"]
    elif isinstance(value, (int, Decimal)):
        text = str(value)
    elif isinstance(value, float):
        text = repr(value)
    else:
        return value  # not a number: the union reports what is accepted
    try:
        return parse_number(text)
    except DecimalError as err:
        raise ValueError(f"{err}; a DynamoDB number is finite, with at most 38 significant digits "
                         "and a magnitude from 1e-130 to below 1e126") from None  # fmt: skip


def _number_json(number: Decimal) -> int | float | dict[str, str]:
    """A spec number in JSON: a JSON number when readers (which read floats) get it back exactly, else `{N: text}`."""
    exponent = number.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= 0:  # an integer as written (30, not 30.0): a JSON integer
        return int(number)
    as_float = float(number)
    return as_float if Decimal(repr(as_float)) == number else {"N": str(number)}


def _exact_decimal(value: Any) -> Decimal:
    """The Decimal `_spec_number` made, as it is (pydantic's own Decimal rounds to 28 digits)."""
    if not isinstance(value, Decimal):
        raise PydanticCustomError("decimal_type", "Input should be a number")
    return value


SpecNumber = Annotated[
    Decimal,
    PlainValidator(_exact_decimal),
    PlainSerializer(_number_json, when_used="json"),
    WithJsonSchema({"anyOf": [
        {"type": "number"},
        {"type": "object", "properties": {"N": {"type": "string"}}, "required": ["N"], "additionalProperties": False},
    ]}),
]
"""An exact DynamoDB number (never a float): YAML `30.0000000000000000000000000001` stays what it says."""
Scalar = Annotated[str | SpecNumber | bool, BeforeValidator(_spec_number)]


class Condition(StrictModel):
    """Conditions on one attribute; all that are set must hold."""

    equals: Scalar | None = None
    """The attribute equals this value: a string, true/false, or a number, which matches N values as an exact decimal
    (30 matches 30.0; `{N: "..."}` writes a number in DynamoDB JSON)."""
    prefix: str | None = None
    """The attribute's text starts with this."""
    regex: str | None = None
    """The attribute's text matches this regular expression (re.search)."""
    exists: bool | None = None
    """The attribute is present (true) or absent (false)."""

    @field_validator("regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as err:
                raise ValueError(f"invalid regular expression {value!r}: {err}") from None
        return value

    @model_validator(mode="after")
    def _something_set(self) -> Condition:
        if self.equals is None and self.prefix is None and self.regex is None and self.exists is None:
            raise ValueError("a condition needs one of equals, prefix, regex, exists")
        if self.exists is False and (self.equals is not None or self.prefix is not None or self.regex is not None):
            raise ValueError("exists: false cannot be combined with equals, prefix or regex")
        return self


def _condition_shorthand(value: Any) -> Any:
    """`type: order` is short for `type: {equals: order}` (and `price: {N: "1.5"}` for `price: {equals: {N: "1.5"}}`)."""
    if isinstance(value, dict):
        return {
            attr: cond if isinstance(cond, dict) and set(cond) != {"N"} else {"equals": cond} for attr, cond in value.items()
        }
    return value


class Template(StrictModel):
    """Common part of row keys and qualifiers: a `{attribute|transform(...)}` template."""

    template: str
    """Literal text and `{attribute|transform|transform(arg, ...)}` placeholders."""
    delimiter: str = "#"
    """Separator between key parts; a value containing it (except in the last placeholder) is an item error or escaped."""
    on_delimiter: Literal["error", "escape", "allow"] = "error"
    """A value other than the last contains the delimiter: dead-letter the item (error), %-escape it (escape), or
    keep it because its own delimiters are part of the key's structure, e.g. a `device#metric` partition key (allow)."""

    @field_validator("template")
    @classmethod
    def _parses(cls, value: str) -> str:
        parse_template(value)
        return value

    @field_validator("delimiter")
    @classmethod
    def _delimits(cls, value: str) -> str:
        if not value:
            raise ValueError("the delimiter cannot be empty (every value would contain it); use '#', ':' or '/'")
        return value

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"template": value} if isinstance(value, str) else value


class RowKeySpec(Template):
    salt_buckets: Annotated[int, Field(ge=2, le=10_000, strict=True)] | None = None
    """Prefix the key with a deterministic bucket (crc32 of the key modulo this) to spread hot ranges."""


TimestampFormat = Literal["auto", "iso8601", "epoch_s", "epoch_ms", "epoch_us"]


class TimestampSpec(StrictModel):
    """Where a cell's timestamp comes from; exactly one of attribute, template, fixed."""

    attribute: str | None = None
    """An attribute holding ISO-8601 text or an epoch number."""
    template: str | None = None
    """A template, e.g. a reverse timestamp in the sort key: `{sk|part(1)|reverse_timestamp(9999999999)}`."""
    fixed: CellTime | None = None
    """One fixed time for every cell."""
    format: TimestampFormat = "auto"
    """How to read the value: auto (ISO-8601 text, or an epoch number whose size tells s/ms/us) or one of the others."""

    @field_validator("template")
    @classmethod
    def _parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_template(value)
        return value

    @field_validator("fixed")
    @classmethod
    def _fixed_utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _cell_time(value)

    @model_validator(mode="after")
    def _exactly_one(self) -> TimestampSpec:
        given = [name for name in ("attribute", "template", "fixed") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("set exactly one of attribute, template, fixed")
        return self


class Encoding(str, Enum):
    auto = "auto"
    utf8 = "utf8"
    decimal = "decimal"
    int64 = "int64"
    float64 = "float64"
    bytes = "bytes"
    bool = "bool"
    json = "json"
    ddb_json = "ddb_json"


class Layout(str, Enum):
    cell = "cell"
    json = "json"
    set = "set"
    map = "map"
    list = "list"


class ColumnSpec(StrictModel):
    """One attribute -> family:qualifier."""

    attribute: str
    """The item attribute to write."""
    family: str
    """Target column family (declared in target.families)."""
    qualifier: Template | None = None
    """Column qualifier: literal text or a template; defaults to the attribute name. For set/map layouts, a prefix."""
    encoding: Encoding = Encoding.auto
    """How the value becomes bytes: auto picks by DynamoDB type (S utf8, N decimal text, B bytes, BOOL bool, collections json)."""
    layout: Layout = Layout.cell
    """cell: one cell (collections packed as JSON); set: one qualifier per member, value 0x00; map: one qualifier per key; list: one cell per element at increasing timestamps; json: packed JSON."""
    timestamp: TimestampSpec | None = None
    """Overrides the entity's timestamp for this column."""
    required: bool = False
    """Dead-letter items that lack this attribute (otherwise they simply get no cell)."""


class RestSpec(StrictModel):
    """Catch-all: every attribute not mapped, dropped or used in a key goes here, qualifier = attribute name."""

    family: str
    encoding: Encoding = Encoding.auto


class TtlSpec(StrictModel):
    """A DynamoDB TTL attribute (epoch seconds) becomes cell timestamps that the families' max_age GC drops on time."""

    attribute: str
    """The table's TTL attribute."""
    on_missing: Literal["dead_letter", "skip"] = "dead_letter"
    """Items without a numeric TTL never expire in DynamoDB and cannot live in a max_age family: dead-letter or skip them."""


class VersioningSpec(StrictModel):
    """DynamoDB's `v0_`/`vN_` sort-key versioning: vN items become cells of one row at their own timestamps."""

    attribute: str | None = None
    """The attribute carrying the version prefix; the sort key when omitted."""
    pattern: str = r"^v(\d+)_"
    """A regex with one group, the version number; matched at the start of the value and stripped from it."""

    @field_validator("pattern")
    @classmethod
    def _one_group(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as err:
            raise ValueError(f"invalid regular expression {value!r}: {err}") from None
        if compiled.groups != 1:
            raise ValueError("the pattern needs exactly one group: the version number")
        return value


class EntitySpec(StrictModel):
    """One kind of item in the table: how to recognise it and how it becomes a Bigtable row."""

    name: str
    """A short name, used in reports and dead letters."""
    match: Annotated[dict[str, Condition], BeforeValidator(_condition_shorthand)] = {}
    """Conditions on attributes, all of which must hold; empty matches every item."""
    action: Literal["map", "skip"] = "map"
    """skip: leave matching items out on purpose (counted as skipped)."""
    row_key: RowKeySpec | None = None
    """Row key template, e.g. `{pk}#{sk}` or `{pk|strip_prefix('Invoice-')}`."""
    columns: list[ColumnSpec] = []
    """Attribute -> column mappings."""
    rest: RestSpec | None = None
    """Where unmapped attributes go; without it, an item with an unmapped attribute is dead-lettered."""
    drop: list[str] = []
    """Attributes deliberately not migrated."""
    lossy: list[str] = []
    """Attributes this entity accepts not to read back exactly (a lossy transform such as `lower`, `on_delimiter: allow`,
    a set layout with encoding auto): every loss the decoder finds must be listed here or in drop."""
    timestamp: TimestampSpec | None = None
    """Cell timestamps for this entity; the spec's migration_time when omitted."""
    ttl: TtlSpec | None = None
    """Carry DynamoDB TTL over as GC-driven expiry."""
    versioning: VersioningSpec | None = None
    """Fold vN_ versions into cell versions and skip the v0_ latest copy."""

    @property
    def key(self) -> RowKeySpec:
        """The row key of an entity that maps items (validation makes sure it has one)."""
        if self.row_key is None:
            raise ValueError(f"entity {self.name!r} has no row_key: it skips its items")
        return self.row_key

    @model_validator(mode="after")
    def _complete(self) -> EntitySpec:
        if self.action == "map" and self.row_key is None:
            raise ValueError(f"entity {self.name!r} maps items, so it needs a row_key")
        if self.action == "map" and not self.columns and self.rest is None:
            raise ValueError(f"entity {self.name!r} writes no columns: add columns or rest")
        if self.ttl is not None and self.timestamp is not None:
            raise ValueError("ttl sets the cell timestamps itself; remove timestamp or ttl")
        return self


# --------------------------------------------------------------------------- access patterns


class TypedKey(StrictModel):
    """A key value in DynamoDB JSON: `{S: text}`, `{N: "12.5"}` or `{B: base64}` (exactly one)."""

    S: str | None = None
    N: str | None = None
    B: str | None = None
    """Binary as base64, as DynamoDB JSON writes it."""

    @model_validator(mode="after")
    def _one(self) -> TypedKey:
        given = [name for name in ("S", "N", "B") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("a key value is exactly one of {S: text}, {N: number text}, {B: base64}")
        if self.N is not None:
            _spec_number({"N": self.N})
        if self.B is not None:
            import base64
            import binascii

            try:
                base64.b64decode(self.B, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"{self.B!r} is not base64 (a B key value is written as base64)") from None
        return self


def _key_operand(value: Any) -> Any:
    """A plain string is S and a number N; `{S: ...}`, `{B: ...}` stay typed (`{N: ...}` becomes the number)."""
    if isinstance(value, bool):
        raise ValueError("a key value is a string, a number or {B: base64}; DynamoDB keys are never booleans")
    return _spec_number(value)


KeyOperand = Annotated[str | SpecNumber | TypedKey, BeforeValidator(_key_operand)]
"""A sort-key operand: `"text"` (S), `12.5` (N, exact), `{B: base64}`, or typed `{S: ...}` / `{N: "..."}`."""

KEY_OPERATORS = ("=", "<", "<=", ">", ">=", "between", "begins_with")


def _operator(value: Any) -> Any:
    return value.lower() if isinstance(value, str) and value.lower() in ("between", "begins_with") else value


class SortKeyCondition(StrictModel):
    """The sort-key part of a Query's key condition: `sk <op> :value` (`BETWEEN :a AND :b`, `begins_with(sk, :p)`)."""

    operator: Annotated[Literal["=", "<", "<=", ">", ">=", "between", "begins_with"], BeforeValidator(_operator)]
    """One of =, <, <=, >, >=, between (inclusive at both ends), begins_with (S and B keys only)."""
    values: list[KeyOperand] = []
    """Fixed operands (one; two for between, low first). Empty: the application passes them at run time, and
    `parity` picks them from the sample."""

    @model_validator(mode="after")
    def _arity(self) -> SortKeyCondition:
        want = 2 if self.operator == "between" else 1
        if self.values and len(self.values) != want:
            raise ValueError(f"{self.operator} takes {want} value{'s' if want > 1 else ''} "
                             f"(or none: passed at run time), got {len(self.values)}")  # fmt: skip
        if self.operator == "begins_with" and any(isinstance(v, Decimal) or (isinstance(v, TypedKey) and v.N)
                                                  for v in self.values):  # fmt: skip
            raise ValueError("begins_with applies to S and B sort keys only (DynamoDB refuses it on numbers)")
        return self


class IndexSpec(StrictModel):
    """A secondary index a pattern queries, with its key schema as DescribeTable gives it."""

    name: str
    """The index name (IndexName)."""
    type: Literal["global", "local"]
    """global (GSI: any partition key, sparse, eventually consistent) or local (LSI: the table's partition key)."""
    partition_key: str
    """The index's partition key attribute."""
    sort_key: str | None = None
    """The index's sort key attribute, if it has one."""


class IndexProjection(StrictModel):
    """The attributes an index carries, as the index declares them (DescribeTable's Projection)."""

    type: Literal["KEYS_ONLY", "INCLUDE", "ALL"]
    """KEYS_ONLY: the table's and the index's keys; INCLUDE: those and `non_key_attributes`; ALL: the whole item."""
    non_key_attributes: list[str] = []
    """With INCLUDE: the other attributes the index carries (NonKeyAttributes)."""

    @model_validator(mode="after")
    def _include(self) -> IndexProjection:
        if self.type == "INCLUDE" and not self.non_key_attributes:
            raise ValueError("projection INCLUDE names its non_key_attributes (or use KEYS_ONLY)")
        if self.type != "INCLUDE" and self.non_key_attributes:
            raise ValueError(f"non_key_attributes apply to projection INCLUDE only, not {self.type}")
        return self


class IndexTarget(StrictModel):
    """Where an index's rows go: under a key prefix of the main table, or in a table of their own."""

    prefix: Annotated[str, Field(min_length=1)] | None = None
    """Index rows are the main table's rows whose key starts with this prefix (e.g. `gsi1#`); no item's own row key
    may start with it (such an item is dead-lettered)."""
    table: str | None = None
    """A Bigtable table of their own (same project, instance and app profile as target), holding this index's rows
    only; `migrate` creates it with the index's family."""

    @field_validator("table")
    @classmethod
    def _table_id(cls, value: str | None) -> str | None:
        return None if value is None else table_id(value)

    @model_validator(mode="after")
    def _one(self) -> IndexTarget:
        if (self.prefix is None) == (self.table is None):
            raise ValueError("say where the index rows go, one of: target: {prefix: 'gsi1#'} (rows of the main table) "
                             "or target: {table: 'orders-by-status'} (a table of their own)")  # fmt: skip
        return self


class IndexRowsSpec(StrictModel):
    """A global or local secondary index carried to Bigtable as index rows: one row per item that has the index's
    key attributes (indexes are sparse), keyed by the index's keys then the table's, in an order-preserving
    encoding so that an index query is a byte range of rows (docs/ACCESS_PATTERNS.md#index-rows)."""

    name: str
    """The index name (IndexName), as access patterns name it."""
    type: Literal["global", "local"]
    """global (GSI) or local (LSI: the table's partition key, its own sort key)."""
    partition_key: str
    """The index's partition key attribute."""
    sort_key: str | None = None
    """The index's sort key attribute, if it has one (an LSI always has one)."""
    partition_key_type: Literal["S", "N", "B"] | None = None
    """The partition key's type, as DescribeTable's AttributeDefinitions declare it: an item whose value has another
    type is in no index (an index key violation: a GSI added to a table holding such items leaves them out). Not
    given: any S, N or B value is indexed."""
    sort_key_type: Literal["S", "N", "B"] | None = None
    """The sort key's type, likewise."""
    projection: IndexProjection
    """The attributes the index carries."""
    target: IndexTarget
    """Where the index rows go."""
    family: str
    """The column family of the index rows' cells (one cell per projected attribute, DynamoDB JSON). Under a prefix:
    declared in target.families. In a table of their own: that table's one family, with target.families' GC policy
    for it when declared there, else `max_versions: 1` (an index row's cells are all at the migration time)."""

    @model_validator(mode="after")
    def _local(self) -> IndexRowsSpec:
        if self.type == "local" and self.sort_key is None:
            raise ValueError(f"local index {self.name!r} needs its sort_key (an LSI always has one)")
        if self.sort_key is None and self.sort_key_type is not None:
            raise ValueError(f"index {self.name!r} has no sort_key: remove its sort_key_type")
        return self


class AccessPattern(StrictModel):
    """One read the application makes: a GetItem, or a Query on the table or one of its indexes.

    Key values (the partition key's, GetItem's sort key's, and a condition's operands not fixed here) are what the
    application passes at run time; `parity` picks them from the sample.
    """

    name: str
    """A short name, used in plans, parity reports and errors."""
    description: str | None = None
    """What the application reads, in words ("a video with its 10 newest comments")."""
    operation: Literal["get_item", "query"] = "query"
    """get_item: one item by its full key; query: a partition's items in sort-key order."""
    index: IndexSpec | None = None
    """Query a secondary index instead of the table (query only)."""
    sort_key: SortKeyCondition | None = None
    """The sort-key condition of a query; none: the whole partition."""
    scan_index_forward: bool = True
    """Ascending sort-key order (true, DynamoDB's default) or descending (false)."""
    limit: Annotated[int, Field(ge=1, strict=True)] | None = None
    """At most this many items (DynamoDB's Limit counts items evaluated; without a filter, items returned)."""
    projection: list[str] = []
    """Attributes the application reads (ProjectionExpression); empty: the whole item."""

    @model_validator(mode="after")
    def _consistent(self) -> AccessPattern:
        if self.operation == "get_item":
            extra = [name for name in ("index", "sort_key", "limit") if getattr(self, name) is not None]
            if extra or not self.scan_index_forward:
                raise ValueError(f"get_item reads one item by its key: remove {', '.join(extra) or 'scan_index_forward'}"
                                 " (or use operation: query)")  # fmt: skip
        if self.index is not None and self.sort_key is not None and self.index.sort_key is None:
            raise ValueError(f"index {self.index.name!r} has no sort key, so the query cannot have a sort_key condition")
        return self


class MappingSpec(StrictModel):
    """A ddb2bt mapping spec."""

    schema_: str | None = Field(default=None, alias="$schema")
    """Path or URL of the JSON Schema, for editors."""
    version: Literal[1] = 1
    """Spec format version."""
    source: SourceSpec
    target: TargetSpec
    migration_time: CellTime | None = None
    """Timestamp for cells with no other timestamp source. Set it so that re-runs write identical cells."""
    unmatched: Literal["dead_letter", "skip", "fail"] = "dead_letter"
    """Items no entity matches: dead-letter (default), skip (counted) or fail the run."""
    entities: Annotated[list[EntitySpec], Field(min_length=1)]
    """Ordered rules; the first whose match holds takes the item."""
    indexes: list[IndexRowsSpec] = []
    """Secondary indexes carried to Bigtable as index rows: `migrate` writes them, `catch-up` and `tail` keep them
    exact, `validate` checks them, and access patterns on them read them."""
    access_patterns: list[AccessPattern] = []
    """The application's reads (GetItem, Query on the table or an index): migrate-plan shows the Bigtable read serving
    each, and `parity` proves both return the same items."""

    model_config = ConfigDict(populate_by_name=True)

    @field_validator("migration_time")
    @classmethod
    def _migration_time_utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _cell_time(value)

    @model_validator(mode="after")
    def _pattern_names(self) -> MappingSpec:
        names = [pattern.name for pattern in self.access_patterns]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"access pattern {twice[0]!r} is declared twice; give each pattern its own name")
        self._index_rows()
        for pattern in self.access_patterns:
            index = pattern.index
            if index and index.type == "local" and self.source.partition_key not in (None, index.partition_key):
                raise ValueError(f"access pattern {pattern.name!r}: a local index shares the table's partition key "
                                 f"{self.source.partition_key!r}, not {index.partition_key!r}")  # fmt: skip
        return self

    def _index_rows(self) -> None:
        names = [index.name for index in self.indexes]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"index {twice[0]!r} is declared twice under indexes; declare each index once")
        prefixes = [(index.name, index.target.prefix) for index in self.indexes if index.target.prefix is not None]
        tables = [index.target.table for index in self.indexes if index.target.table is not None]
        for index in self.indexes:
            if index.type == "local" and self.source.partition_key not in (None, index.partition_key):
                raise ValueError(f"index {index.name!r}: a local index shares the table's partition key "
                                 f"{self.source.partition_key!r}, not {index.partition_key!r}")  # fmt: skip
            table = index.target.table
            if table is not None and (table == self.target.table or tables.count(table) > 1):
                raise ValueError(f"index {index.name!r}: table {table!r} is "
                                 + ("the main table" if table == self.target.table else "another index's too")
                                 + "; give each index a table of its own (or use target: {prefix: ...})")  # fmt: skip
        for name, prefix in prefixes:
            index = next(index for index in self.indexes if index.name == name)
            if index.family not in self.target.families:
                raise ValueError(f"index {name!r}: family {index.family!r} is not declared in target.families; "
                                 f"add it (e.g. {index.family}: {{max_versions: 1}})")  # fmt: skip
            for other, theirs in prefixes:
                if other != name and theirs.startswith(prefix):
                    raise ValueError(f"index {other!r}'s prefix {theirs!r} starts with index {name!r}'s {prefix!r}: "
                                     "their rows would mix; give each index a prefix no other starts with")  # fmt: skip
        declared = {index.name: index for index in self.indexes}
        for pattern in self.access_patterns:
            found = declared.get(pattern.index.name) if pattern.index else None
            if found is None or pattern.index is None:
                continue
            asked = (pattern.index.type, pattern.index.partition_key, pattern.index.sort_key)
            ours = (found.type, found.partition_key, found.sort_key)
            if asked != ours:
                raise ValueError(f"access pattern {pattern.name!r}: its index {found.name!r} is {asked} but indexes "
                                 f"declares it {ours} (type, partition_key, sort_key); make them agree")  # fmt: skip

    def with_keys(self, partition_key: str, sort_key: str | None) -> MappingSpec:
        """The same spec with key names filled in (from DescribeTable)."""
        source = self.source.model_copy(update={"partition_key": partition_key, "sort_key": sort_key})
        return self.model_copy(update={"source": source})
