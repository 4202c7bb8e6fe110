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
