"""One endpoint rule for every AWS client (pipelines/dynamodb/aws.py): what each client is pointed at, and that a run against
local servers stays on them. The tests' net (AWS_ENDPOINT_URL=http://127.0.0.1:9, tests/conftest.py) is on."""

from __future__ import annotations

import pytest

from ddb2bt.mappers.errors import UsageError
from ddb2bt.mappers.spec import SourceSpec
from ddb2bt.pipelines.dynamodb.aws import SERVICE_IDS, aws_client, boto3_session, is_local, s3_beam_args, service_variable
from ddb2bt.pipelines.dynamodb.client import ClientSettings, make_client
from ddb2bt.pipelines.dynamodb.stream import make_streams_client, require_streams_api

from ..conftest import NET

LOCAL = "http://127.0.0.1:8111"
SERVICES = ("dynamodbstreams", "s3", "sts")


def endpoint(service: str, **kwargs) -> str:
    return aws_client(service, region="us-east-1", **kwargs).meta.endpoint_url


def test_the_service_variables_are_named_as_botocore_reads_them():
    assert [service_variable(s) for s in ("dynamodb", *SERVICES)] == [
        "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_STS"]


@pytest.mark.parametrize(("url", "local"), [
    ("http://127.0.0.1:8000", True), ("http://localhost:4566", True), ("http://dynamodb-local:8000", True),
    ("http://[::1]:8000", True), ("https://dynamodb.us-east-1.amazonaws.com", False),
    ("https://vpce-0a1b-c2d3.dynamodb.eu-west-1.vpce.amazonaws.com", False),
    ("https://dynamodb.cn-north-1.amazonaws.com.cn", False), ("https://dynamodb.us-east-1.api.aws", False),
    ("", False), (None, False)])
def test_local_means_outside_every_aws_partition(url, local):
    assert is_local(url) is local


def test_an_explicit_local_dynamodb_endpoint_takes_every_client_with_it():
    """--endpoint-url or the spec's endpoint_url: Streams, S3 and STS go to the same server, not to the net."""
    assert endpoint("dynamodb", endpoint_url=LOCAL) == LOCAL
    assert [endpoint(service, endpoint_url=LOCAL) for service in SERVICES] == [LOCAL] * 3
    settings = ClientSettings(region="us-east-1", endpoint_url=LOCAL)
    assert make_client(settings).meta.endpoint_url == make_streams_client(settings).meta.endpoint_url == LOCAL


def test_the_dynamodb_variable_takes_every_client_with_it_and_a_service_variable_wins(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", LOCAL)
    assert [endpoint(service) for service in ("dynamodb", *SERVICES)] == [LOCAL] * 4
    make_streams = make_streams_client(ClientSettings(region="us-east-1"))
    assert make_streams.meta.endpoint_url == LOCAL
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "http://127.0.0.1:8222")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:8333")
    assert [endpoint(service) for service in SERVICES] == ["http://127.0.0.1:8222", LOCAL, "http://127.0.0.1:8333"]
    assert endpoint("dynamodbstreams", endpoint_url=LOCAL) == "http://127.0.0.1:8222"  # its own variable first


def test_without_any_endpoint_every_client_meets_the_net():
    """Nothing configured but the tests' AWS_ENDPOINT_URL: every client is caught by it (so none reaches AWS)."""
    assert [endpoint(service) for service in ("dynamodb", *SERVICES)] == [NET] * 4


def test_an_aws_dynamodb_endpoint_implies_nothing_for_the_others(monkeypatch):
    """A VPC endpoint of DynamoDB is no Streams endpoint: Streams keeps AWS's own (here: the net's)."""
    vpce = "https://vpce-0a1b-c2d3.dynamodb.us-east-1.vpce.amazonaws.com"
    assert endpoint("dynamodb", endpoint_url=vpce) == vpce
    assert [endpoint(service, endpoint_url=vpce) for service in SERVICES] == [NET] * 3
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert endpoint("dynamodbstreams", endpoint_url=vpce) == "https://streams.dynamodb.us-east-1.amazonaws.com"


def test_endpoint_variables_can_be_turned_off_as_botocore_allows(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", LOCAL)
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert endpoint("dynamodb") == "https://dynamodb.us-east-1.amazonaws.com"
    assert endpoint("dynamodbstreams") == "https://streams.dynamodb.us-east-1.amazonaws.com"
    assert endpoint("dynamodbstreams", endpoint_url=LOCAL) == LOCAL  # an explicit endpoint still counts


def test_beams_s3_file_system_gets_the_local_endpoint_unless_told_otherwise(monkeypatch):
    local = SourceSpec(table="t", endpoint_url=LOCAL, region="us-east-1")
    assert s3_beam_args(["--runner=DirectRunner"], local) == ["--runner=DirectRunner", f"--s3_endpoint_url={LOCAL}"]
    assert s3_beam_args(["--s3_endpoint_url=http://127.0.0.1:1"], local) == ["--s3_endpoint_url=http://127.0.0.1:1"]
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert s3_beam_args([], SourceSpec(table="t", region="us-east-1")) == []  # AWS's S3: nothing to add
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:8444")
    assert s3_beam_args([], local) == []  # botocore reads the variable itself


def test_a_dynamodb_without_streams_is_named_instead_of_asking_to_enable_one(dynalite):
    """dynalite has no Streams API: the tail says so (and never tries AWS)."""
    streams = make_streams_client(ClientSettings(region="us-east-1", endpoint_url=dynalite.endpoint))
    assert streams.meta.endpoint_url == dynalite.endpoint
    with pytest.raises(UsageError, match=r"does not serve DynamoDB Streams \(dynalite has none\).*--dynamodb moto"):
        require_streams_api(streams)


def test_a_server_with_streams_passes(moto_server):
    require_streams_api(make_streams_client(ClientSettings(region="us-east-1", endpoint_url=moto_server.endpoint)))


def test_the_known_service_ids_are_botocores_own():
    """aws.SERVICE_IDS spares loading a model to name a variable: each id is the one in botocore's service model."""
    import botocore.session

    models = botocore.session.Session()
    assert {name: models.get_service_model(name).service_id for name in SERVICE_IDS} == SERVICE_IDS
    assert service_variable("kinesis") == "AWS_ENDPOINT_URL_KINESIS"  # any other service: from its model


def test_sessions_share_one_data_loader_and_keep_their_own_profile_and_region(tmp_path, monkeypatch):
    """Every client reads botocore's data through one loader (parsed once per process), while each session still
    reads its own profile (region, unknown profile: botocore's error) as a new boto3 session does."""
    from botocore.exceptions import ProfileNotFound

    config = tmp_path / "config"
    config.write_text("[profile west]\nregion = us-west-2\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):  # the environment's region would win over the profile's
        monkeypatch.delenv(name, raising=False)
    west, east = aws_client("dynamodb", profile="west"), aws_client("dynamodb", region="eu-west-1")
    assert (west.meta.region_name, west.meta.endpoint_url) == ("us-west-2", "https://dynamodb.us-west-2.amazonaws.com")
    assert east.meta.region_name == "eu-west-1"
    loaders = {id(boto3_session(profile).__dict__["_session"].get_component("data_loader")) for profile in ("west", None)}
    assert len(loaders) == 1
    paths = boto3_session().__dict__["_session"].get_component("data_loader").search_paths
    assert len(paths) == len(set(paths))  # boto3 adds its folder per session: kept once
    with pytest.raises(ProfileNotFound, match="could not be found"):
        aws_client("dynamodb", profile="nowhere")


def test_a_streams_answer_whose_crc32_does_not_match_is_refused_not_applied():
    """botocore checks x-amz-crc32 for the dynamodb service alone: a GetRecords page damaged on the way whose JSON
    still parsed was taken for the table's changes. The streams client refuses it; an answer that matches, or
    carries no CRC, is parsed as before (a real HTTP server on loopback, botocore's own parser)."""
    import http.server
    import json
    import threading
    import zlib

    from ddb2bt.pipelines.dynamodb.client import DamagedAnswer
    from ddb2bt.pipelines.local import servers as local_servers

    body = json.dumps({"Records": [{"eventName": "INSERT", "dynamodb": {"Keys": {"pk": {"S": "j0001"}}}}]}).encode()
    crc = {"right": str(zlib.crc32(body)), "damaged": str(zlib.crc32(body.replace(b"j0001", b"i0001"))), "none": None}
    said: list[str | None] = []

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-amz-json-1.0")
            self.send_header("Content-Length", str(len(body)))
            if said[-1] is not None:
                self.send_header("x-amz-crc32", said[-1])
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with local_servers.patched_environ(local_servers.FAKE_AWS_ENV):
            client = make_streams_client(ClientSettings(region="us-east-1", max_attempts=2,
                                                        endpoint_url=f"http://127.0.0.1:{server.server_port}"))
            for case in ("right", "none"):
                said.append(crc[case])
                assert client.get_records(ShardIterator="it")["Records"][0]["dynamodb"]["Keys"] == {"pk": {"S": "j0001"}}
            said.append(crc["damaged"])
            with pytest.raises(DamagedAnswer, match="x-amz-crc32"):
                client.get_records(ShardIterator="it")
    finally:
        server.shutdown()
