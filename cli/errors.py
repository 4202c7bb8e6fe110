"""One place that turns domain errors into a one-line message and an exit code.

Exit codes: 0 done; 1 the command ran and found problems (plan errors, differences, a failed
reconciliation); 2 bad input (usage, spec, files, a target table that disagrees with the spec);
3 a service could not be reached or refused us (credentials, endpoint, AWS/Bigtable errors).
Only class names are matched, so this module imports nothing heavy.
"""

from __future__ import annotations

from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

USAGE, UNAVAILABLE = 2, 3

# (exception class name, exit code, hint appended to the message)
_KNOWN: dict[str, tuple[int, str]] = {
    "SpecError": (USAGE, ""),
    "SpecErrors": (USAGE, ""),
    "ExportError": (USAGE, ""),
    "SchemaMismatchError": (USAGE, ""),
    "TableMissingError": (USAGE, ""),
    "BigtableSetupError": (USAGE, ""),
    "TemplateNotFound": (USAGE, ""),
    "ServerNotInstalled": (USAGE, ""),
    "FileNotFoundError": (USAGE, ""),
    "FileExistsError": (USAGE, ""),
    "IsADirectoryError": (USAGE, ""),
    "PermissionError": (USAGE, ""),
    "NoCredentialsError": (UNAVAILABLE, "; configure AWS credentials (env, `aws configure`, --profile)"),
    "PartialCredentialsError": (UNAVAILABLE, "; check the AWS credentials in your environment or profile"),
    "ProfileNotFound": (USAGE, "; check --profile / AWS_PROFILE"),
    "NoRegionError": (USAGE, "; pass --region or set AWS_REGION / AWS_DEFAULT_REGION"),
    "EndpointConnectionError": (UNAVAILABLE, "; check --endpoint-url and that the server is running"),
    "ConnectTimeoutError": (UNAVAILABLE, "; check --endpoint-url and your network"),
    "ScanFailedError": (UNAVAILABLE, ""),
    "ServerStartError": (UNAVAILABLE, ""),
    "BigtableWriteError": (UNAVAILABLE, ""),
    "DefaultCredentialsError": (UNAVAILABLE, "; run `gcloud auth application-default login` or set BIGTABLE_EMULATOR_HOST"),
    "ServiceUnavailable": (UNAVAILABLE, "; check the Bigtable instance, or BIGTABLE_EMULATOR_HOST for the emulator"),
}


def classify(error: BaseException) -> tuple[int, str] | None:
    """(exit code, one-line message) for a known error, None for a bug (which keeps its traceback)."""
    for cls in type(error).__mro__:
        if cls.__name__ == "ClientError":
            return _client_error(error)
        if cls.__name__ in _KNOWN:
            code, hint = _KNOWN[cls.__name__]
            return code, _one_line(_text(error)) + hint
        if cls.__name__ == "OSError":  # other file errors
            return USAGE, _one_line(_text(error))
    return None


def _text(error: BaseException) -> str:
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return str(error) or type(error).__name__


def _client_error(error: Any) -> tuple[int, str]:
    details = getattr(error, "response", {}).get("Error", {})
    code, message = details.get("Code", "ClientError"), details.get("Message", str(error))
    if code == "ResourceNotFoundException":
        return USAGE, f"DynamoDB: {message}; check the table name, --region and --endpoint-url"
    return UNAVAILABLE, f"DynamoDB {code}: {message}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def report(code: int, message: str) -> NoReturn:
    """Print `message` on stderr, each problem on one line, and exit with `code`."""
    for line in message.splitlines() or [message]:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(code)


class ErrorHandlingGroup(TyperGroup):
    """A typer group whose commands' domain errors become one line on stderr (unless --debug)."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):  # usage errors: typer's own exit 2
            raise
        except Exception as error:  # noqa: BLE001 - classified below; unknown ones re-raise
            if (ctx.obj or {}).get("debug"):
                raise
            found = _classify_spec_errors(error) or classify(error)
            if found is None:
                typer.echo(
                    f"error: unexpected {type(error).__name__}: {_one_line(str(error))} (run with --debug for the traceback)",
                    err=True,
                )
                raise typer.Exit(1) from None
            report(*found)


def _classify_spec_errors(error: BaseException) -> tuple[int, str] | None:
    # SpecErrors carries several problems: one line each, all of them, so the user fixes them in one go.
    errors = getattr(error, "errors", None)
    if type(error).__name__ == "SpecErrors" and isinstance(errors, list):
        return USAGE, "\n".join(_one_line(e.render()) for e in errors)
    return None
