"""The app itself: help, version, speed, and one-line errors with the right exit codes."""

import subprocess
import sys

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, PartialCredentialsError

from ddb2bt.cli.errors import classify


def test_help_lists_every_command(invoke):
    result = invoke("--help")
    assert result.exit_code == 0
    for name in ("init", "infer", "migrate-plan", "report", "migrate", "validate", "schema", "demo"):
        assert name in result.output


def test_version(invoke):
    result = invoke("--version")
    assert result.exit_code == 0 and result.output.startswith("ddb2bt ")


def test_importing_the_cli_loads_no_heavy_modules():
    # (the bare `google.cloud` namespace is preloaded by a .pth file in site-packages, so name the real packages)
    code = (
        "import sys, ddb2bt.cli.main\n"
        "heavy = [m for m in ('apache_beam', 'google.cloud.bigtable', 'google.api_core', 'boto3', 'botocore', 'ddb2bt.mappers.spec') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


@pytest.mark.parametrize("args", [["no-such-command"], ["migrate-plan"], ["migrate-plan", "x.yaml", "--format", "xml"],
                                  ["migrate-plan", "x.yaml", "--sample", "0"], ["init", "--bogus"]])
def test_usage_errors_exit_2(invoke, args):
    assert invoke(*args).exit_code == 2


def test_missing_spec_file_is_one_line_exit_2(invoke, tmp_path):
    result = invoke("migrate-plan", tmp_path / "nope.yaml")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'nope.yaml'}: cannot read the spec: No such file or directory"
    assert "Traceback" not in result.output


def test_bad_spec_names_file_line_and_field(invoke, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("source: {table: T}\ntarget: {table: t, families: {f: {}}}\nentities:\n  - name: e\n    row_key: '{pk|revers}'\n    rest: {family: f}\n")
    result = invoke("migrate-plan", spec)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {spec}:5: entities[0].row_key")
    assert "unknown transform 'revers'" in lines[0]


def test_several_spec_problems_one_line_each(invoke, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("source: {table: T}\ntarget: {table: t, families: {f: {}}}\nentities:\n"
                    "  - {name: a, row_key: '{pk}', rest: {family: x}}\n  - {name: b, row_key: '{pk}', rest: {family: y}}\n")
    result = invoke("migrate-plan", spec)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith(f"error: {spec}:") for line in lines)
    assert "family 'x' is not declared" in lines[0] and "family 'y' is not declared" in result.stderr


def test_debug_reraises(invoke, tmp_path):
    result = invoke("--debug", "migrate-plan", tmp_path / "nope.yaml")
    assert result.exit_code == 1 and type(result.exception).__name__ == "SpecError"


def test_unreachable_endpoint_is_one_line_exit_3(invoke):
    result = invoke("infer", "--table", "T", "--endpoint-url", "http://127.0.0.1:9", "--aws-region", "us-east-1")
    assert result.exit_code == 3
    assert result.stderr.count("\n") == 1 and "check --endpoint-url" in result.stderr


def test_half_set_aws_credentials_are_bad_input_one_line_exit_2(invoke, monkeypatch, tmp_path):
    """An access key without its secret is the user's settings, not a service's refusal: exit 2 (it was 3), one line
    naming what is missing, nothing asked of AWS and nothing written."""
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = invoke("infer", "--table", "T", "--aws-region", "us-east-1", "-o", tmp_path / "draft.yaml")
    assert result.exit_code == 2, result.output
    assert result.stderr == ("error: Partial credentials found in env, missing: AWS_SECRET_ACCESS_KEY; set "
                             "AWS_SECRET_ACCESS_KEY too, or remove the half-set credentials from env so the next "
                             "source in AWS's chain (--profile, an instance role) is used\n")
    assert not (tmp_path / "draft.yaml").exists()


@pytest.mark.parametrize(
    ("error", "code", "text"),
    [
        (NoCredentialsError(), 3, "configure AWS credentials"),
        (PartialCredentialsError(provider="env", cred_var="AWS_SECRET_ACCESS_KEY"), 2,
         "Partial credentials found in env, missing: AWS_SECRET_ACCESS_KEY; set AWS_SECRET_ACCESS_KEY too, or remove "
         "the half-set credentials from env"),
        (EndpointConnectionError(endpoint_url="http://x"), 3, "http://x"),
        (ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "Requested resource not found"}}, "DescribeTable"),
         2, "check the table name"),
        (ClientError({"Error": {"Code": "AccessDeniedException", "Message": "nope"}}, "Scan"), 3, "(AccessDeniedException): nope"),
        (FileExistsError("spec.yaml already exists"), 2, "already exists"),
    ],
)
def test_classify(error, code, text):
    found = classify(error)
    found_code, message = found.exit_code, found.one_line()
    assert found_code == code and text in message and "\n" not in message


def test_unknown_errors_are_not_classified():
    assert classify(ZeroDivisionError("x")) is None


def test_our_warnings_are_sparse_one_line_each_and_undone(capsys):
    """A dead source retried by ten segments logged 37 raw `WARNING:ddb2bt.pipelines.dynamodb.scan:` lines before its
    one error line; the CLI shows one `warning:` line per kind every 30 s, credentials masked."""
    import logging

    from ddb2bt.cli.main import sparse_warnings

    log = logging.getLogger("ddb2bt.pipelines.dynamodb.scan")
    undo = sparse_warnings()
    try:
        for segment in range(10):
            log.warning("scan %s segment %d: %s; retry", "t", segment, "http://u:SECRET@127.0.0.1:1 refused")
        logging.getLogger("ddb2bt.other").warning("another kind")
    finally:
        undo()
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["warning: scan t segment 0: http://u:***@127.0.0.1:1 refused; retry", "warning: another kind"]
    assert logging.getLogger("ddb2bt").propagate and not logging.getLogger("ddb2bt").handlers


def test_a_service_gone_mid_catch_up_says_where_it_stopped_and_the_command_again(invoke, monkeypatch, tmp_path):
    """A catch-up whose Bigtable or export store dies part way: how far it read, that the timeline did not advance,
    then one line with the failure and the same command to run again, exit 3 (it was the failure's line alone)."""
    from botocore.exceptions import EndpointConnectionError

    from ddb2bt.app import cutover

    def dies_after_starting(spec, export, options, started=None):
        started(4)
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")

    monkeypatch.setattr(cutover, "catch_up", dies_after_starting)
    monkeypatch.setattr(cutover, "catch_up_progress", lambda run_dir: {"changes_read": 3})
    spec, run, export = tmp_path / "spec.yaml", tmp_path / "run", tmp_path / "AWSDynamoDB" / "01714568400000-b2c3d4e5"
    result = invoke("catch-up", spec, "--run-dir", run, "--export", export)
    assert result.exit_code == 3, result.output
    assert result.stdout.splitlines()[-1] == f"catch-up stopped: 3/4 changes read; the timeline in {run} did not advance"
    assert result.stderr.splitlines()[-1] == (
        'error: Could not connect to the endpoint URL: "http://127.0.0.1:9"; check --endpoint-url, your network, and '
        "that DynamoDB is reachable; once it is back, run the same command again (what was applied is applied again, "
        f"harmlessly): ddb2bt catch-up {spec} --run-dir {run} --export {export}")
