"""Worker AWS credentials: a Google identity token from a stand-in metadata server, exchanged at moto's STS.

moto_server implements STS AssumeRoleWithWebIdentity (a real HTTP endpoint, answers parsed by
botocore); the metadata server is a loopback stand-in that answers as the GCE one does (a JWT, only
with `Metadata-Flavor: Google`), counting the tokens it hands out. Renewal is botocore's own
refresh logic: credentials that live 15 minutes are inside botocore's 15-minute advisory window,
so the next use renews them; credentials that live an hour are reused.
"""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from ddb2bt.pipelines.dynamodb import web_identity as awi

ROLE = "arn:aws:iam::123456789012:role/ddb2bt-reader"


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


class StandInMetadata:
    """GCE metadata server stand-in: identity tokens (unsigned JWTs) for the default service account."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.tokens: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                url = urlparse(self.path)
                outer.requests.append({"path": url.path, "query": parse_qs(url.query),
                                       "flavor": self.headers.get("Metadata-Flavor")})
                if self.headers.get("Metadata-Flavor") != "Google" or url.path != awi.IDENTITY_PATH:
                    self.send_response(403)
                    self.end_headers()
                    return
                audience = parse_qs(url.query)["audience"][0]
                token = ".".join([_b64({"alg": "RS256", "typ": "JWT"}),
                                  _b64({"iss": "https://accounts.google.com", "aud": audience,
                                        "azp": "1234567890", "sub": "1234567890", "n": len(outer.tokens)}),
                                  "c2lnbmF0dXJl"])
                outer.tokens.append(token)
                body = token.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def metadata(monkeypatch):
    server = StandInMetadata()
    monkeypatch.setenv("GCE_METADATA_HOST", server.host)
    yield server
    server.close()


@pytest.fixture
def sts(moto_server, monkeypatch):
    """STS at moto_server through botocore's standard service endpoint variable (no endpoint passed in code)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", moto_server.endpoint)
    return moto_server


def test_the_token_is_asked_for_as_the_metadata_server_wants(metadata):
    token = awi.identity_token("my-audience")
    assert token == metadata.tokens[0]
    request = metadata.requests[0]
    assert request["path"] == "/computeMetadata/v1/instance/service-accounts/default/identity"
    assert request["query"] == {"audience": ["my-audience"], "format": ["full"]}
    assert request["flavor"] == "Google"


def test_no_metadata_server_is_a_service_error_naming_it(monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    with pytest.raises(awi.MetadataServerError, match="no Google identity token from the metadata server at "
                                                      "127.0.0.1:9") as caught:
        awi.identity_token()
    assert caught.value.exit_code == 3


def test_credentials_are_obtained_and_renewed_by_botocore(metadata, sts, caplog):
    import botocore.session

    caplog.set_level(logging.INFO)  # what a worker logs (botocore's own DEBUG lines print request bodies)
    caplog.set_level(logging.DEBUG, logger="ddb2bt")
    session = botocore.session.Session()
    credentials = awi.refreshable_credentials(ROLE, session.create_client, duration_seconds=900)
    first = credentials.get_frozen_credentials()
    assert len(metadata.tokens) == 1
    assert first.access_key.startswith("ASIA") and first.token  # temporary credentials, from STS
    # 15 minutes left is inside botocore's advisory refresh window: the next use renews, with a new token
    second = credentials.get_frozen_credentials()
    assert len(metadata.tokens) == 2
    assert second.access_key != first.access_key and second.secret_key != first.secret_key
    for secret in (*metadata.tokens, first.secret_key, first.token, second.secret_key, second.token):
        assert secret not in caplog.text  # never logged


def test_credentials_that_live_an_hour_are_reused(metadata, sts):
    import botocore.session

    credentials = awi.refreshable_credentials(ROLE, botocore.session.Session().create_client,
                                              duration_seconds=3600)
    assert credentials.get_frozen_credentials() == credentials.get_frozen_credentials()
    assert len(metadata.tokens) == 1


def test_a_session_with_the_role_signs_with_it_ahead_of_environment_keys(metadata, sts):
    """conftest sets AWS_ACCESS_KEY_ID=testing: the installed provider comes first in the chain."""
    from ddb2bt.pipelines.dynamodb.aws import boto3_session, botocore_session

    session = boto3_session(region="us-east-1", core=awi.install(botocore_session(), ROLE))  # as aws_client makes it
    frozen = session.get_credentials().get_frozen_credentials()
    assert frozen.access_key != "testing" and frozen.token
    assert session.get_credentials().method == awi.METHOD
    client = session.client("dynamodb", endpoint_url=sts.endpoint)
    assert "TableNames" in client.list_tables()  # a real call, signed with the role's credentials
    assert metadata.tokens and metadata.requests[0]["query"]["audience"] == [awi.DEFAULT_AUDIENCE]


def test_credential_process_prints_what_the_aws_config_reads(metadata, sts, tmp_path, monkeypatch):
    """The module as a `credential_process` (for clients ddb2bt does not make, such as Beam's S3 file system):
    botocore's own ProcessProvider reads its output into credentials."""
    import botocore.session

    config = tmp_path / "config"
    config.write_text(f"[profile worker]\ncredential_process = {sys.executable} -m ddb2bt.pipelines.dynamodb.web_identity "
                      f"--role-arn {ROLE}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    out = subprocess.run([sys.executable, "-m", "ddb2bt.pipelines.dynamodb.web_identity", "--role-arn", ROLE],
                         capture_output=True, text=True, timeout=60, check=True)
    printed = json.loads(out.stdout)
    assert printed["Version"] == 1 and printed["AccessKeyId"].startswith("ASIA") and printed["Expiration"]
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    credentials = botocore.session.Session(profile="worker").get_credentials()
    assert credentials.method == "custom-process"
    assert credentials.get_frozen_credentials().access_key.startswith("ASIA")
    assert len(metadata.tokens) == 2  # one per run of the process


def test_credential_process_without_a_metadata_server_fails_in_one_line(monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    out = subprocess.run([sys.executable, "-m", "ddb2bt.pipelines.dynamodb.web_identity", "--role-arn", ROLE],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "metadata server at 127.0.0.1:9" in out.stderr


def test_the_run_option_reaches_the_dynamodb_clients_workers_make(metadata, sts):
    """--aws-role-arn → the spec's source (pickled to the workers) → ClientSettings → the client's credentials."""
    import pickle

    from ddb2bt.app.context import load_spec
    from ddb2bt.app.options import parse_args
    from ddb2bt.mappers.spec import MappingSpec
    from ddb2bt.pipelines.run.checkpoint import spec_hash
    from ddb2bt.pipelines.dynamodb.client import ClientSettings, make_client

    spec = MappingSpec.model_validate({
        "source": {"table": "T", "partition_key": "pk", "endpoint_url": sts.endpoint, "region": "us-east-1"},
        "target": {"project": "p", "instance": "i", "table": "t", "families": {"f": {"max_versions": 1}}},
        "entities": [{"name": "e", "row_key": "{pk}", "timestamp": {"fixed": "2024-01-01T00:00:00Z"},
                      "columns": [{"attribute": "a", "family": "f"}]}]})
    options, _ = parse_args([f"--aws-role-arn={ROLE}"])
    with_role = load_spec(spec, options, writes=False)
    assert with_role.source.role_arn == ROLE
    assert spec_hash(with_role) == spec_hash(spec)  # how AWS is reached is no part of what is migrated
    settings = pickle.loads(pickle.dumps(ClientSettings.from_source(with_role.source)))
    client = make_client(settings)
    assert "TableNames" in client.list_tables()
    assert len(metadata.tokens) == 1  # the call was signed with the role's credentials
    assert make_client(ClientSettings.from_source(spec.source)).list_tables() and len(metadata.tokens) == 1
