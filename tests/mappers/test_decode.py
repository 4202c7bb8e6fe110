"""The decoder reads cells back into the items that wrote them; what it cannot is a declared loss (issue 10.6)."""

from __future__ import annotations

import pytest

from ddb2bt.mappers.compiler import compile_spec
from ddb2bt.mappers.decode import compile_decoder, comparable, losses, one_item_per_row, round_trip, undeclared
from ddb2bt.mappers.loader import load_spec
from ddb2bt.mappers.spec import MappingSpec
from tests.golden import SEEDS, seed_items, template_path

NOW_MS = 1_700_000_000_000


@pytest.mark.parametrize("name", SEEDS)
def test_seed_items_read_back_from_their_cells_and_rows(name):
    spec = load_spec(template_path(name))
    compiled, decoder = compile_spec(spec, NOW_MS), compile_decoder(spec)
    rows: dict[bytes, list] = {}
    for item in seed_items(name):
        row = compiled.map_item(item)
        assert round_trip(decoder, item, row.entity, row.row_key, row.cells) == []
        rows.setdefault(row.row_key, []).extend(row.cells)
    ignore = {"sk"} if name != "product_catalog" else set()  # the seeds drop the sort key where it is a constant
    expected = sorted(repr(sorted((k, comparable(v)) for k, v in item.items() if k not in ignore)) for item in seed_items(name))
    decoded = [item for key, cells in rows.items() for item in decoder.decode_row(key, cells)]
    got = sorted(repr(sorted((k, comparable(v)) for k, v in item.items() if k not in ignore)) for item in decoded)
    if name == "videos":  # views and stats write the same column: a stats item reads back as a views item
        assert len(got) == len(expected)
    else:
        assert got == expected
    assert undeclared(spec) == []


def spec_with(entity: dict) -> MappingSpec:
    return MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk"}, "target": {"table": "t", "families": {"f": {}, "g": {}}},
        "migration_time": "2024-01-01T00:00:00Z", "entities": [{"name": "e", **entity}],
    })  # fmt: skip


def test_lossy_transforms_must_be_declared():
    spec = spec_with({"row_key": "{pk|lower}", "rest": {"family": "f"}})
    (problem,) = undeclared(spec)
    assert problem[0] == ("entities", 0, "lossy") and "lower" in problem[1] and "'pk'" in problem[1]
    declared = spec_with({"row_key": "{pk|lower}", "rest": {"family": "f"}, "lossy": ["pk"]})
    assert undeclared(declared) == [] and any(loss.attribute == "pk" and loss.declared for loss in losses(declared))


@pytest.mark.parametrize("entity, attribute", [
    ({"row_key": {"template": "{pk}#{a}", "on_delimiter": "allow"}, "rest": {"family": "f"}}, "pk"),
    ({"row_key": "{pk}", "columns": [{"attribute": "s", "family": "f", "layout": "set"}]}, "s"),
    ({"row_key": "{pk}", "columns": [{"attribute": "m", "family": "f", "layout": "map"}], "rest": {"family": "f"}}, "m"),
])  # fmt: skip
def test_ambiguous_designs_are_losses(entity, attribute):
    assert attribute in {loss.attribute for loss in losses(spec_with(entity)) if not loss.declared}


def test_round_trip_names_the_attribute_and_both_values():
    spec = spec_with({"row_key": "{pk}#{n|pad(4)}", "rest": {"family": "f"}})
    item = {"pk": {"S": "a"}, "n": {"S": "007"}, "v": {"S": "x"}}  # text with leading zeros: pad cannot give them back
    row = compile_spec(spec, NOW_MS).map_item(item)
    (difference,) = round_trip(compile_decoder(spec), item, "e", row.row_key, row.cells)
    assert "'n'" in difference and "007" in difference


def test_an_undeclared_loss_is_a_spec_error_naming_file_line_field_and_fix(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text('source: {table: T, partition_key: pk}\ntarget: {table: t, families: {f: {}}}\nentities:\n'
                    '  - name: user\n    row_key: "{pk|lower}"\n    rest: {family: f}\n')
    from ddb2bt.mappers.loader import SpecError

    with pytest.raises(SpecError) as refused:
        load_spec(spec)
    line = refused.value.one_line()
    assert line.startswith(f"{spec}:4: entities[0].lossy: entity 'user', attribute 'pk': the row key lower")
    assert line.endswith("(not declared: add it to lossy)")
    spec.write_text(spec.read_text() + "    lossy: [pk]\n")
    assert load_spec(spec).entities[0].lossy == ["pk"]


def test_two_entities_writing_one_cell_of_a_shared_row_is_a_loss_to_declare():
    def spec(later: dict) -> MappingSpec:
        return MappingSpec.model_validate({
            "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
            "target": {"table": "t", "families": {"f": {}, "g": {}}},
            "entities": [{"name": "views", "match": {"sk": "Views"}, "row_key": "{pk}", "drop": ["sk"],
                          "columns": [{"attribute": "Count", "family": "f", "qualifier": "Views"}]},
                         {"name": "stats", "match": {"sk": "Stats"}, "drop": ["sk"], **later}],
        })  # fmt: skip

    column = {"columns": [{"attribute": "ViewCount", "family": "f", "qualifier": "Views"}]}
    (problem,) = undeclared(spec({"row_key": "{pk}", **column}))
    assert problem[0] == ("entities", 1, "lossy") and "'ViewCount'" in problem[1] and "entity 'views' writes f:Views" in problem[1]
    assert undeclared(spec({"row_key": "{pk}", "lossy": ["ViewCount"], **column})) == []
    assert undeclared(spec({"row_key": "stats#{pk}", **column})) == []  # rows that meet only if a pk says "stats#"
    assert undeclared(spec({"row_key": "{pk}", "timestamp": {"attribute": "at"}, **column})) == []  # other times


def test_a_set_or_map_with_a_prefix_of_its_own_shares_a_family_with_rest_without_loss():
    prefixed = spec_with({"row_key": "{pk}", "rest": {"family": "f"}, "columns": [
        {"attribute": "tags", "family": "f", "layout": "set", "encoding": "utf8", "qualifier": "tags:"},
        {"attribute": "prefs", "family": "f", "layout": "map", "qualifier": "prefs:"}]})
    assert undeclared(prefixed) == []
    compiled, decoder = compile_spec(prefixed, NOW_MS), compile_decoder(prefixed)
    item = {"pk": {"S": "k"}, "tags": {"SS": ["a", "b"]}, "prefs": {"M": {"x": {"N": "1"}}}, "tags2": {"S": "v"}}
    row = compiled.map_item(item)
    assert round_trip(decoder, item, "e", row.row_key, row.cells) == []
    clash = compiled.map_item({**item, "tags:c": {"S": "would read back as a member"}})  # the guard that makes it exact
    assert clash.attribute == "tags:c" and "would read back as part of 'tags'" in clash.reason


def test_a_column_of_one_entity_is_never_read_as_another_entitys_rest_in_a_shared_row():
    """Entities folded into one row (a single-table design): the first one's rest must not take the cells another
    entity's columns wrote there; a rest claims only what no column of any entity claims (the counter, int64, was
    read as the video's rest attribute and failed to decode as text)."""
    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "sort_key": "sk"},
        "target": {"table": "t", "families": {"video": {}}}, "migration_time": "2024-01-01T00:00:00Z",
        "entities": [
            {"name": "video", "match": {"sk": "Video"}, "row_key": "{pk}", "drop": ["sk"], "rest": {"family": "video"},
             "columns": [{"attribute": "Formats", "family": "video", "encoding": "json"}]},
            {"name": "likes", "match": {"sk": "VideoStatsLikes"}, "row_key": "{pk}", "drop": ["sk"],
             "rest": {"family": "video"},
             "columns": [{"attribute": "Count", "family": "video", "qualifier": "Likes.Count", "encoding": "int64"}]},
        ]})  # fmt: skip
    items = [{"pk": {"S": "0123"}, "sk": {"S": "Video"}, "Formats": {"M": {"hd": {"S": "u"}}}, "Title": {"S": "t"}},
             {"pk": {"S": "0123"}, "sk": {"S": "VideoStatsLikes"}, "Count": {"N": "3"}}]
    compiled, decoder = compile_spec(spec, NOW_MS), compile_decoder(spec)
    cells = [cell for item in items for cell in compiled.map_item(item).cells]
    decoded = decoder.decode_entities(b"0123", cells)
    assert sorted((entity, sorted(item)) for entity, item in decoded) == [
        ("likes", ["Count", "pk"]), ("video", ["Formats", "Title", "pk"])]  # sk: dropped
    assert dict(decoded)["likes"]["Count"] == {"N": "3"} and dict(decoded)["video"]["Title"] == {"S": "t"}


def test_migrate_counts_cells_exactly_only_where_no_two_items_can_share_a_row():
    """cells_written is exact only when a row holds one item (issue 10: migrate never claims cells it did not leave)."""
    assert one_item_per_row(load_spec(template_path("product_catalog")))  # {pk}#{sk}
    assert not one_item_per_row(load_spec(template_path("videos")))  # a video's items folded into one row
    assert not one_item_per_row(load_spec(template_path("invoices")))

    def spec(row_key: str, *, sort_key: str | None = "sk", **entity) -> MappingSpec:
        return MappingSpec.model_validate({
            "source": {"table": "T", "partition_key": "pk", **({"sort_key": sort_key} if sort_key else {})},
            "target": {"table": "t", "families": {"f": {}}},
            "entities": [{"name": "e", "row_key": row_key, "rest": {"family": "f"}, **entity}],
        })  # fmt: skip

    assert one_item_per_row(spec("{pk}", sort_key=None))
    assert one_item_per_row(spec("u#{sk}#{pk|reverse}"))
    assert not one_item_per_row(spec("{pk}"))  # the sort key is not in the row key: items of one pk share it
    assert not one_item_per_row(spec("{pk|lower}#{sk}", lossy=["pk"]))  # 'A' and 'a' meet
    assert not one_item_per_row(spec("{pk}{sk}"))  # 'ab'+'c' and 'a'+'bc' meet
    assert not one_item_per_row(spec("{pk}#{sk}", versioning={}))  # versions of one item in one row
    skipped = spec("{pk}#{sk}").model_dump(by_alias=True, exclude_none=True)
    skipped["entities"][0]["match"] = {"kind": "user"}
    skipped["entities"].append({"name": "audit", "match": {"kind": "audit"}, "action": "skip", "row_key": "{pk}"})
    assert one_item_per_row(MappingSpec.model_validate(skipped))  # an entity skipped writes no row


# --------------------------------------------------------------------------- timestamp attributes read back exactly

from datetime import datetime, timedelta, timezone  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ddb2bt.mappers.results import ItemError  # noqa: E402

_MOMENTS = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 12, 31),
                        timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5)), timezone(-timedelta(hours=3, minutes=30))]))


@st.composite
def timestamp_values(draw) -> tuple[dict, str]:
    """(a DynamoDB value, the timestamp format): ISO texts with and without offsets, Z or fractions, epoch numbers in
    each unit, as S or N, some of them in the canonical spelling the cell timestamp reads back as."""
    moment = draw(_MOMENTS)
    micros = (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)
    kind = draw(st.sampled_from(["iso", "iso_z", "iso_offset", "iso_naive_ms", "s", "ms", "us"]))
    if kind.startswith("iso"):
        utc = moment.astimezone(timezone.utc).replace(tzinfo=None)
        text = {"iso": utc.isoformat(), "iso_z": utc.isoformat() + "Z", "iso_offset": moment.isoformat(),
                "iso_naive_ms": utc.isoformat(timespec="milliseconds")}[kind]
        return {"S": text}, draw(st.sampled_from(["auto", "iso8601"]))
    number = str(micros // {"s": 1_000_000, "ms": 1000, "us": 1}[kind])
    fmt = draw(st.sampled_from(["auto", {"s": "epoch_s", "ms": "epoch_ms", "us": "epoch_us"}[kind]]))
    return draw(st.sampled_from([{"N": number}, {"S": number}])), fmt


@settings(max_examples=400, deadline=None)
@given(timestamp_values(), st.booleans())
def test_a_timestamp_attribute_reads_back_exactly_or_is_kept_as_a_cell_too(value_fmt, column_timestamp):
    """Whatever its spelling, a time an item gives lands in Bigtable whole: as the cell timestamp where that reads back
    as the same text, else also as a rest cell. Without a rest family such an item is an error, never a silent loss."""
    value, fmt = value_fmt
    where = ({"columns": [{"attribute": "v", "family": "f", "timestamp": {"attribute": "at", "format": fmt}}]}
             if column_timestamp else {"timestamp": {"attribute": "at", "format": fmt}, "columns": [{"attribute": "v", "family": "f"}]})
    item = {"pk": {"S": "p"}, "v": {"S": "x"}, "at": value}
    spec = spec_with({"row_key": "{pk}", **where, "rest": {"family": "g"}})
    row = compile_spec(spec, NOW_MS).map_item(item)
    decoded = compile_decoder(spec, {"at": next(iter(value))}).decode_item("e", row.row_key, row.cells)
    assert comparable(decoded["at"]) == comparable(value)
    kept = any(cell.family == "g" and cell.qualifier == b"at" for cell in row.cells)
    strict = spec_with({"row_key": "{pk}", **where})
    result = compile_spec(strict, NOW_MS).map_item(item)
    if kept:
        assert isinstance(result, ItemError) and result.attribute == "at" and "lossy" in result.reason
        declared = spec_with({"row_key": "{pk}", **where, "lossy": ["at"]})
        assert not isinstance(compile_spec(declared, NOW_MS).map_item(item), ItemError)
    else:
        assert not isinstance(result, ItemError)


def test_a_column_timestamp_whose_column_is_absent_keeps_its_time_as_a_cell():
    spec = spec_with({"row_key": "{pk}", "columns": [{"attribute": "v", "family": "f", "timestamp": {"attribute": "at"}}],
                      "rest": {"family": "g"}})
    item = {"pk": {"S": "p"}, "at": {"S": "2024-01-01T00:00:00"}, "w": {"S": "y"}}
    row = compile_spec(spec, NOW_MS).map_item(item)
    assert compile_decoder(spec).decode_item("e", row.row_key, row.cells) == item


def test_a_list_in_a_family_that_keeps_few_versions_is_a_loss_to_declare():
    listed = {"row_key": "{pk}", "columns": [{"attribute": "l", "family": "f", "layout": "list"}]}
    capped = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk"}, "target": {"table": "t", "families": {"f": {"max_versions": 1}}},
        "migration_time": "2024-01-01T00:00:00Z", "entities": [{"name": "e", **listed}],
    })  # fmt: skip
    [(path, message)] = undeclared(capped)
    assert path == ("entities", 0, "lossy") and "'l'" in message and "keeps 1" in message
    assert undeclared(spec_with(listed)) == []  # no max_versions: every element stays


@pytest.mark.parametrize("column, value", [
    ({"layout": "list", "encoding": "utf8"}, {"L": [{"S": ""}]}),  # read back as [] before
    ({"layout": "list", "encoding": "bytes"}, {"L": [{"B": b""}]}),
    ({"layout": "map", "encoding": "ddb_json"}, {"M": {"": {"S": "x"}}}),  # the key "" read back as {} before
    ({"layout": "map", "qualifier": "m:", "encoding": "auto"}, {"M": {"": {"N": "1"}, "a": {"S": "b"}}}),
    ({"layout": "map"}, {"M": {}}),
])
def test_values_next_to_an_empty_marker_read_back_whole(column, value):
    spec = spec_with({"row_key": "{pk}", "columns": [{"attribute": "v", "family": "f", **column}]})
    item = {"pk": {"S": "p"}, "v": value}
    row = compile_spec(spec, NOW_MS).map_item(item)
    assert round_trip(compile_decoder(spec), item, "e", row.row_key, row.cells) == []


def test_a_map_key_that_would_land_on_the_empty_map_marker_is_an_item_error():
    spec = spec_with({"row_key": "{pk}", "columns": [{"attribute": "v", "family": "f", "layout": "map", "encoding": "utf8"}]})
    result = compile_spec(spec, NOW_MS).map_item({"pk": {"S": "p"}, "v": {"M": {"": {"S": ""}}}})
    assert isinstance(result, ItemError) and result.attribute == "v" and "layout json" in result.reason


@pytest.mark.parametrize("at", [{"BOOL": True}, {"S": "1969-12-31T23:59:59"}, {"N": "-1"}, None])
@pytest.mark.parametrize("where", ["entity", "column"])
def test_a_timestamp_that_does_not_map_names_its_own_attribute(at, where):
    """QA: the dead letter named the first column (`attribute Name`) for a bad or missing `At`."""
    timestamp = {"attribute": "At"}
    entity = ({"timestamp": timestamp, "columns": [{"attribute": "Name", "family": "f"}]} if where == "entity"
              else {"columns": [{"attribute": "Name", "family": "f", "timestamp": timestamp}]})
    item = {"pk": {"S": "p"}, "Name": {"S": "n"}, **({"At": at} if at else {})}
    result = compile_spec(spec_with({"row_key": "{pk}", **entity, "rest": {"family": "g"}}), NOW_MS).map_item(item)
    assert isinstance(result, ItemError) and result.attribute == "At", result


def test_a_key_part_typed_n_that_is_no_number_is_a_decode_error_not_an_n_value():
    """Key types come from the target table's DescribeTable: a row key part that is no number under an N key
    decoded into {"N": "é#1"}, which crashed the rollback's writer ("unexpected DecimalError ... a bug") instead of
    being the row's dead letter. A number still reads back as it is."""
    from ddb2bt.mappers.decode import DecodeError

    spec = spec_with({"row_key": "{pk}#{sk}", "rest": {"family": "f"}})
    decoder = compile_decoder(spec, {"pk": "S", "sk": "N"})
    cells = compile_spec(spec, NOW_MS).map_item({"pk": {"S": "a"}, "sk": {"S": "é#1"}, "x": {"S": "1"}}).cells
    with pytest.raises((DecodeError, ValueError), match="is not a number"):
        decoder.decode_row("a#é#1".encode(), cells)
    assert decoder.decode_row(b"a#-12.5", cells)[0]["sk"] == {"N": "-12.5"}


@pytest.mark.parametrize("layout, value", [("set", {"SS": ["a", "b:c"]}), ("map", {"M": {"k": {"S": "v"}}})])
def test_a_set_or_map_under_a_qualifier_template_is_a_loss_to_declare(layout, value):
    """One order's tags folded into its customer's row under `{sk}:`: migrate wrote the members, but no decoder reads
    them back (the member follows the template's text), so parity stopped on "a bug" and rollback dead-lettered
    every such row of a spec that had loaded as lossless. The loss is named and must be declared."""
    column = {"attribute": "tags", "family": "g", "qualifier": "{sk}:", "layout": layout, "encoding": "utf8"}
    entity = {"row_key": "{pk}", "columns": [column, {"attribute": "n", "family": "f", "qualifier": "{sk}.n",
                                                      "encoding": "utf8"}]}  # fmt: skip
    spec = spec_with(entity)
    (problem,) = undeclared(spec)
    assert problem[0] == ("entities", 0, "lossy") and "'tags'" in problem[1] and "qualifier template" in problem[1]
    declared = spec_with({**entity, "lossy": ["tags"]})
    assert undeclared(declared) == []
    row = compile_spec(declared, NOW_MS).map_item({"pk": {"S": "c"}, "sk": {"S": "o1"}, "tags": value, "n": {"S": "x"}})
    assert round_trip(compile_decoder(declared), {"pk": {"S": "c"}, "sk": {"S": "o1"}, "tags": value, "n": {"S": "x"}},
                      row.entity, row.row_key, row.cells)  # it does not read back: the declared loss is real
