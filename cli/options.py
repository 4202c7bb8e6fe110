"""Options shared by several commands, declared once."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

SpecArg = Annotated[Path, typer.Argument(help="The mapping spec (YAML or JSON).", show_default=False)]
Sample = Annotated[int, typer.Option("--sample", min=1, help="How many items to read from the source.")]
EndpointUrl = Annotated[
    Optional[str],
    typer.Option("--endpoint-url", help="DynamoDB endpoint (a local DynamoDB); overrides source.endpoint_url."),
]
Region = Annotated[Optional[str], typer.Option("--region", help="AWS region; overrides source.region and AWS config.")]
Profile = Annotated[Optional[str], typer.Option("--profile", help="AWS profile from the shared config files.")]


class OutputFormat(str, Enum):
    text = "text"
    json = "json"
