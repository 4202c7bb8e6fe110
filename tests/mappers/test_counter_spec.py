"""Counters in the spec: `aggregate: sum` families hold only int64 cells, each one item's; anything else is one line
naming the file, the field and the fix (exit 2 at the CLI), before anything starts."""

import pytest

from ddb2bt.mappers.decode import DecodeError, Decoder
from ddb2bt.mappers.gc import family_text
from ddb2bt.mappers.loader import SpecError, load_spec
from ddb2bt.mappers.results import Cell

COUNTERS = """\
source: {table: T, partition_key: pk, sort_key: sk}
target:
  table: t
  families:
    f: {}
    stats: {aggregate: sum}
entities:
  - name: likes
    match: {sk: Likes}
    row_key: "{pk}"
    drop: [sk]
    columns:
      - {attribute: Count, family: stats, qualifier: Likes, encoding: int64}
      - {attribute: Title, family: f}
"""

CASES = [
    ("a counter not int64", COUNTERS.replace("qualifier: Likes, encoding: int64", "qualifier: Likes, encoding: decimal"),
     ":13: entities[0].columns[0].encoding: 'Count' is in aggregate family 'stats': a counter is encoding: int64"),
    ("a counter not one cell", COUNTERS.replace("encoding: int64}", "encoding: int64, layout: list}"),
     ":13: entities[0].columns[0].layout: 'Count' is in aggregate family 'stats': a counter is one cell "
     "(layout: cell)"),
    ("rest into an aggregate family", COUNTERS.replace("    drop: [sk]\n", "    drop: [sk]\n    rest: {family: stats}\n"),
     ":12: entities[0].rest.family: family 'stats' is an aggregate (counters only): rest cannot write there; give "
     "rest a plain family"),
    ("versioning", COUNTERS.replace("    drop: [sk]\n", "    versioning: {}\n"),
     ":11: entities[0].versioning: versioning keeps one cell per version, and a counter is rewritten whole"),
    ("ttl", COUNTERS.replace("    drop: [sk]\n", "    drop: [sk]\n    ttl: {attribute: exp}\n").replace("f: {}", "f: {max_age: 1d}"),
     ":12: entities[0].ttl: ttl expires cells by a max_age GC rule, which an aggregate family cannot have"),
    ("timestamp template", COUNTERS.replace("    drop: [sk]\n", "    drop: [sk]\n    timestamp: {template: '{pk}'}\n"),
     ":12: entities[0].timestamp: items told apart by timestamp templates share columns"),
    ("GC on an aggregate family", COUNTERS.replace("{aggregate: sum}", "{aggregate: sum, max_age: 30d}"),
     ":6: target.families.stats: an aggregate family keeps no GC rule: a counter is the sum of its cells"),
    ("another aggregate", COUNTERS.replace("{aggregate: sum}", "{aggregate: summ}"),
     ":6: target.families.stats.aggregate: "),
]


@pytest.mark.parametrize("text, message", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_counter_spec_is_one_line_per_problem(tmp_path, text, message):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    rendered = str(caught.value)
    assert rendered.startswith(str(path)) and message in rendered and len(rendered.splitlines()) == 1, rendered


def test_a_counter_spec_loads_and_its_family_says_what_it_is(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(COUNTERS)
    spec = load_spec(path)
    assert family_text(spec.target.families["stats"]) == "Int64 sum aggregate"
    assert family_text(spec.target.families["f"]) == "keep every version (no GC rule)"


def test_the_decoder_sums_a_counters_cells_and_refuses_what_is_no_int64(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(COUNTERS)
    decoder = Decoder(load_spec(path))
    cells = [Cell("stats", b"Likes", 1_000, (7).to_bytes(8, "big")), Cell("stats", b"Likes", 2_000,
                                                                          (-2).to_bytes(8, "big", signed=True))]
    assert decoder.decode_item("likes", b"v1", cells) == {"pk": {"S": "v1"}, "Count": {"N": "5"}}
    with pytest.raises(DecodeError, match="a counter cell holds 3 bytes, not an 8-byte Int64"):
        decoder.decode_item("likes", b"v1", [Cell("stats", b"Likes", 1_000, b"abc")])
