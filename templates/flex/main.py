"""Dataflow Flex Template launcher: reads the template parameters and runs the ddb2bt migration.

The launcher image runs this file (FLEX_TEMPLATE_PYTHON_PY_FILE) with the job's parameters as
`--name=value` arguments; they are the `MigrationOptions` of ddb2bt.pipelines.options plus
Beam's own (runner, project, region, temp_location, ... set by the Flex Template service).
"""

from __future__ import annotations

import logging
import sys
import tempfile

FLAGS = ("resume",)
"""store_true options: Flex Templates pass every parameter as `--name=value`, argparse wants `--name`."""


def normalize_flags(argv: list[str]) -> list[str]:
    """`--resume=true` -> `--resume`, `--resume=false` -> (dropped); everything else unchanged."""
    out = []
    for arg in argv:
        name, _, value = arg.lstrip("-").partition("=")
        if arg.startswith("--") and name in FLAGS and value:
            if value.lower() in ("true", "1", "yes"):
                out.append(f"--{name}")
            elif value.lower() not in ("false", "0", "no"):
                raise SystemExit(f"--{name} must be true or false, got {value!r}")
            continue
        out.append(arg)
    return out


def load_spec_anywhere(path: str):
    """load_spec for a local path or any Beam filesystem URL (gs://, s3://)."""
    from apache_beam.io.filesystems import FileSystems

    from ddb2bt.mappers.loader import load_spec

    if "://" not in path:
        return load_spec(path)
    suffix = "." + path.rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1] else ".yaml"
    with FileSystems.open(path) as source, tempfile.NamedTemporaryFile("wb", suffix=suffix) as local:
        local.write(source.read())
        local.flush()
        return load_spec(local.name)


def main(argv: list[str] | None = None) -> int:
    from ddb2bt.pipelines.options import MigrationOptions
    from ddb2bt.pipelines.pipeline import run_migration

    args = normalize_flags(list(sys.argv[1:] if argv is None else argv))
    options = MigrationOptions(args).get_all_options()
    if not options["spec"]:
        raise SystemExit("the `spec` parameter is required (gs://bucket/path/spec.yaml)")
    result = run_migration(
        load_spec_anywhere(options["spec"]),
        run_dir=options["run_dir"], dead_letter=options["dead_letter"], resume=options["resume"],
        total_segments=options["total_segments"], sample=options["sample"],
        flow=MigrationOptions(args).flow_control(), pipeline_args=args,
    )
    logging.info("%s", result.report())
    return 0 if result.ok else 1


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.INFO)
    sys.exit(main())
