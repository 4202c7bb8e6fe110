"""Error -> (exit code, one line, no traceback) for `migrate`, `validate` and `migrate-plan`, against real servers.

Every case is a real fault: a missing file, a table that is not there, a server that is not
listening, no credentials, a gRPC peer that answers PERMISSION_DENIED to every call.
"""

from __future__ import annotations

import time
from concurrent import futures

import grpc
import pytest
from typer.testing import CliRunner

from ddb2bt.cli.main import app
from ddb2bt.mappers.loader import load_spec
from ddb2bt.pipelines.bigtable.sink import admin_table, existing_families
from ddb2bt.pipelines.dynamodb.client import ClientSettings, create_table, make_client, put_items
from .specs import SPEC

COMMANDS = ("migrate", "validate", "migrate-plan")
DEAD = "127.0.0.1:9"  # discard port: nothing listens there

def invoke(*args):
    yes = ["--yes"] if args[0] == "migrate" else []  # migrate asks first; --yes, so that only the error can stop it
    result = CliRunner().invoke(app, [str(a) for a in args] + yes)
    return result.exit_code, result.stderr


@pytest.fixture
def source(moto_server, unique_name, tmp_path):
    """A spec file for a real two-item table in moto_server."""
    client = make_client(ClientSettings(endpoint_url=moto_server.endpoint))
    create_table(client, unique_name, "pk")
    put_items(client, unique_name, [{"pk": {"S": "a"}, "v": {"S": "1"}}, {"pk": {"S": "b"}, "v": {"S": "2"}}])
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(table=unique_name, endpoint=moto_server.endpoint))
    return spec


@pytest.fixture
def denying_bigtable(monkeypatch):
    """A gRPC server on loopback that refuses every Bigtable call with PERMISSION_DENIED."""

    def deny(request, context):
        context.abort(grpc.StatusCode.PERMISSION_DENIED, "caller lacks bigtable.tables.readRows")
        yield  # pragma: no cover - abort raises

    class Deny(grpc.GenericRpcHandler):
        def service(self, handler_call_details):
            return grpc.unary_stream_rpc_method_handler(deny)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[Deny()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", f"127.0.0.1:{port}")
    yield
    server.stop(0)


def check(code, stderr, expected_code, text):
    """The exit code, and one `error:` line, the last, naming ``text`` (migrate says where it writes before it)."""
    assert code == expected_code, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and stderr.rstrip().endswith(errors[0]), stderr
    assert text in errors[0] and "Traceback" not in stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_missing_spec(command, tmp_path):
    check(*invoke(command, tmp_path / "nope.yaml"), 2, "nope.yaml")


@pytest.mark.parametrize("command", COMMANDS)
def test_bad_spec(command, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("source: {table: T}\ntarget: {table: t, families: {f: {}}}\nentities: []\n")
    check(*invoke(command, spec), 2, "spec.yaml")


@pytest.mark.parametrize("command", COMMANDS)
def test_missing_dynamodb_table(command, bigtable_env, moto_server, tmp_path, unique_name):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(table="NoSuchTable", endpoint=moto_server.endpoint).replace(
        "target: {table: NoSuchTable", f"target: {{table: {unique_name}"))
    check(*invoke(command, spec), 2, "check the table name")
    # the source is checked before anything is done to the target: no Bigtable table was created
    assert existing_families(admin_table(load_spec(spec).target)) is None


@pytest.mark.parametrize("command", COMMANDS)
def test_unreachable_dynamodb(command, bigtable_env, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(table="T", endpoint=f"http://{DEAD}"))
    check(*invoke(command, spec), 3, "check --endpoint-url")


@pytest.mark.parametrize("command", (*COMMANDS, "infer"))
def test_credentials_in_an_endpoint_url_are_never_printed(command, bigtable_env, tmp_path):
    """--endpoint-url http://user:PASSWORD@host: the error names the endpoint with the password masked."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(table="T", endpoint=f"http://{DEAD}"))
    endpoint = f"http://user:SECRETPW@{DEAD}"
    args = ("--table", "T", "--aws-region", "us-east-1") if command == "infer" else (spec,)
    code, stderr = invoke(command, *args, "--endpoint-url", endpoint)
    check(code, stderr, 3, f"http://user:***@{DEAD}")
    assert "SECRETPW" not in stderr


def test_library_errors_are_translated_without_url_credentials():
    from botocore.exceptions import EndpointConnectionError

    from ddb2bt.pipelines.run.service_errors import as_ddb2bt_error, redact

    error = as_ddb2bt_error(EndpointConnectionError(endpoint_url="https://AKIA:s3cr3t@dynamodb.example/"))
    assert error is not None and error.exit_code == 3 and "s3cr3t" not in str(error)
    assert "https://AKIA:***@dynamodb.example/" in str(error)
    assert redact("see http://token@host/x and mail a@b.c, http://h:80/p@q") == \
        "see http://***@host/x and mail a@b.c, http://h:80/p@q"


def test_beams_s3_errors_are_the_users_path_or_the_service():
    """Beam's S3 file system raises its own S3ClientError (`--run-dir s3://missing-bucket/...`): it was 'unexpected
    S3ClientError ... (a bug)', exit 1."""
    from apache_beam.io.aws.clients.s3.messages import S3ClientError

    from ddb2bt.pipelines.run.service_errors import as_ddb2bt_error

    missing = as_ddb2bt_error(S3ClientError("An error occurred (NoSuchBucket) ...: The specified bucket does not "
                                            "exist", 404))
    assert missing is not None and missing.exit_code == 2
    assert str(missing).startswith("S3: An error occurred (NoSuchBucket)") and "s3:// paths" in str(missing)
    for code in (403, 500, None):
        refused = as_ddb2bt_error(S3ClientError("An error occurred (AccessDenied)", code))
        assert refused is not None and refused.exit_code == 3, code


@pytest.mark.parametrize("command", COMMANDS)
def test_no_aws_credentials(command, bigtable_env, source, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    check(*invoke(command, source), 3, "configure AWS credentials")


def test_missing_bigtable_table_on_validate(bigtable_env, source):
    check(*invoke("validate", source), 2, "does not exist")


@pytest.mark.parametrize("command", ("migrate", "validate"))
def test_permission_denied(command, denying_bigtable, source):
    check(*invoke(command, source), 3, "PermissionDenied")


@pytest.mark.parametrize("command", ("migrate", "validate"))
def test_emulator_down_fails_within_15_s(command, source, monkeypatch):
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", DEAD)
    start = time.monotonic()
    code, stderr = invoke(command, source)
    check(code, stderr, 3, "unreachable")
    assert time.monotonic() - start < 15
    assert "timeoutof" not in stderr and "s exceeded" in stderr, stderr  # the library's text, its words spaced


def test_nothing_to_resume(bigtable_env, source, tmp_path):
    check(*invoke("migrate", source, "--resume", "--run-dir", tmp_path / "never"), 2, "nothing to resume")


def test_resume_alone_without_an_earlier_run(bigtable_env, source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # --resume alone looks for the latest run of the spec under ./runs/
    check(*invoke("migrate", source, "--resume"), 2, "no run of this spec under runs/")


def test_a_bad_dead_letter_path_creates_no_run_folder(bigtable_env, source, tmp_path, monkeypatch):
    """Refused before anything is made: no runs/<name>/checkpoint.json that a later --resume would pick up."""
    monkeypatch.chdir(tmp_path)
    check(*invoke("migrate", source, "--dead-letter", "/proc/nope/dl.jsonl"), 2, "--dead-letter")
    assert not (tmp_path / "runs").exists()
    check(*invoke("migrate", source, "--resume"), 2, "no run of this spec under runs/")
    check(*invoke("migrate", source, "--run-dir", "/proc/nope/run"), 2, "--run-dir /proc/nope/run cannot be written")


def test_a_run_stopped_by_its_dead_letter_limit_keeps_every_dead_letter_it_counted(bigtable_env, moto_server,
                                                                                    unique_name, tmp_path):
    """7 items in one batch, none mappable (a '#' in a key part), --max-dead-letters 2: the 3rd passes the limit, the
    run stops after its batch; the summary, the file and the error line agree, and the exit is 1 (the run started)."""
    client = make_client(ClientSettings(endpoint_url=moto_server.endpoint))
    create_table(client, unique_name, "pk")
    put_items(client, unique_name, [{"pk": {"S": f"a#{i}"}, "v": {"S": "x"}} for i in range(7)])
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(table=unique_name, endpoint=moto_server.endpoint).replace('"{pk}"', '"{pk}#{v}"'))
    result = CliRunner().invoke(app, ["migrate", str(spec), "--yes", "--run-dir", str(tmp_path / "run"),
                                      "--max-dead-letters", "2", "--total-segments", "1"])  # one segment: one batch
    check(result.exit_code, result.stderr, 1, "migration stopped: 7 items were dead-lettered, more than "
          "--max-dead-letters 2 allows")
    assert "7 dead-lettered" in result.stdout and "(7 lines; holds user data)" in result.stdout, result.stdout
    assert len((tmp_path / "run" / "dead_letters.jsonl").read_text().splitlines()) == 7
    assert "resume with:" not in result.stderr  # the error says itself how to go on, once


def test_resume_refuses_sample(tmp_path):
    """A --sample run keeps no checkpoint: nothing of it can be resumed (refused before the spec is even read)."""
    code, stderr = invoke("migrate", tmp_path / "nope.yaml", "--resume", "--sample", "3")
    assert code == 2 and stderr.splitlines() == [stderr.strip()], stderr
    check(code, stderr, 2, "--resume and --sample do not go together")


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_option(command, tmp_path):
    check(*invoke(command, tmp_path / "nope.yaml", "--bogus-flag"), 2, "--bogus-flag")


@pytest.mark.parametrize("segments", ["0", "1000001"])
def test_segment_count_out_of_range(segments, tmp_path):
    check(*invoke("migrate", tmp_path / "nope.yaml", "--total-segments", segments), 2, "--total-segments")


def test_no_target_names_and_no_emulator_refuses(source, monkeypatch):
    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    check(*invoke("migrate", source), 2, "pass --project and --instance")
