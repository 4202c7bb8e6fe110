"""The `ddb2bt` command line: one typer app, thin commands, one error handler.

Commands live in `cli/commands/`; each parses its options, calls one function in mappers/ or
pipelines/, and renders the result. Heavy modules (apache_beam, google.cloud, boto3, even the
pydantic spec models) are imported inside the commands, so `ddb2bt --help` starts instantly.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperCommand

from .commands import demo, infer, init, local, migrate, plan, redrive, report, schema, validate
from .commands import cutover
from .commands import parity
from .commands import rollback
from .errors import ErrorHandlingGroup

app = typer.Typer(
    name="ddb2bt",
    cls=ErrorHandlingGroup,
    help="Migrate DynamoDB tables into Cloud Bigtable with a declarative mapping spec.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_show_locals=False,  # locals may hold credentials
)


def _version(value: bool) -> None:
    if value:
        try:
            typer.echo(f"ddb2bt {version('ddb2bt')}")
        except PackageNotFoundError:
            typer.echo("ddb2bt (not installed)")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks instead of one-line errors.")] = False,
    show_version: Annotated[
        Optional[bool],
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """Migrate DynamoDB tables into Cloud Bigtable with a declarative mapping spec."""
    ctx.obj = {"debug": debug}
    if not debug:
        import warnings

        import logging

        warnings.filterwarnings("ignore", message="Connecting to Bigtable emulator")  # BIGTABLE_EMULATOR_HOST is deliberate
        # The client's metrics layer logs its own bookkeeping errors when a call fails; the call's error is what we show.
        logging.getLogger("google.cloud.bigtable.data._metrics").setLevel(logging.CRITICAL)
        # Beam logs a failed step's traceback at ERROR before it re-raises the error, which is then shown as one line.
        logging.getLogger("apache_beam").setLevel(logging.CRITICAL)
        ctx.call_on_close(sparse_warnings())  # undone when the command ends (tests invoke many in one process)
    if debug:
        import logging

        # Only our own loggers: botocore's debug output carries request signatures.
        logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("ddb2bt").setLevel(logging.DEBUG)
        for handler in logging.getLogger().handlers:
            handler.addFilter(_redact_record)


class _Sparse:
    """A logging filter: one line per kind of warning (logger and message template) every ``seconds``, so a dead
    source retried by ten scan segments reads as a few lines while it lasts, not dozens."""

    def __init__(self, seconds: float = 30.0) -> None:
        self.seconds, self.last = seconds, {}  # type: ignore[var-annotated]

    def filter(self, record: Any) -> bool:
        import time

        now, key = time.monotonic(), (record.name, record.msg)
        if now - self.last.get(key, float("-inf")) < self.seconds:
            return False
        self.last[key] = now
        return True


def sparse_warnings(seconds: float = 30.0) -> Any:
    """Our loggers' warnings as `warning: …` lines on stderr, sparse and with URL credentials masked (not through the
    root logger, whose format another library may have set); returns the function that undoes it."""
    import logging
    import sys

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    handler.addFilter(_Sparse(seconds))
    handler.addFilter(_redact_record)
    logger = logging.getLogger("ddb2bt")
    saved = logger.level, logger.propagate
    logger.setLevel(logging.WARNING)
    logger.addHandler(handler)
    logger.propagate = False

    def undo() -> None:
        logger.removeHandler(handler)
        logger.level, logger.propagate = saved

    return undo


def _redact_record(record: Any) -> bool:
    """A log line's URL credentials masked (a logging filter)."""
    from ..pipelines.run.service_errors import redact

    record.msg, record.args = redact(record.getMessage()), None
    return True


class PassThroughCommand(TyperCommand):
    """A command that hands the options it does not know to Beam (migrate, validate, catch-up).

    Such a command cannot refuse an unknown option while parsing, so a misspelt one lands in the SPEC argument's
    place (`ddb2bt migrate --hepl` would read a spec file named `--hepl`). A word in an argument's place that starts
    with `-` is refused here instead, as typer refuses unknown options elsewhere: one line, with the close spellings.
    """

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        from ..app.options import UnknownOptionError
        from ..mappers.errors import UsageError
        from ..mappers.spelling import did_you_mean

        given = list(args)  # the parser consumes args
        try:
            rest = super().parse_args(ctx, args)
        except typer.TyperException:  # e.g. a required option missing: a misspelt one is the likelier story
            for word, guess in self._misspelt(given):
                raise UnknownOptionError(word, guess, ctx.command_path) from None
            raise
        for param in self.params:
            value = ctx.params.get(param.name or "") if param.param_type_name == "argument" else None
            if value is not None and str(value).startswith("-") and str(value) != "-":
                flag = str(value).split("=", 1)[0]
                guess = did_you_mean(flag, self._flags())
                if guess:
                    raise UnknownOptionError(flag, guess, ctx.command_path)
                raise UsageError(f"{value} stands where {param.name.upper() if param.name else 'an argument'} "
                                 "should: options passed on to Beam go after the arguments",
                                 f"`{ctx.command_path} SPEC [OPTIONS] {value}`; see `{ctx.command_path} --help`")
        return rest

    def _flags(self) -> list[str]:
        return [flag for option in self.params for flag in option.opts if flag.startswith("-")] + ["--help"]

    def _misspelt(self, args: list[str]) -> list[tuple[str, str]]:
        """(option, did-you-mean) for the options in ``args`` that neither this command nor Beam knows and that are
        close to one of this command's."""
        from ..app.options import beam_knows
        from ..mappers.spelling import did_you_mean

        flags = self._flags()
        words = [word.split("=", 1)[0] for word in args if word.startswith("--")]
        guesses = [(word, did_you_mean(word, flags)) for word in words if word not in flags]
        return [(word, guess) for word, guess in guesses if guess and not beam_knows(word)]

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        """An option neither ddb2bt nor Beam knows, named with this command's close spelling when it has one and the
        command's own --help."""
        from ..app.options import UnknownOptionError
        from ..mappers.spelling import did_you_mean

        try:
            return super().invoke(ctx)
        except UnknownOptionError as error:
            raise UnknownOptionError(error.flag, did_you_mean(error.flag, self._flags()), ctx.command_path) from None


PASS_THROUGH: dict[str, Any] = {"cls": PassThroughCommand,
                                "context_settings": {"allow_extra_args": True, "ignore_unknown_options": True}}

app.command("init")(init.command)
app.command("infer")(infer.command)
app.command("migrate-plan")(plan.migrate_plan)
app.command("report")(report.command)
app.command("migrate", **PASS_THROUGH)(migrate.command)
app.command("validate", **PASS_THROUGH)(validate.command)
app.command("redrive")(redrive.command)
app.command("schema")(schema.command)
app.command("demo")(demo.command)
app.command("catch-up", **PASS_THROUGH)(cutover.catch_up)
app.command("tail")(cutover.tail)
app.command("cutover-status")(cutover.cutover_status)
app.command("parity")(parity.command)
app.command("rollback")(rollback.command)
app.add_typer(local.app, name="local")


def run() -> None:
    """Console-script entry point (`ddb2bt`)."""
    app()
