"""The rollback writer's raw BatchWriteItem bodies (`pipelines/dynamodb/sink.py` `send_requests_raw`, `request_body`)
against what botocore's own serialiser sends for the same call: the same JSON value for every DynamoDB type,
written by orjson (compact, non-ASCII as UTF-8), and where orjson refuses the text, botocore's bytes exactly."""

from __future__ import annotations

import binascii
import json
from typing import Any

import botocore.session
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddb2bt.pipelines.dynamodb.sink import request_body, send_requests_raw

from .roundtrip_cases import ANY, KEY_TEXT


def _client(raw: bool) -> Any:
    client = botocore.session.get_session().create_client(
        "dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="testing", aws_secret_access_key="testing")
    if raw:
        send_requests_raw(client)
    return client


CLIENTS = {raw: _client(raw) for raw in (False, True)}


def sent_body(raw: bool, items: list[dict], **more: Any) -> bytes:
    """The body ``batch_write_item`` would send (captured before it leaves: the endpoint is closed)."""
    client, captured = CLIENTS[raw], []

    def grab(request: Any, **_: Any) -> None:
        captured.append(request.body)
        raise RuntimeError("captured")

    client.meta.events.register("before-send.dynamodb.BatchWriteItem", grab, unique_id="test-grab")
    try:
        with pytest.raises(RuntimeError, match="captured"):
            client.batch_write_item(RequestItems={"T": [{"PutRequest": {"Item": item}} for item in items]}, **more)
    finally:
        client.meta.events.unregister("before-send.dynamodb.BatchWriteItem", unique_id="test-grab")
    return captured[0]


def compact(body: bytes) -> bytes:
    """botocore's body (``json.dumps``: spaces after separators, non-ASCII escaped) in orjson's form."""
    return json.dumps(json.loads(body), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


ITEMS = st.lists(st.dictionaries(KEY_TEXT, ANY, min_size=1, max_size=4), min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(ITEMS)
def test_raw_bodies_are_botocores_json_for_every_type(items):
    """Generated items of every type (B and BS as bytes, 38-digit and exponent numbers as text, nested maps and lists,
    empty strings and maps, non-ASCII): the raw body is botocore's own, only written compactly with UTF-8 text."""
    ours, botocores = sent_body(True, items), sent_body(False, items)
    assert json.loads(ours) == json.loads(botocores)
    assert ours == compact(botocores)


def test_raw_bodies_keep_the_calls_other_parameters_and_every_special_character():
    item = {"pk": {"S": 'é\u2028"\\\U0001f600\x00\x1f\x7f'}, "Big": {"N": "9" * 38}, "Tiny": {"N": "-1E-130"},
            "Img": {"B": b"\x01\x00\xff"}, "Raw": {"BS": [b"", b"\xfe"]}, "Doc": {"M": {"e": {"M": {}}, "l": {"L": []}}}}
    ours = sent_body(True, [item], ReturnConsumedCapacity="TOTAL", ReturnItemCollectionMetrics="SIZE")
    botocores = sent_body(False, [item], ReturnConsumedCapacity="TOTAL", ReturnItemCollectionMetrics="SIZE")
    assert ours == compact(botocores)
    sent = json.loads(ours)
    assert sent["ReturnConsumedCapacity"] == "TOTAL" and sent["ReturnItemCollectionMetrics"] == "SIZE"
    assert sent["RequestItems"]["T"][0]["PutRequest"]["Item"]["Img"] == {"B": "AQD/"}
    assert sent["RequestItems"]["T"][0]["PutRequest"]["Item"]["Big"] == {"N": "9" * 38}  # text, never a number


def test_what_orjson_refuses_is_sent_as_botocore_sends_it():
    """A lone surrogate is not UTF-8, so orjson refuses it; botocore's json.dumps escapes it (DynamoDB then answers
    for it): the raw body falls back to exactly botocore's bytes."""
    item = {"pk": {"S": "a\ud800b"}, "Img": {"B": b"\x01"}, "Tags": {"SS": ["é"]}}
    assert sent_body(True, [item]) == sent_body(False, [item])


def test_sets_tuples_and_byte_likes_become_wire_json():
    body = json.loads(request_body({"RequestItems": {"T": [{"PutRequest": {"Item": {
        "a": {"BS": (bytearray(b"\x01"), memoryview(b"\x02"))}, "b": {"SS": frozenset({"x"})}}}}]}}))
    assert body["RequestItems"]["T"][0]["PutRequest"]["Item"] == {"a": {"BS": ["AQ==", "Ag=="]}, "b": {"SS": ["x"]}}
    with pytest.raises(TypeError):
        request_body({"x": object()})


# --------------------------------------------------------------------------- the endpoint path after the first call


class _Scripted:
    """A loopback HTTP server answering each POST with the next scripted (status, JSON) answer, keeping the requests."""

    def __init__(self, answers: list[tuple], tls: tuple[str, str] | None = None) -> None:
        import http.server
        import threading

        self.answers, self.requests = list(answers), []
        scripted = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as DynamoDB answers

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                scripted.requests.append((self.path, dict(self.headers), body))
                status, answer, *more = scripted.answers.pop(0) if scripted.answers else (200, {"UnprocessedItems": {}})
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.0")
                for name, value in (more[0] if more else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:  # (certificate file, key file): answered over TLS
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.endpoint = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted():
    made: list[_Scripted] = []

    def make(answers: list[tuple] = (), tls: tuple[str, str] | None = None) -> _Scripted:
        made.append(_Scripted(list(answers), tls))
        return made[-1]

    yield make
    for server in made:
        server.close()


def _loopback_client(endpoint: str, raw: bool, attempts: int = 3, token: str | None = None) -> Any:
    from botocore.config import Config

    client = botocore.session.get_session().create_client(
        "dynamodb", region_name="us-east-1", endpoint_url=endpoint, aws_access_key_id="testing",
        aws_secret_access_key="testing", aws_session_token=token,
        config=Config(retries={"mode": "standard", "total_max_attempts": attempts}))
    if raw:
        send_requests_raw(client)
    return client


VOLATILE = {"authorization", "x-amz-date", "amz-sdk-invocation-id", "amz-sdk-request", "content-length"}
"""What differs between two sends of one request: the signature and its time, the invocation id, the attempt, and
the length (the raw body is compact)."""


def test_later_calls_send_the_request_botocore_sends_signed_anew(scripted):
    """The first call goes through the whole client; later ones through its endpoint with what the first prepared.
    Each later request has the general path's URL and headers (botocore's own client, same call) and a valid
    signature of its own body, made anew."""
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from ddb2bt.pipelines.dynamodb.sink import batch_writer

    items = [{"pk": {"S": f"é{i}"}, "Img": {"B": bytes([i])}, "N": {"N": "9" * 38}} for i in range(3)]
    server = scripted()
    general, raw = _loopback_client(server.endpoint, False), _loopback_client(server.endpoint, True)
    send = batch_writer(raw)
    assert send.prepared is None
    through_client: list[str] = []
    raw.meta.events.register("before-parameter-build.dynamodb.BatchWriteItem",
                             lambda **_: through_client.append("call"))
    for number in range(3):
        requests = {"T": [{"PutRequest": {"Item": item}} for item in items[number:]]}
        general.batch_write_item(RequestItems=requests)
        assert send(RequestItems=requests) == {"UnprocessedItems": {}, "ResponseMetadata": ANY_METADATA}
        assert send.prepared is not None  # kept from the first call, which was really sent
        (path, ours, body), (path_g, theirs, body_g) = server.requests[-1], server.requests[-2]
        assert path == path_g == "/"
        assert {k.lower(): v for k, v in ours.items() if k.lower() not in VOLATILE} == \
            {k.lower(): v for k, v in theirs.items() if k.lower() not in VOLATILE}
        assert body == compact(body_g) and json.loads(body) == json.loads(body_g)
        # the signature is of this request's own body: signed again here, it comes out the same
        signed = ours["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
        check = AWSRequest("POST", server.endpoint + "/", data=body,
                           headers={k: v for k, v in ours.items() if k.lower() in signed and k.lower() != "host"})
        assert botocores_authorization(check, ours["X-Amz-Date"], Credentials("testing", "testing")) == \
            ours["Authorization"]
    assert through_client == ["call"]  # the later calls skipped the client's layer
    invocations = [headers["amz-sdk-invocation-id"] for _, headers, _ in server.requests]
    assert len(set(invocations)) == len(invocations)  # a fresh context per call


def botocores_authorization(request: Any, stamp: str, credentials: Any) -> str:
    """botocore's own SigV4 Authorization of ``request`` at the time ``stamp`` (X-Amz-Date): its signer reads the
    clock itself, so the clock is set to the stamp the writer signed with."""
    from datetime import datetime
    from unittest import mock

    from botocore.auth import SigV4Auth

    with mock.patch("botocore.auth.get_current_datetime", return_value=datetime.strptime(stamp, "%Y%m%dT%H%M%SZ")):
        SigV4Auth(credentials, "dynamodb", "us-east-1").add_auth(request)
    assert request.headers["X-Amz-Date"] == stamp
    return request.headers["Authorization"]


class _Anything(dict):
    def __eq__(self, other: object) -> bool:
        return isinstance(other, dict)


ANY_METADATA = _Anything()


def test_later_calls_are_retried_and_refused_as_botocore_answers(scripted):
    """Answers as DynamoDB gives them, parsed by botocore: throttling retried by botocore's retry mode and then by the
    writer, UnprocessedItems sent again, a ValidationException turned into single PutItems, another error raised as
    the client's own ClientError class."""
    from botocore.exceptions import ClientError

    from ddb2bt.pipelines.dynamodb.sink import DynamoWriter, WriteBudget

    items = [{"pk": {"S": f"p{i}"}, "sk": {"S": "s"}} for i in range(3)]
    throttled = (400, {"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                       "message": "The level of configured provisioned throughput for the table was exceeded."})
    invalid = (400, {"__type": "com.amazon.coral.validate#ValidationException", "message": "Item size has exceeded"})
    unprocessed = (200, {"UnprocessedItems": {"T": [{"PutRequest": {"Item": items[2]}}]}})
    server = scripted([(200, {"UnprocessedItems": {}}),  # the first call, through the client
                       throttled, throttled, unprocessed, (200, {"UnprocessedItems": {}}),
                       invalid, (200, {}), invalid,
                       (400, {"__type": "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException",
                              "message": "Requested resource not found"})])
    client = _loopback_client(server.endpoint, True, attempts=2)
    writer = DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None))
    assert writer.write(items) == []
    assert batch_writer_of(client).prepared is not None
    assert writer.write(items) == []  # throttled twice (botocore's 2 attempts, then ours), then one left unprocessed
    assert writer.retries == 2
    sent = [json.loads(body)["RequestItems"]["T"] for _, _, body in server.requests[1:5]]
    assert [len(requests) for requests in sent] == [3, 3, 3, 1]
    assert sent[3] == [{"PutRequest": {"Item": items[2]}}]
    refused = writer.write(items[:2])  # a ValidationException: each item put alone (PutItem), the second refused
    assert refused == [(items[1], "DynamoDB refused the item: Item size has exceeded")]
    assert [h["X-Amz-Target"] for _, h, _ in server.requests[5:8]] == [
        "DynamoDB_20120810.BatchWriteItem", "DynamoDB_20120810.PutItem", "DynamoDB_20120810.PutItem"]
    with pytest.raises(ClientError) as raised:
        writer.write(items[:1])
    assert raised.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert isinstance(raised.value, client.exceptions.ResourceNotFoundException)


def batch_writer_of(client: Any) -> Any:
    from ddb2bt.pipelines.dynamodb.sink import batch_writer

    return batch_writer(client)


def test_a_stubbed_client_is_never_bypassed():
    """botocore's Stubber answers in before-call, so nothing is sent and nothing kept: every call stays the
    client's (and the Stubber's)."""
    from botocore.stub import Stubber

    from ddb2bt.pipelines.dynamodb.sink import DynamoWriter, WriteBudget

    client = _loopback_client("http://127.0.0.1:9", True)
    items = [{"pk": {"S": "p"}, "sk": {"S": "s"}}]
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_response("batch_write_item", {"UnprocessedItems": {}})
        writer = DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None))
        for _ in range(3):
            assert writer.write(items) == []
        stub.assert_no_pending_responses()
    assert batch_writer_of(client).prepared is None


def _through_endpoint(client: Any) -> list[str]:
    """Records each request that goes botocore's whole way (its endpoint's ``make_request``)."""
    calls: list[str] = []
    make_request = client._endpoint.make_request

    def counted(model: Any, request: dict) -> Any:
        calls.append(model.name)
        return make_request(model, request)

    client._endpoint.make_request = counted
    return calls


@pytest.mark.parametrize("token", [None, "a-session-token"])
def test_later_calls_are_signed_here_as_botocore_signs_them(scripted, token):
    """After the first call (botocore's whole way), each BatchWriteItem is signed here and sent by the endpoint's HTTP
    session, not through ``make_request``: botocore's own SigV4 signer, given the same request, time and credentials
    (a session token included), makes the same Authorization; every other header is the first request's."""
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from ddb2bt.pipelines.dynamodb.sink import batch_writer

    server = scripted()
    client = _loopback_client(server.endpoint, True, token=token)
    send, endpoint_calls = batch_writer(client), _through_endpoint(client)
    requests = {"T": [{"PutRequest": {"Item": {"pk": {"S": "p"}, "b": {"B": b"\x00\xff"}}}}]}
    for _ in range(3):
        assert send(RequestItems=requests)["UnprocessedItems"] == {}
    assert send.sent is not None and send.direct
    assert len(endpoint_calls) == 1  # the first call only
    (_, first, _), *later = server.requests
    for _, headers, body in later:
        assert json.loads(body) == {"RequestItems": {"T": [{"PutRequest": {"Item": {"pk": {"S": "p"}, "b": {"B": "AP8="}}}}]}}
        assert {k.lower(): v for k, v in headers.items() if k.lower() not in VOLATILE} == \
            {k.lower(): v for k, v in first.items() if k.lower() not in VOLATILE}
        assert headers.get("X-Amz-Security-Token") == token
        signed = headers["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
        assert signed == first["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
        check = AWSRequest("POST", server.endpoint + "/", data=body,
                           headers={k: v for k, v in headers.items() if k.lower() in signed and k.lower() != "host"
                                    and k.lower() != "x-amz-security-token"})
        assert botocores_authorization(check, headers["X-Amz-Date"], Credentials("testing", "testing", token)) == \
            headers["Authorization"]
    assert len({headers["amz-sdk-invocation-id"] for _, headers, _ in server.requests}) == 3


def test_a_damaged_or_unknown_answer_sends_the_request_botocores_whole_way(scripted):
    """An answer whose CRC32 is not its body's, or an error DynamoDB's writer does not expect, is not taken from the
    direct way: the same request goes through botocore's endpoint (whose answer counts), and so does every later one."""
    from ddb2bt.pipelines.dynamodb.sink import DynamoWriter, WriteBudget, batch_writer

    items = [{"pk": {"S": "p"}, "sk": {"S": "s"}}]
    body = json.dumps({"UnprocessedItems": {}}).encode()
    crc = str(binascii.crc32(body) & 0xFFFFFFFF)
    for damaged in [(200, {"UnprocessedItems": {}}, {"x-amz-crc32": str(int(crc) ^ 1)}),
                    (400, {"__type": "com.amazon.coral.service#UnrecognizedClientException", "message": "?"})]:
        server = scripted([(200, {"UnprocessedItems": {}}, {"x-amz-crc32": crc}), damaged])
        client = _loopback_client(server.endpoint, True)
        writer, endpoint_calls = DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None)), _through_endpoint(client)
        assert writer.write(items) == [] and writer.write(items) == [] and writer.write(items) == []
        assert len(server.requests) == 4  # the first call, the damaged answer's request, then botocore's way twice
        assert [json.loads(body) for _, _, body in server.requests[1:3]] == [
            {"RequestItems": {"T": [{"PutRequest": {"Item": items[0]}}]}}] * 2
        assert endpoint_calls == ["BatchWriteItem"] * 3 and not batch_writer(client).direct


def test_throttling_on_the_direct_way_is_raised_once_and_pauses_it(scripted):
    """A throttled direct request is raised to the writer (its backoff sends it again), and for DIRECT_PAUSE_S every
    request goes through botocore's endpoint (its retry mode's attempts, the adaptive mode's rate limiter)."""
    from ddb2bt.pipelines.dynamodb.sink import DynamoWriter, WriteBudget, batch_writer

    items = [{"pk": {"S": "p"}, "sk": {"S": "s"}}]
    throttled = (400, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "slow down"})
    server = scripted([(200, {"UnprocessedItems": {}}), throttled, throttled])
    client = _loopback_client(server.endpoint, True, attempts=2)
    writer, endpoint_calls = DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None)), _through_endpoint(client)
    assert writer.write(items) == []
    assert writer.write(items) == []  # direct: throttled; botocore's way: throttled, then answered
    assert writer.retries == 1 and len(server.requests) == 4
    assert endpoint_calls == ["BatchWriteItem", "BatchWriteItem"] and not batch_writer(client).direct
    assert writer.write(items) == [] and endpoint_calls[-1] == "BatchWriteItem" and len(endpoint_calls) == 3


def test_the_direct_way_is_tried_again_once_a_throttle_has_passed(scripted, monkeypatch):
    """Throttling pauses the direct way (botocore's retry mode and rate limiter meanwhile) for DIRECT_PAUSE_S, not for
    the rest of the run: after it, requests go directly again. A damaged answer still ends it for good."""
    from ddb2bt.pipelines.dynamodb import sink
    from ddb2bt.pipelines.dynamodb.sink import DynamoWriter, WriteBudget, batch_writer

    monkeypatch.setattr(sink, "DIRECT_PAUSE_S", 0.0)
    items = [{"pk": {"S": "p"}, "sk": {"S": "s"}}]
    throttled = (400, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "slow down"})
    server = scripted([(200, {"UnprocessedItems": {}}), throttled, (200, {"UnprocessedItems": {}}),
                       (200, {"UnprocessedItems": {}}, {"x-amz-crc32": "1"})])
    client = _loopback_client(server.endpoint, True, attempts=2)
    writer, endpoint_calls = DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None)), _through_endpoint(client)
    assert writer.write(items) == []  # botocore's whole way, the first
    assert writer.write(items) == []  # direct: throttled; the pause over, the writer's retry goes direct again
    send = batch_writer(client)
    assert writer.retries == 1 and len(server.requests) == 3 and endpoint_calls == ["BatchWriteItem"]
    assert send.direct and send.direct_again_at is None
    assert writer.write(items) == []  # a damaged answer (its CRC32 is not its body's): botocore's way, for good
    assert endpoint_calls == ["BatchWriteItem"] * 2 and not send.direct and send.direct_again_at is None
    assert writer.write(items) == [] and endpoint_calls == ["BatchWriteItem"] * 3


def _client_with(endpoint: str, **config: Any) -> Any:
    from botocore.config import Config

    return botocore.session.get_session().create_client(
        "dynamodb", region_name="us-east-1", endpoint_url=endpoint, aws_access_key_id="testing",
        aws_secret_access_key="testing", **({"config": Config(**config)} if config else {}))


def test_own_connections_only_where_the_session_would_connect_directly_and_verify(tmp_path):
    """The direct way keeps its own connections for an endpoint the client's HTTP session reaches without a proxy or
    a client certificate, and over TLS only verified (hostname and chain, against the session's CA bundle, with its
    timeouts); otherwise it sends through the session itself."""
    import ssl

    from botocore.httpsession import get_cert_path

    from ddb2bt.pipelines.dynamodb.sink import _Connections

    plain = _Connections.of(_client_with("http://127.0.0.1:9", connect_timeout=3, read_timeout=7),
                            "http://127.0.0.1:9/")
    assert plain is not None and plain.context is None and (plain.connect_timeout, plain.read_timeout) == (3, 7)
    secure = _Connections.of(_client_with("https://dynamodb.us-east-1.amazonaws.com"),
                             "https://dynamodb.us-east-1.amazonaws.com/")
    assert secure is not None and secure.context.verify_mode == ssl.CERT_REQUIRED and secure.context.check_hostname
    assert secure.context.cert_store_stats()["x509_ca"] > 0 and get_cert_path(True)
    unverified = botocore.session.get_session().create_client(
        "dynamodb", region_name="us-east-1", endpoint_url="https://localhost:8443", verify=False,
        aws_access_key_id="testing", aws_secret_access_key="testing")
    assert _Connections.of(unverified, "https://localhost:8443/") is None
    proxied = _client_with("http://10.1.2.3:8000", proxies={"http": "http://127.0.0.1:9"})
    assert _Connections.of(proxied, "http://10.1.2.3:8000/") is None
    (tmp_path / "cert.pem").write_text("")
    certified = _client_with("https://localhost:8443", client_cert=str(tmp_path / "cert.pem"))
    assert _Connections.of(certified, "https://localhost:8443/") is None


def _written_once(scripted: Any, items: list[dict]) -> tuple[Any, Any, Any, list[str], Any]:
    """A writer to a scripted server that has written ``items`` once (botocore's way, its request kept): the server,
    the client, the writer, the calls through botocore's endpoint, and the client's direct way."""
    from ddb2bt.pipelines.dynamodb.sink import DynamoWriter, WriteBudget, batch_writer

    server = scripted()
    client = _loopback_client(server.endpoint, True)
    writer, endpoint_calls = DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None)), _through_endpoint(client)
    assert writer.write(items) == []
    return server, client, writer, endpoint_calls, batch_writer(client)


def test_a_cut_connection_sends_that_request_botocores_whole_way_and_the_next_one_directly(scripted):
    """A connection closed under a request (the server answers nothing) is dropped; that request goes through
    botocore's endpoint (its retries), and the next one directly again, on a new connection."""
    items = [{"pk": {"S": "p"}, "sk": {"S": "s"}}]
    server, client, writer, endpoint_calls, send = _written_once(scripted, items)
    assert send.connections is not None
    assert writer.write(items) == []
    send.connections._local.connection.sock.close()  # cut under the direct way
    assert writer.write(items) == []  # sent again by botocore
    assert writer.write(items) == []  # directly again
    assert endpoint_calls == ["BatchWriteItem", "BatchWriteItem"] and send.direct
    assert len(server.requests) == 4 and writer.retries == 0


def _self_signed(folder: Any) -> tuple[str, str]:
    """A certificate for 127.0.0.1 (its own CA) and its key, as files in ``folder``."""
    import datetime
    import ipaddress

    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(hours=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    cert, key_file = folder / "cert.pem", folder / "key.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert), str(key_file)


def test_own_connections_over_tls_verify_as_the_session_does(scripted, tmp_path):
    """Over TLS the writer's own connections trust what the client's session trusts (``verify``: a CA bundle):
    later calls go directly, verified; a server they do not trust is refused, and the request goes botocore's way."""
    import ssl

    from ddb2bt.pipelines.dynamodb.sink import DynamoWriter, WriteBudget, batch_writer

    cert, key = _self_signed(tmp_path)
    server = scripted(tls=(cert, key))
    items = [{"pk": {"S": "p"}, "sk": {"S": "s"}}]

    def client_trusting(bundle: str) -> Any:
        client = botocore.session.get_session().create_client(
            "dynamodb", region_name="us-east-1", endpoint_url=server.endpoint, verify=bundle,
            aws_access_key_id="testing", aws_secret_access_key="testing")
        send_requests_raw(client)
        return client

    client = client_trusting(cert)
    writer, endpoint_calls = DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None)), _through_endpoint(client)
    for _ in range(3):
        assert writer.write(items) == []
    send = batch_writer(client)
    assert send.connections is not None and send.connections.context is not None and send.direct
    assert endpoint_calls == ["BatchWriteItem"] and len(server.requests) == 3
    # the server's certificate is no longer what the direct way trusts: it refuses the server (nothing is sent
    # unverified), and that request goes botocore's whole way, which still trusts it
    (tmp_path / "other").mkdir()
    other_cert, _ = _self_signed(tmp_path / "other")
    send.connections.context = ssl.create_default_context(cafile=other_cert)
    send.connections._drop(send.connections._local.connection)
    assert writer.write(items) == []
    assert endpoint_calls == ["BatchWriteItem"] * 2 and len(server.requests) == 4


def test_a_client_answered_by_an_in_process_mock_never_takes_the_direct_way(monkeypatch):
    """moto's in-process mock answers in ``before-send``, where botocore would have sent: the request botocore was
    about to send is never kept, so no later BatchWriteItem goes to the network (here: the real AWS endpoint the
    client names) instead of the mock."""
    from moto import mock_aws

    from ddb2bt.pipelines.dynamodb.client import create_table
    from ddb2bt.pipelines.dynamodb.sink import DynamoWriter, WriteBudget, batch_writer

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        client = botocore.session.get_session().create_client(
            "dynamodb", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
        send_requests_raw(client)
        create_table(client, "T", "pk", "sk")
        writer = DynamoWriter(client, "T", ("pk", "sk"), WriteBudget(None))
        for number in range(3):
            assert writer.write([{"pk": {"S": f"p{number}"}, "sk": {"S": "s"}}]) == []
        send = batch_writer(client)
        assert send.sent is None and not send.direct and send.connections is None
        assert client.scan(TableName="T")["Count"] == 3  # every write reached the mock


@pytest.mark.parametrize("url, host, port", [("http://[::1]:8000/", "::1", 8000),
                                             ("https://[2600:1f18::1]/", "2600:1f18::1", 443),
                                             ("http://localhost/", "localhost", 80)])
def test_own_connections_take_the_urls_port_or_the_schemes(url, host, port):
    """http.client reads a bare IPv6 literal's last group as a port: the connections always give one."""
    from ddb2bt.pipelines.dynamodb.sink import _Connections

    connections = _Connections(url, None, 1, 1, [])
    assert (connections.host, connections.port) == (host, port)


def test_signatures_follow_rotated_credentials_and_the_day(scripted, monkeypatch):
    """The signing key is cached per secret and day: new credentials (botocore refreshes temporary ones) and a new
    UTC day each sign as botocore's own signer does."""
    import time as clock

    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from ddb2bt.pipelines.dynamodb.sink import batch_writer

    server = scripted()
    client = _loopback_client(server.endpoint, True)
    send = batch_writer(client)
    requests = {"T": [{"PutRequest": {"Item": {"pk": {"S": "p"}}}}]}
    send(RequestItems=requests)  # botocore's whole way; then the direct one
    credentials = client._request_signer._credentials
    real_gmtime = clock.gmtime
    for secret, day_shift in [("testing", 0), ("rotated", 0), ("rotated", 86_400), ("testing", 86_400)]:
        credentials.secret_key = secret
        monkeypatch.setattr(clock, "gmtime", lambda *_: real_gmtime(clock.time() + day_shift))
        send(RequestItems=requests)
        monkeypatch.setattr(clock, "gmtime", real_gmtime)
        _, headers, body = server.requests[-1]
        signed = headers["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
        check = AWSRequest("POST", server.endpoint + "/", data=body,
                           headers={k: v for k, v in headers.items() if k.lower() in signed and k.lower() != "host"})
        assert botocores_authorization(check, headers["X-Amz-Date"], Credentials("testing", secret)) == \
            headers["Authorization"]
    assert send.direct and len(server.requests) == 5
    days = {headers["X-Amz-Date"][:8] for _, headers, _ in server.requests[1:]}
    assert len(days) == 2


def test_a_failed_connection_through_the_http_session_sends_that_request_botocores_way_only(scripted, monkeypatch):
    """Where the direct way sends through the client's HTTP session (a proxy, a client certificate), a connection
    that fails sends that request botocore's whole way, as on our own connections; the next one goes directly."""
    from botocore.exceptions import EndpointConnectionError

    items = [{"pk": {"S": "p"}, "sk": {"S": "s"}}]
    server, client, writer, endpoint_calls, send = _written_once(scripted, items)
    send.connections = None  # as with a proxy: through the session
    session = client._endpoint.http_session
    real, failures = session.send, []

    def fail_once(request):
        if not failures:
            failures.append(request)
            raise EndpointConnectionError(endpoint_url=request.url)
        return real(request)

    monkeypatch.setattr(session, "send", fail_once)
    assert writer.write(items) == []  # failed directly, then sent by botocore
    assert writer.write(items) == []  # directly again
    assert len(failures) == 1 and endpoint_calls == ["BatchWriteItem", "BatchWriteItem"] and send.direct
    assert len(server.requests) == 3 and writer.retries == 0
