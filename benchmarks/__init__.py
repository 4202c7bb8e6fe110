"""Benchmarks: ddb2bt against a hand-written migration, on the same data in the same run (`python -m benchmarks.run`)."""
