"""Options shared by several commands, declared once.

The run options come from the one table in :mod:`ddb2bt.app.options`: :func:`run_options` adds
the chosen groups of it to a command as typer options (both `--run-dir` and `--run_dir`
spellings) and hands the command one ``RunOptions`` instead.
"""

from __future__ import annotations

import functools
import inspect
from enum import Enum
from pathlib import Path
from collections.abc import Mapping
from typing import Annotated, Any, Callable, Optional

import typer

from ..app.options import RUN_OPTIONS, Option, RunOptions
from ..mappers.errors import UsageError

SpecArg = Annotated[Path, typer.Argument(help="The mapping spec (YAML or JSON).", show_default=False)]
Sample = Annotated[int, typer.Option("--sample", min=1, help="How many items to read from the source.")]

PANELS = {"run": "Run", "aws": "DynamoDB source (AWS)", "google": "Bigtable target (Google Cloud)",
          "writer": "Bigtable writer"}


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


def check_output(path: Path | None, flag: str, shown: str | None = None) -> None:
    """Before any work, without creating anything: ``path`` can be written; a UsageError naming ``flag`` (and
    ``shown``, the value given, when ``path`` is a file inside it) if not."""
    from ..pipelines.run.dead_letters import check_writable

    if path is None:
        return
    try:
        check_writable(str(path))
    except OSError as err:
        raise UsageError(f"{flag} {shown or path} cannot be written ({err.strerror or err})",
                         f"choose a {flag} path this user can write") from None


def check_run_dir(run_dir: str | None) -> None:
    """A local --run-dir that cannot become a folder (it is a file, or lies under one, or may not be written) is
    refused naming --run-dir before the command starts (as migrate does), not as a bare OSError mid-way."""
    if run_dir:
        check_output(Path(run_dir) / "checkpoint.json", "--run-dir", run_dir)


SPELLINGS: dict[str, str] = {"--" + option.name: option.flags[0] for option in RUN_OPTIONS if "_" in option.name}
"""The underscore spellings of the run options (`--run_dir`, as Beam and the Flex parameters write them), accepted
and read as the dashed flag (:func:`dashed`) but not listed in `--help`: two spellings per row cut the names at 80
columns."""


def dashed(args: list[str]) -> list[str]:
    """``args`` with each underscore spelling of a ddb2bt option (SPELLINGS) as its dashed flag, up to a bare `--`;
    Beam's own options (`--temp_location`) pass unchanged."""
    out = list(args)
    for index, arg in enumerate(out):
        if arg == "--":
            break
        flag, equals, value = arg.partition("=")
        if flag in SPELLINGS:
            out[index] = SPELLINGS[flag] + equals + value
    return out


_METAVARS = {int: "N", str: "TEXT"}


def _bounds(option: Option) -> str:
    if option.maximum is not None:
        return f" [{option.minimum}..{option.maximum:,}]"
    return f" [at least {option.minimum}]" if option.minimum is not None else ""


def _typer_param(option: Option, help: str | None = None) -> inspect.Parameter:
    panel = PANELS[option.group]
    flags = option.flags[:1]  # the underscore spelling is read as this one (see dashed)
    if option.type is bool:
        info = typer.Option(*flags, help=help or option.help, rich_help_panel=panel)
        annotation: Any = Annotated[bool, info]
        default: Any = False
    else:
        # No min/max here: RunOptions checks the range (one line naming the flag) and typer's range column would
        # squeeze the flag names at 80 columns; the bounds are in the help text.
        info = typer.Option(*flags, help=(help or option.help) + _bounds(option), metavar=_METAVARS.get(option.type),
                            rich_help_panel=panel, show_default=False)
        annotation, default = Annotated[Optional[option.type], info], None
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def run_options(*groups: str, refused: Mapping[str, str] | None = None,
                helps: Mapping[str, str] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the run options of ``groups`` as flags; it receives them as ``options: RunOptions``.

    Arguments typer does not know (Beam's, with `migrate`) arrive in ``ctx.args`` and are checked
    by ``RunOptions.from_values``: one that Beam does not know either is a usage error.
    ``refused`` names options of those groups the command has no use for, with why: they are not
    offered (not in ``--help``), and one given anyway is a usage error saying why, never ignored.
    ``helps`` replaces the shared help of options whose meaning the command narrows.
    """
    helps = dict(helps or {})
    refused = dict(refused or {})
    chosen = [option for option in RUN_OPTIONS if option.group in groups and option.name not in refused]
    unused = {flag: (option, refused[option.name]) for option in RUN_OPTIONS if option.name in refused
              for flag in option.flags}

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for name, p in inspect.signature(command, eval_str=True).parameters.items() if name != "options"]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {option.name: kwargs.pop(option.name) for option in chosen}
            ctx = kwargs.get("ctx")
            extra = list(ctx.args) if ctx is not None else []
            for arg in extra:
                if arg.split("=", 1)[0] in unused:
                    option, why = unused[arg.split("=", 1)[0]]
                    name = ctx.command_path if ctx is not None else "this command"
                    raise UsageError(f"{option.flags[0]} is not an option of `{name}`: {why}",
                                     f"drop {option.flags[0]}")
            return command(*args, options=RunOptions.from_values(values, extra), **kwargs)

        params = own + [_typer_param(option, helps.get(option.name)) for option in chosen]
        wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        del wrapper.__wrapped__  # typer must read the new signature, not the command's
        return wrapper

    return decorate
