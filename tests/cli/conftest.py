"""CLI test helpers: a CliRunner, and the seed tables in an in-process moto."""

import boto3
import pytest
from tests.aws_mock import mock_aws
from typer.testing import CliRunner

from ddb2bt.cli.main import app
from ddb2bt.app.seeds import SEEDED, load_seed_table


@pytest.fixture
def invoke():
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, [str(a) for a in args])

    return run


@pytest.fixture
def seeded_moto():
    """In-process moto with the three seed tables (ProductCatalog, Videos, Invoices) loaded."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        for template in SEEDED:
            load_seed_table(client, template)
        yield client
