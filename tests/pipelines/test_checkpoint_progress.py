"""The live progress of a scan run comes from its checkpoint: segments done out of the total."""

from ddb2bt.pipelines.run import checkpoint as ckpt


def test_segment_progress_follows_the_markers(tmp_path):
    run_dir = str(tmp_path / "run")
    assert ckpt.segment_progress(run_dir) == (0, None)  # not started: no total yet
    ckpt.Checkpoint.start(run_dir, "hash", 4, "Table", False)
    assert ckpt.segment_progress(run_dir) == (0, 4)
    ckpt.mark_segment_done(run_dir, 2)
    ckpt.mark_segment_done(run_dir, 0)
    ckpt.mark_segment_done(run_dir, 2)  # idempotent
    assert ckpt.segment_progress(run_dir) == (2, 4)
