"""The incremental export check's fast path (``VALUES_VALID``, one regular expression over the raw line) gives exactly
what the general check gives (every value of Keys and the images visited by ``is_value``/``value_problem``): the same
change, or the same refusal naming the same field, for generated lines good and bad, compact or not, nested deeper
than the expression reads; and a line it matches has only valid values. The general check is the reference: it is
the check of every line the expression does not match (and of every Ion line)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ddb2bt.mappers.attrvalue import is_value
from ddb2bt.pipelines.dynamodb.export import ExportError
from ddb2bt.pipelines.dynamodb.incremental_export import VALUES_VALID, check_export, read_incremental_manifest

from .change_lines import line_of, outcome, records
from .documented_exports import DOCUMENTED, EXPORTS, INC2


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.booleans(), st.booleans(), st.sampled_from([(), ("pk",), ("pk", "sk")]))
def test_the_fast_path_gives_the_general_checks_change_or_refusal(record, compact, ascii_only, key_names):
    line = line_of(record, compact, ascii_only)
    parsed = json.loads(line)
    assert outcome(parsed, key_names, line) == outcome(parsed, key_names, None)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.booleans(), st.data())
def test_a_line_the_expression_matches_holds_only_valid_values_whatever_its_bytes(record, ascii_only, data):
    """Also over lines with one byte changed, dropped or doubled: what still parses as JSON is judged as the general
    check judges it, and a matched line holds no value ``is_value`` refuses."""
    line = line_of(record, True, ascii_only)
    if line and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(line) - 1))
        edit = data.draw(st.sampled_from(["replace", "drop", "double"]))
        byte = bytes([data.draw(st.sampled_from(list(b'{}[]",:\\0123456789=+/ SNBML.-etaru')))])
        line = line[:at] + (byte if edit == "replace" else line[at:at + 1] * 2 if edit == "double" else b"") \
            + line[at + 1:]
    try:
        parsed = json.loads(line)
    except ValueError:
        return
    if VALUES_VALID.fullmatch(line) is not None:
        for part in ("Keys", "OldImage", "NewImage"):
            attributes = parsed.get(part)
            assert attributes is None or all(map(is_value, attributes.values()))
    assert outcome(parsed, ("pk",), line) == outcome(parsed, ("pk",), None)


def test_the_expression_reads_real_lines_and_leaves_the_rest_to_the_general_check():
    """It is the fast path for the lines DynamoDB writes (compact JSON): every change line of the documented exports
    but the one whose N has 39 characters (plain decimals of at most 38 are the number check's own fast test)."""
    lines = [line for path in sorted((DOCUMENTED / EXPORTS / "data").glob("*.json.gz"))
             for line in gzip.decompress(path.read_bytes()).splitlines() if line.strip()]
    matched = [line for line in lines if VALUES_VALID.fullmatch(line)]
    assert len(lines) == 9 and len(matched) == 8
    assert all(b'"1234567890123456789012345678.9012345678"' in line for line in lines if line not in matched)
    nested = {"Metadata": {"WriteTimestampMicros": {"N": "1"}}, "Keys": {"pk": {"S": "a"}},
              "NewImage": {"pk": {"S": "a"}, "m": {"M": {"l": {"L": [{"M": {"x": {"NS": ["1", "-.5"]}}}]}}}}}
    assert VALUES_VALID.fullmatch(line_of(nested, True, True))
    assert not VALUES_VALID.fullmatch(line_of(nested, False, True))  # spaces: the general check
    nested["NewImage"]["m"] = {"L": [nested["NewImage"]["m"]]}  # five levels: the general check
    assert not VALUES_VALID.fullmatch(line_of(nested, True, True))


BAD_VALUES = {
    "number out of range": ({"N": "1e400"}, 'NewImage.Title: "1e400" is not a valid N value'),
    "unpadded base64": ({"B": "YQ"}, 'NewImage.Title: "YQ" is not a valid B value'),
    "empty set": ({"SS": []}, "NewImage.Title: [] is not a valid SS value"),
    "nested unknown tag": ({"M": {"a": {"L": [{"S": "ok"}, {"Oops": 1}]}}},
                           "NewImage.Title.a[1]: unknown DynamoDB type 'Oops'"),
}


@pytest.mark.parametrize("kind", list(BAD_VALUES))
def test_a_compact_line_with_a_bad_value_refuses_the_export_naming_file_line_and_field(tmp_path, kind):
    """The lines AWS writes are compact, the fast path's lines: a bad value there is still found, and named."""
    bucket = shutil.copytree(DOCUMENTED, tmp_path / "bucket")
    export_dir = Path(bucket) / EXPORTS / INC2
    manifest = read_incremental_manifest(str(export_dir))
    data_file = manifest.files[0].path
    lines = gzip.decompress(Path(data_file).read_bytes()).decode().splitlines()
    record = json.loads(lines[3])
    record["NewImage"]["Title"], message = BAD_VALUES[kind]
    lines[3] = json.dumps(record, separators=(",", ":"))
    Path(data_file).write_bytes(gzip.compress("".join(line + "\n" for line in lines).encode()))
    with pytest.raises(ExportError) as refused:
        check_export(manifest, ("pk", "sk"), keep="fast-path-test")
    assert str(refused.value).startswith(f"{data_file} line 4 is not a change record: {message}")
