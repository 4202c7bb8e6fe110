"""The one definition of a run's options, read from CLI flags or from `--name=value` arguments alike.

`RUN_OPTIONS` declares every ddb2bt option once. The CLI turns the table into typer options
(:func:`ddb2bt.cli.options.run_options`), the Flex Template launcher and `PipelineOptions`-style
argument lists go through :func:`parse_args`; both end in the same frozen :class:`RunOptions`.

ddb2bt's options and Beam's are kept apart: ddb2bt's never reach Beam (so workers never see
"unparseable args"), an argument that neither ddb2bt nor Beam knows is a usage error before
anything starts, and the AWS region is `--aws-region` so that Beam's `--region` (the Dataflow
region) cannot be misread as the DynamoDB one.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..mappers.errors import UsageError
from ..mappers.limits import DEAD_LETTER_LIMIT_DEFAULT, FRACTION_MIN_ITEMS, SCAN_SEGMENTS_MAX, DeadLetterLimit



@dataclass(frozen=True)
class Option:
    """One ddb2bt option: its name (`run_dir`: flags `--run-dir` and `--run_dir`), type, default and help."""

    name: str
    type: type
    help: str
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    group: str = "run"
    """run (migrate only), aws (the source), google (the target), writer (Bigtable flow control)."""

    @property
    def flags(self) -> tuple[str, ...]:
        dashed = "--" + self.name.replace("_", "-")
        return (dashed, "--" + self.name) if "_" in self.name else (dashed,)


RUN_OPTIONS: tuple[Option, ...] = (
    Option("run_dir", str, "Folder for the run's checkpoint and dead letters (local, gs://, s3://; default "
           "runs/<table>-<UTC time>; a gs:// or s3:// folder on Dataflow)."),
    Option("dead_letter", str, "Dead-letter file (default <run dir>/dead_letters.jsonl). It holds whole items, i.e. "
           "user data."),
    Option("resume", bool, "Continue the run in --run-dir, skipping the scan segments it completed (migrate without "
           "--run-dir: the latest run of this spec under runs/).", False),
    Option("total_segments", int, "Parallel scan segments (overrides the spec).", minimum=1, maximum=SCAN_SEGMENTS_MAX),
    Option("sample", int, "Only N items: migrate the first N (a trial run, no checkpoint); validate N picked at "
           "random across the table.", minimum=1),
    Option("no_wait", bool, "On Dataflow: return once the job is submitted instead of waiting for it.", False),
    Option("max_dead_letters", str, "Stop the run once more items than this were dead-lettered: a count (250) or a "
           f"percentage of the items read (5%; judged from {FRACTION_MIN_ITEMS} items on; a smaller run fails only "
           "when every item is dead-lettered). 100% never stops.", DEAD_LETTER_LIMIT_DEFAULT),
    Option("endpoint_url", str, "DynamoDB endpoint (a local DynamoDB); overrides source.endpoint_url.", group="aws"),
    Option("aws_region", str, "AWS region of the source; overrides source.region, AWS_REGION and AWS_DEFAULT_REGION.",
           group="aws"),
    Option("profile", str, "AWS profile from the shared config files.", group="aws"),
    Option("aws_role_arn", str, "AWS IAM role to assume with this machine's Google identity (the GCE metadata "
           "server's ID token, exchanged at STS and renewed before it expires): how Dataflow workers read "
           "DynamoDB or S3 without AWS keys; overrides source.role_arn.", group="aws"),
    Option("project", str, "Google Cloud project of the Bigtable instance (and, on Dataflow, of the job); overrides "
           "target.project and GOOGLE_CLOUD_PROJECT.", group="google"),
    Option("instance", str, "Bigtable instance id; overrides target.instance.", group="google"),
    Option("app_profile", str, "Bigtable app profile; overrides target.app_profile.", group="google"),
    *(Option(name, int, f"Bigtable writer: {what}.", minimum=1, group="writer") for name, what in (
        ("flush_limit_mutation_count", "mutations per batch sent"),
        ("flush_limit_bytes", "bytes per batch sent"),
        ("flow_control_max_mutation_count", "mutations in flight per writer"),
        ("flow_control_max_bytes", "bytes in flight per writer"),
        ("max_pending_entries", "rows in flight per writer before the bundle waits"),
    )),
)
FLOW_NAMES = tuple(option.name for option in RUN_OPTIONS if option.group == "writer")


@dataclass(frozen=True)
class RunOptions:
    """Everything a migration run is asked to do, besides the spec itself. Built by :func:`parse_args` or the CLI."""

    run_dir: str | None = None
    dead_letter: str | None = None
    resume: bool = False
    total_segments: int | None = None
    sample: int | None = None
    no_wait: bool = False
    max_dead_letters: str = DEAD_LETTER_LIMIT_DEFAULT
    endpoint_url: str | None = None
    aws_region: str | None = None
    profile: str | None = None
    aws_role_arn: str | None = None
    project: str | None = None
    instance: str | None = None
    app_profile: str | None = None
    flush_limit_mutation_count: int | None = None
    flush_limit_bytes: int | None = None
    flow_control_max_mutation_count: int | None = None
    flow_control_max_bytes: int | None = None
    max_pending_entries: int | None = None
    beam_args: tuple[str, ...] = field(default=())
    """Beam's own options (runner, Dataflow settings, ...), checked: each one is a real Beam option."""

    def __post_init__(self) -> None:
        for option in RUN_OPTIONS:
            check_range(option, getattr(self, option.name))
        self.dead_letter_limit()

    def dead_letter_limit(self) -> DeadLetterLimit:
        try:
            return DeadLetterLimit.parse(self.max_dead_letters)
        except ValueError as err:
            raise UsageError(f"--max-dead-letters {err}", "give a count such as 250 or a percentage such as 5%") from None

    @classmethod
    def from_values(cls, values: dict[str, Any], beam_args: list[str] | tuple[str, ...] = ()) -> RunOptions:
        """From option values by name (None = not given) and Beam arguments, which are checked here."""
        return cls(**{k: v for k, v in values.items() if v is not None}, beam_args=tuple(check_beam_args(beam_args)))

    def as_args(self, without: tuple[str, ...] = ()) -> list[str]:
        """Command-line arguments that give these options again (defaults left out, Beam's last), e.g. to resume."""
        args: list[str] = []
        for option in RUN_OPTIONS:
            value = getattr(self, option.name)
            if option.name in without or value is None or value is False or value == option.default:
                continue
            args += [option.flags[0]] if option.type is bool else [option.flags[0], str(value)]
        return args + list(self.beam_args)

    def go_on(self, command: str, spec: object, run_dir: str | None, *extra: str, without: tuple[str, ...] = (),
              resume: bool = False, positional: tuple[str, ...] = ()) -> str:
        """The command that goes on with a run, for a person to paste: ``ddb2bt COMMAND SPEC`` (and ``positional``),
        these options as given (an endpoint, a profile, Beam's: without them the line would reach another endpoint or
        account), ``--resume`` when the command resumes, ``--run-dir RUN_DIR`` (None: none, a new folder), then
        ``extra`` (the command's own arguments). Every command that stops resumable (migrate, validate, catch-up,
        tail, rollback) or is run again (redrive) says its line with this; shell-quoted."""
        import shlex

        args = self.as_args(without=("run_dir", "resume", *without))
        folder = ["--run-dir", run_dir] if run_dir is not None else []
        return shlex.join(["ddb2bt", command, str(spec), *positional, *args, *(["--resume"] if resume else []),
                           *folder, *extra])

    def flow_control(self) -> Any:
        """The writer's FlowControl: the defaults, with what was given on the command line."""
        from ..pipelines.bigtable.sink import FlowControl

        given = {name: getattr(self, name) for name in FLOW_NAMES if getattr(self, name) is not None}
        return replace(FlowControl(), **given)


assert {f.name for f in fields(RunOptions)} == {o.name for o in RUN_OPTIONS} | {"beam_args"}, "one definition"


def check_range(option: Option, value: Any) -> None:
    if value is None or option.type is not int:
        return
    if option.minimum is not None and value < option.minimum or option.maximum is not None and value > option.maximum:
        bounds = f"{option.minimum}..{option.maximum}" if option.maximum is not None else f">= {option.minimum}"
        raise UsageError(f"{option.flags[0]} {value} is out of range", f"use a whole number {bounds}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage and exit; we raise our one-line error
        raise UsageError(message)


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"must be true or false, got {text!r}")


def _parser(with_spec: bool) -> argparse.ArgumentParser:
    parser = _Parser(add_help=False, allow_abbrev=False)
    for option in RUN_OPTIONS:
        if option.type is bool:  # `--resume` on a command line, `--resume=true` from a Flex Template
            parser.add_argument(*option.flags, dest=option.name, nargs="?", const=True, default=None, type=_boolean)
        else:
            parser.add_argument(*option.flags, dest=option.name, type=option.type, default=None)
    if with_spec:  # the Flex Template's one parameter that is no run option
        parser.add_argument("--spec", default=None)
    return parser


def parse_args(argv: list[str] | tuple[str, ...], *, with_spec: bool = False) -> tuple[RunOptions, str | None]:
    """(RunOptions, --spec) from `--name=value` arguments: ddb2bt's options, and Beam's for the rest.

    Anything that is neither is a UsageError naming it.
    """
    known, rest = _parser(with_spec).parse_known_args(list(argv))
    values = vars(known)
    spec = values.pop("spec", None)
    return RunOptions.from_values(values, rest), spec


class UnknownOptionError(UsageError):
    """An argument neither ddb2bt nor Beam knows; ``flag`` is it (the CLI adds the command's close spellings)."""

    def __init__(self, flag: str, guess: str = "", command: str = "ddb2bt migrate") -> None:
        super().__init__(f"unknown option {flag!r} (neither a ddb2bt nor a Beam option{'; ' + guess if guess else ''})",
                         f"see `{command} --help` for ddb2bt's options and Beam's pipeline options reference "
                         "(apache_beam.options.pipeline_options) for Beam's")
        self.flag = flag


def check_beam_args(args: list[str] | tuple[str, ...]) -> list[str]:
    """``args`` if every one is a Beam pipeline option; else a UsageError naming the first that is not."""
    args = list(args)
    if not args:
        return args
    unknown = beam_unknown_args(args)
    if unknown:
        flag = next((a for a in unknown if a.startswith("-")), unknown[0])
        raise UnknownOptionError(flag.split("=", 1)[0])
    return args


def beam_knows(flag: str) -> bool:
    """Whether ``flag`` (``--name``, no value) is one of Beam's pipeline options."""
    try:
        return flag not in beam_unknown_args([flag])
    except UsageError:  # only a known option complains (its value is missing)
        return True


def beam_unknown_args(args: list[str]) -> list[str]:
    """The arguments no Beam ``PipelineOptions`` class declares (the same parse Beam does, without its warning).

    A value Beam's parse refuses (``--num_workers=abc``) is a one-line UsageError naming the option, where
    argparse would print Beam's whole usage and exit. Touches Beam's ``_BeamArgumentParser`` and the
    ``_add_argparse_args`` hook: pinned by the apache-beam range in pyproject.toml and tested in
    tests/app/test_options.py.
    """
    from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

    class Parser(_BeamArgumentParser):
        def error(self, message: str) -> Any:
            raise UsageError(message.removeprefix("argument "),
                             "see Beam's pipeline options reference (apache_beam.options.pipeline_options) "
                             "for the values it takes")

    parser = Parser(allow_abbrev=False)
    classes: dict[str, type] = {}
    for cls in PipelineOptions.__subclasses__():
        classes.setdefault(str(cls), cls)
    for cls in classes.values():
        cls._add_argparse_args(parser)  # noqa: SLF001 - Beam's documented extension hook
    _, unknown = parser.parse_known_args(args)
    return unknown
