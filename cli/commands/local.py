"""`ddb2bt local up|down|status`: the embedded servers in the background, to explore ddb2bt by hand.

The `export …` lines go to stdout and everything else to stderr, so `eval "$(ddb2bt local up)"`
points the shell at the servers and `eval "$(ddb2bt local down)"` gives the shell back the values it had before
(AWS credentials, AWS_PROFILE): `up`'s lines save them in the shell, never printing them.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from ...app.local import DEFAULT_DIR as DEFAULT

app = typer.Typer(help="Local DynamoDB and Bigtable emulator in the background, seed tables loaded: explore by hand.",
                  no_args_is_help=True)


class DynamoDB(str, Enum):
    moto = "moto"
    dynalite = "dynalite"


Dir = Annotated[Path, typer.Option("--dir", help="Folder for the state file and the servers' log.")]


def _say(text: str) -> None:
    typer.echo(text, err=True)


def _show(state: Any) -> None:
    _say(f"DynamoDB ({state.dynamodb.name}) at {state.dynamodb.endpoint}, pid {state.dynamodb.pid}")
    _say(f"Bigtable emulator at {state.bigtable.endpoint}, pid {state.bigtable.pid}")
    for table in state.tables:
        _say(f"  table {table.table}: {table.items} items (spec: ddb2bt init --template {table.template} -o spec.yaml)")


def _dead(servers: Any) -> str:
    return ", ".join(f"{server.name} (pid {server.pid}) died" for server in servers)


@app.command("up")
def up(
    dir: Dir = DEFAULT,
    dynamodb: Annotated[DynamoDB, typer.Option("--dynamodb", help="The local DynamoDB: moto_server or dynalite.")] = DynamoDB.moto,
) -> None:
    """Start DynamoDB and the Bigtable emulator in the background, load the seed tables, print `export …` lines.

    Example: eval "$(ddb2bt local up)"
    """
    from ...app import local

    running = local.status(dir)
    if running is None or running.dead_servers():
        _say("starting the local servers and loading the seed tables…")
    result = local.up(dir, dynamodb.value)
    if result.died:
        _say(f"{_dead(result.died)}: stopped the rest and started afresh")
    if result.cleaned:
        _say(f"stopped servers a stopped local mode left running (pids {', '.join(map(str, result.cleaned))})")
    state = result.state
    if result.already_up:
        _say(f"already up (supervisor pid {state.supervisor_pid}, {dir / local.STATE_FILE}); nothing started")
    _show(state)
    _say(f"read the emulator's tables (once the variables are set): cbt -project {local.CBT_PROJECT} "
         f"-instance {local.CBT_INSTANCE} ls")
    _say(f'point this shell at them: eval "$(ddb2bt local up --dir {dir})"; stop them and restore your variables: '
         f'eval "$(ddb2bt local down --dir {dir})"')
    for line in state.exports():
        typer.echo(line)


@app.command("down")
def down(dir: Dir = DEFAULT) -> None:
    """Stop the servers `local up` started (their data goes with them); print the lines that restore the variables
    `up` changed.

    Example: eval "$(ddb2bt local down)"
    """
    from ...app import local

    result = local.down(dir)
    if not result.was_up:
        _say(f"not up ({dir / local.STATE_FILE} does not exist); nothing to stop")
        return
    _say(f"stopped (pids {', '.join(map(str, result.stopped)) or 'none left'})")
    for line in local.restore_lines(result.variables):
        typer.echo(line)


@app.command("status")
def status(dir: Dir = DEFAULT) -> None:
    """Say whether the local servers are up and print their `export …` lines; exit 1 when they are not (all) up.

    Example: ddb2bt local status
    """
    from ...app import local

    state = local.status(dir)
    if state is None:
        _say(f"not up (no live local mode in {dir}); start it with: ddb2bt local up --dir {dir}")
        raise typer.Exit(1)
    dead = state.dead_servers()
    if dead:
        _say(f"down: {_dead(dead)}; restart with: ddb2bt local up --dir {dir}")
        raise typer.Exit(1)
    _say(f"up (supervisor pid {state.supervisor_pid})")
    _show(state)
    for line in state.exports():
        typer.echo(line)


class Step(str, Enum):
    create = "create"
    full_export = "full-export"
    changes = "changes"
    incremental_export = "incremental-export"


@app.command("walkthrough")
def walkthrough(
    step: Annotated[Step, typer.Argument(help="create, full-export, changes or incremental-export (in that order).")],
    table: Annotated[str, typer.Option("--table", help="The walkthrough's DynamoDB table.")] = "posts",
    dir: Annotated[Path, typer.Option("--dir", help="Folder for the exports and spec.json.")] = Path("out/cutover"),
) -> None:
    """The DynamoDB side of docs/CUTOVER.md's worked example, on the local servers: create the table (60 items, a
    stream), write a full export and its spec, make changes, write the incremental export of what changed since.

    Example: ddb2bt local walkthrough create --table posts --dir out/cutover
    """
    from ...app.walkthrough import run_step
    from ...mappers.units import micros_to_iso, plural

    done = run_step(step.value, table, dir)
    if step is Step.create:
        typer.echo(f"table {done.table}: {plural(done.items, 'item')}, stream NEW_AND_OLD_IMAGES")
    elif step is Step.full_export:
        typer.echo(f"full export of {plural(done.items, 'item')} at {micros_to_iso(done.start_us or 0)}: "
                   f"{done.export_dir}")
        typer.echo(f"spec: {done.spec}")
    elif step is Step.changes:
        typer.echo(f"{plural(done.records or 0, 'change')}; the table now holds {plural(done.items, 'item')}")
    else:
        typer.echo(f"incremental export {micros_to_iso(done.start_us or 0)} .. {micros_to_iso(done.end_us or 0)}: "
                   f"{plural(done.records or 0, 'changed item')}: {done.export_dir}")
