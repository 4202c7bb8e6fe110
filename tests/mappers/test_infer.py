"""infer_spec (pure) and the commented YAML writer."""

from datetime import datetime, timezone

import yaml

from ddb2bt.mappers.analysis.infer import infer_spec
from ddb2bt.mappers.loader import validate_data
from ddb2bt.mappers.spec_yaml import render_yaml

NOW = datetime(2024, 5, 1, tzinfo=timezone.utc)


def _describe(pk="pk", sk="sk", **extra):
    keys = [{"AttributeName": pk, "KeyType": "HASH"}] + ([{"AttributeName": sk, "KeyType": "RANGE"}] if sk else [])
    return {"Table": {"TableName": "Things", "KeySchema": keys, "ItemCount": 10, "TableSizeBytes": 100, **extra}}


def _draft(items, **kw):
    draft = infer_spec(_describe(**{k: v for k, v in kw.items() if k in ("pk", "sk")}), items, now=NOW)
    text = render_yaml(draft.spec, draft.comments, draft.header)
    assert yaml.safe_load(text) == draft.spec
    return draft, validate_data(draft.spec)


def test_type_attribute_splits_entities():
    items = [{"pk": {"S": f"u{i}"}, "sk": {"S": f"x{i}"}, "type": {"S": "user" if i % 2 else "order"}, "Name": {"S": "n"}}
             for i in range(6)]
    draft, spec = _draft(items)
    assert [e.name for e in spec.entities] == ["order", "user"]
    assert spec.entities[0].match["type"].equals == "order"
    assert spec.entities[0].row_key.template == "{pk}#{sk}"


def test_types_counters_sets_maps_lists_and_times():
    items = [{"pk": {"S": f"k{i}"}, "Views": {"N": str(i)}, "Price": {"N": "1.50"}, "Tags": {"SS": ["a", "b"]},
              "Meta": {"M": {"a": {"S": "b"}}}, "Hist": {"L": [{"N": "1"}]}, "Flag": {"BOOL": True},
              "CreatedAt": {"S": "2023-09-10T15:21:48Z"}} for i in range(3)]
    items[0]["Rare"] = {"S": "r"}
    draft, spec = _draft(items, sk=None)
    columns = {c.attribute: c for c in spec.entities[0].columns}
    assert columns["Views"].encoding.value == "int64"
    assert columns["Price"].encoding.value == "decimal"
    assert columns["Tags"].layout.value == "set" and columns["Tags"].encoding.value == "utf8"  # reads back as SS
    assert columns["Meta"].encoding.value == "json" and columns["Hist"].encoding.value == "json"
    assert columns["Flag"].encoding.value == "bool"
    assert spec.entities[0].timestamp.attribute == "CreatedAt" and "CreatedAt" not in columns
    assert spec.entities[0].row_key.template == "{pk}"
    assert any("Rare: present in 1 of 3" in text for text in draft.comments.values())


def test_same_attributes_under_different_sort_keys_stay_one_entity():
    items = [{"pk": {"S": "hats"}, "sk": {"S": f"{kind}#brand{b}"}, "Price": {"N": "1"}} for kind in ("fedoras", "caps") for b in "AB"]
    _, spec = _draft(items)
    assert len(spec.entities) == 1 and spec.entities[0].row_key.template == "{pk}#{sk}"


def test_forward_timestamp_ids_become_cell_times():
    items = [{"pk": {"S": "dev1"}, "sk": {"S": "Reading#" + str(1694359308000 + i)}, "Value": {"N": "1"}} for i in range(3)]
    items.append({"pk": {"S": "dev1"}, "sk": {"S": "Device"}, "Model": {"S": "x"}})
    _, spec = _draft(items)
    reading = next(e for e in spec.entities if e.name == "reading")
    assert reading.timestamp.template == "{sk|strip_prefix('Reading#')}" and reading.timestamp.format == "epoch_ms"


def test_header_explains_indexes_streams_and_ttl():
    describe = _describe(GlobalSecondaryIndexes=[{"IndexName": "byEmail", "KeySchema": [{"AttributeName": "Email", "KeyType": "HASH"}]}],
                         StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
    draft = infer_spec(describe, [{"pk": {"S": "a"}, "sk": {"S": "b"}, "exp": {"N": "1"}}], ttl_attribute="exp", now=NOW)
    header = "\n".join(draft.header)
    assert "GSI byEmail (Email)" in header and "Streams are on (NEW_IMAGE)" in header and "TTL is enabled on 'exp'" in header


def test_yaml_writer_round_trips_awkward_scalars():
    data = {"a": "it's", "b": 'say "x"', "c": "{x}", "d": "x\\y", "e": "'q'", "f": "yes", "g": "", "h": [1, "2"],
            "i": {"nested": [{"k": "v", "l": [True, None]}]}}
    assert yaml.safe_load(render_yaml(data, {("i", "nested", 0): "a comment"}, ["header"])) == data


def test_drafts_pass_the_loss_check_typed_sets_exact_json_and_declared_losses():
    """An undeclared loss is a spec error, so every draft must load: sets typed, maps with binary values in ddb_json,
    and what the draft still cannot read back listed in `lossy` with the reason as a comment."""
    items = [{"pk": {"S": f"k{i}"}, "Ids": {"NS": ["1", "2.5"]}, "Blobs": {"BS": [b"\x00"]},
              "Doc": {"M": {"img": {"B": b"\x89PNG"}, "tags": {"SS": ["a"]}}}, "Plain": {"M": {"a": {"N": "1"}}},
              "Ids:extra": {"S": "a column whose name the Ids set's members could also take"}} for i in range(3)]
    draft, spec = _draft(items, sk=None)
    columns = {c.attribute: c for c in spec.entities[0].columns}
    assert (columns["Ids"].encoding.value, columns["Blobs"].encoding.value) == ("decimal", "bytes")
    assert columns["Doc"].encoding.value == "ddb_json" and columns["Plain"].encoding.value == "json"
    assert spec.entities[0].lossy == ["Ids"]  # its members share family and prefix with the column 'Ids:extra'
    assert any("Ids: its qualifiers in family" in text for text in draft.comments.values())
