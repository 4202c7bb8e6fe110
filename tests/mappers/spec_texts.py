"""A valid spec's YAML text that the spec-error tests vary one field at a time."""



BASE = """\
source:
  table: T
  partition_key: pk
  sort_key: sk
target:
  table: t
  families:
    f: {max_versions: 1}
entities:
  - name: a
    row_key: "{pk}"
    columns:
      - {attribute: x, family: f}
"""


# A spec with counters (an aggregate family), and what it may not do: (case, text, message) as CASES in
# test_spec_errors.py.
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

COUNTER_CASES = [
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
