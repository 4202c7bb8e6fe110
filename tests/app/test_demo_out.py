"""`demo --out` never deletes what it did not write: only its own example folders are replaced."""

import pytest

from ddb2bt.app.demo import MARKER, prepare_out
from ddb2bt.mappers.errors import UsageError

EXAMPLES = ("videos", "invoices")


def test_a_rerun_replaces_only_the_example_folders(tmp_path):
    out = tmp_path / "demo"
    prepare_out(out, EXAMPLES)
    assert (out / MARKER).exists()
    (out / "videos" / "run").mkdir(parents=True)
    (out / "videos" / "run" / "dead_letters.jsonl").write_text("{}\n")
    (out / "notes.txt").write_text("mine")  # the user's, next to the demo's folders
    (out / "mine").mkdir()
    (out / "mine" / "spec.yaml").write_text("mine")
    prepare_out(out, EXAMPLES)
    assert not (out / "videos").exists()  # the demo's: replaced
    assert (out / "notes.txt").read_text() == "mine" and (out / "mine" / "spec.yaml").read_text() == "mine"
    assert (out / MARKER).exists()


def test_a_folder_no_demo_made_is_refused_and_left_alone(tmp_path):
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="was not made by `ddb2bt demo`; it is left untouched"):
        prepare_out(tmp_path, EXAMPLES)
    assert (tmp_path / "videos" / "keep.txt").read_text() == "mine" and not (tmp_path / MARKER).exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    prepare_out(empty, EXAMPLES)  # an empty folder is fine to use
    assert (empty / MARKER).exists()
