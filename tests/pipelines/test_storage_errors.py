"""A Google Storage failure is reported as Google Storage (naming --temp_location), never as Bigtable.

The errors are real ones: google-cloud-storage's client (through Beam's GcsIO, as Beam's bucket
lookup for --temp_location does) against a stand-in JSON API on loopback that answers as Cloud
Storage does (404 / 403 JSON error bodies), and against a closed port (retried until the deadline,
then RetryError: the same google.api_core classes a Bigtable failure raises).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ddb2bt.mappers.errors import ServiceError, UsageError
from ddb2bt.pipelines.run.service_errors import as_ddb2bt_error


class StandInStorage:
    """Answers every request with one status and Cloud Storage's JSON error body."""

    def __init__(self, status: int, reason: str) -> None:
        body = json.dumps({"error": {"code": status, "message": reason,
                                     "errors": [{"message": reason, "domain": "global"}]}}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def gcsio_for(endpoint: str):
    from apache_beam.io.gcp.gcsio import GcsIO
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project="p", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": endpoint})
    return GcsIO(storage_client=client)


@pytest.mark.parametrize("status,reason,kind,said", [
    (404, "The specified bucket does not exist.", UsageError, "Google Storage: "),
    (403, "anonymous caller does not have storage.buckets.get access", ServiceError,
     "Google Storage refused the request (Forbidden)"),
])
def test_a_storage_answer_names_google_storage(status, reason, kind, said):
    server = StandInStorage(status, reason)
    try:
        with pytest.raises(Exception) as caught:
            gcsio_for(server.endpoint).client.get_bucket("my-bucket")  # (GcsIO.get_bucket turns a 404 into None)
    finally:
        server.close()
    error = as_ddb2bt_error(caught.value)
    assert type(error) is kind, (type(caught.value), error)
    assert str(error).startswith(said) and reason in str(error)
    assert "--temp_location" in str(error) and "Bigtable" not in str(error)


def test_an_unreachable_storage_is_not_called_bigtable():
    """Retried until the deadline, then google.api_core's RetryError: what a dead Bigtable raises, too."""
    from google.api_core import exceptions as api
    from google.api_core.retry import Retry, if_transient_error

    import requests

    gcs = gcsio_for("http://127.0.0.1:9")
    retry = Retry(predicate=lambda e: if_transient_error(e) or isinstance(e, requests.ConnectionError),
                  initial=0.05, maximum=0.1, timeout=0.5)
    with pytest.raises(api.RetryError) as caught:
        gcs.client.get_bucket("my-bucket", retry=retry)
    error = as_ddb2bt_error(caught.value)
    assert isinstance(error, ServiceError)
    assert str(error).startswith("Google Storage is unreachable or failed (RetryError)")
    assert "--temp_location" in str(error) and "Bigtable" not in str(error)


def test_a_bigtable_error_is_still_bigtable():
    from google.api_core import exceptions as api

    error = as_ddb2bt_error(api.ServiceUnavailable("connection refused"))
    assert str(error).startswith("Bigtable is unreachable or too slow (ServiceUnavailable)")
