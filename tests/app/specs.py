"""A small two-family spec for the app tests' tables on a local endpoint."""



SPEC = """\
source: {{table: {table}, endpoint_url: "{endpoint}", region: us-east-1}}
target: {{table: {table}, families: {{f: {{max_versions: 1}}}}}}
migration_time: "2024-01-01T00:00:00Z"
entities:
  - name: item
    row_key: "{{pk}}"
    columns: [{{attribute: v, family: f}}]
"""
