"""Dataflow Flex Template launcher: reads the template parameters and runs the ddb2bt migration.

The launcher image runs this file (FLEX_TEMPLATE_PYTHON_PY_FILE) with the job's parameters as
`--name=value` arguments: ddb2bt's run options (the same table as the CLI's, see
ddb2bt.app.options) plus Beam's own (runner, project, region, temp_location, ... set by the Flex
Template service). Both go through the application layer's migrate use case, like `ddb2bt migrate`.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import tempfile


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
    """Launch (or, with --dry_run=true, only build) the job; 0 when it ran OK or was built, 1 if not, 2/3 on errors."""
    from ddb2bt.app.migrate import execute, prepare
    from ddb2bt.app.options import parse_args
    from ddb2bt.mappers.errors import Ddb2btError, UsageError

    try:
        options, spec = parse_args(list(sys.argv[1:] if argv is None else argv), with_spec=True)
        # The launcher submits the job and exits (the Flex Template service times out a launcher that waits).
        options = dataclasses.replace(options, no_wait=True)
        if not spec:
            raise UsageError("the `spec` parameter is required", "pass --spec=gs://BUCKET/path/spec.yaml")
        prepared = prepare(load_spec_anywhere(spec), options)
        result = execute(prepared)
    except Ddb2btError as error:
        logging.error("%s", error.one_line())
        return error.exit_code
    if result.state == "DRY_RUN":
        logging.info("dry run: %s -> %s; stages: %s; staged package: %s", prepared.source, prepared.target,
                     ", ".join(result.stages), result.staged_package)
        return 0
    logging.info("job %s %s: state %s, counters %s, problems %s", result.job_id, result.console_url, result.state,
                 result.counters, result.problems)
    return 0 if result.ok else 1


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.INFO)
    sys.exit(main())
