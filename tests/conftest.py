"""Shared fixtures: real local servers (one per session) and an environment that cannot reach the cloud."""

import uuid

import pytest

from ddb2bt.pipelines.local import servers as local_servers

SERVER_FIXTURES = {"bigtable_emulator", "bigtable_env", "moto_server", "dynalite"}


def pytest_configure(config):
    # google-cloud-bigtable warns on every client made against the emulator; here that is the point.
    config.addinivalue_line("filterwarnings", "ignore:Connecting to Bigtable emulator:RuntimeWarning")


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m filtering reads the markers
def pytest_collection_modifyitems(items):
    """Tests that use a server fixture get the `servers` marker even if they forgot it,
    so `-m "not servers"` never starts a server."""
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.servers)


NET = "http://127.0.0.1:9"
"""A closed port: an AWS client that escaped the project's endpoint rule fails here at once instead of reaching AWS."""


@pytest.fixture(autouse=True)
def fake_aws_env(monkeypatch):
    """Fake AWS credentials and no profile for every test, so nothing ever signs for a real account; and the net:
    every AWS client without an endpoint of its own goes to a closed local port (AWS_ENDPOINT_URL)."""
    for key, value in local_servers.FAKE_AWS_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", NET)
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_ENDPOINT_URL_DYNAMODB",
                "AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_STS"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def unique_name():
    """A table name no other test uses, so tests can share one server per session."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def bigtable_emulator():
    with local_servers.bigtable_emulator() as server:
        yield server


@pytest.fixture(scope="session")
def moto_server():
    with local_servers.moto_server() as server:
        yield server


@pytest.fixture(scope="session")
def dynalite():
    with local_servers.dynalite() as server:
        yield server


@pytest.fixture
def bigtable_env(bigtable_emulator, monkeypatch):
    """Point google-cloud-bigtable clients created in this test at the emulator."""
    for key, value in local_servers.emulator_env(bigtable_emulator.endpoint).items():
        monkeypatch.setenv(key, value)
    return bigtable_emulator
