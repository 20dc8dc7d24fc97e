"""``flowledger schedule add|list|show|pause|resume|remove|trigger``: a session's schedules.

Each command calls the matching ``schedule_*`` tool (`flowledger.tools.schedules`), so
``--json`` prints exactly what an MCP client gets. Reading commands open the database
read-only; changing ones write without owning the session (like ``--no-execute``): the
session's owner - a ``flowledger worker``, or an MCP server serving the session - fires
the slots and starts a trigger's run. Nothing here waits for a run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .runtime import (
    AppOption,
    DbOption,
    Host,
    JsonOption,
    Options,
    SessionOption,
    emit_json,
    open_host,
    parse_json_option,
    run_command,
    stdout_console,
)

__all__ = ["schedule_app"]

schedule_app = typer.Typer(
    help="Start runs on a schedule: cron slots in a time zone, or fixed intervals.",
    no_args_is_help=True,
)

ScheduleArgument = Annotated[str, typer.Argument(metavar="SCHEDULE", help="Schedule id.")]


async def _call(host: Host, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from ..deploy.deployments.scheduling import deployment_schedules
    from ..tools.schedules import ScheduleTools

    # the operator's CLI checks a deployment target, and pins a trigger's deployed run
    return await ScheduleTools(deployment_schedules(host.session)).call(name, arguments)


def _run(
    options: Options,
    name: str,
    arguments: dict[str, Any],
    *,
    writes: bool,
    show: Any,
    json_output: bool,
) -> None:
    async def work() -> None:
        async with open_host(options, owner=False, front_door=writes) as host:
            result = await _call(host, name, arguments)
        if json_output:
            emit_json(result)
        else:
            show(stdout_console(), result, options.flags())

    run_command(work)


def _timing(schedule: Mapping[str, Any]) -> str:
    if "cron" in schedule:
        return f"{schedule['cron']} ({schedule.get('timezone', 'UTC')})"
    return f"every {schedule.get('every')}s"


def _target(schedule: Mapping[str, Any]) -> str:
    if "deployment" in schedule:
        return f"deployment {schedule['deployment']}"
    return f"{schedule.get('definition_name', '')} {schedule.get('definition_version', '')}"


def _state(schedule: Mapping[str, Any]) -> Text:
    return Text("paused", "yellow") if schedule.get("paused") else Text("active", "green")


def render_schedules(console: Console, result: Mapping[str, Any], flags: Sequence[str]) -> None:
    schedules: Sequence[Mapping[str, Any]] = result.get("schedules", [])
    if not schedules:
        console.print("No schedules. Add one with [bold]flowledger schedule add[/].")
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("schedule", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("target", no_wrap=True)
    table.add_column("when")
    table.add_column("next fire", no_wrap=True)
    table.add_column("fired", justify="right")
    for schedule in schedules:
        upcoming = schedule.get("next_fire_times") or ["-"]
        table.add_row(
            str(schedule.get("schedule_id", "")),
            _state(schedule),
            _target(schedule),
            _timing(schedule),
            str(upcoming[0]),
            str(schedule.get("fired", 0)),
        )
    console.print(table)


def render_schedule(console: Console, schedule: Mapping[str, Any], flags: Sequence[str]) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    grid.add_row("schedule", Text(str(schedule.get("schedule_id", "")), style="bold"))
    grid.add_row("state", _state(schedule))
    grid.add_row("target", _target(schedule))
    grid.add_row("when", _timing(schedule))
    grid.add_row("overlap", str(schedule.get("overlap", "")))
    grid.add_row("catch up", str(schedule.get("catch_up", "")))
    grid.add_row("next fire", ", ".join(schedule.get("next_fire_times", [])) or "-")
    fired = f"{schedule.get('fired', 0)} (skipped {schedule.get('skipped', 0)}"
    grid.add_row(
        "fired", fired + (f", failed {schedule['failed']})" if schedule.get("failed") else ")")
    )
    if schedule.get("last_run_id"):
        grid.add_row("last run", str(schedule["last_run_id"]))
    console.print(grid)
    firings: Sequence[Mapping[str, Any]] = schedule.get("recent_firings", [])
    if firings:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, title="recent firings")
        table.add_column("slot", no_wrap=True)
        table.add_column("run", no_wrap=True)
        table.add_column("how", no_wrap=True)
        for firing in firings:
            how = "trigger" if firing.get("manual") else "slot"
            failure = firing.get("failure")
            run = f"none: {failure.get('code', '')}" if failure else str(firing.get("run_id", ""))
            if "deployment_revision" in firing:
                how += f", revision {firing['deployment_revision']}"
            table.add_row(str(firing.get("slot", "")), run, how)
        console.print(table)


def _said(verb: str) -> Any:
    def show(console: Console, result: Mapping[str, Any], flags: Sequence[str]) -> None:
        console.print(f"schedule {result.get('schedule_id', '')} {verb}")
        if "next_fire_times" in result:
            upcoming = ", ".join(result["next_fire_times"]) or "none while paused"
            console.print(Text.assemble(("next fire: ", "dim"), upcoming))

    return show


def _triggered(console: Console, result: Mapping[str, Any], flags: Sequence[str]) -> None:
    import shlex

    run_id = str(result.get("run_id", ""))
    console.print(f"schedule {result.get('schedule_id', '')} fired: run {run_id}")
    console.print(
        Text.assemble(
            ("the session's owner (a worker, or an MCP server) starts it; follow it with ", "dim"),
            shlex.join(["flowledger", "runs", "show", run_id, *flags]),
        ),
        soft_wrap=True,
    )


@schedule_app.command("add")
def add(
    definition: Annotated[str | None, typer.Argument(metavar="[DEFINITION")] = None,
    version: Annotated[str | None, typer.Argument(metavar="VERSION]")] = None,
    deployment: Annotated[
        str | None,
        typer.Option(
            "--deployment",
            metavar="NAME",
            help="Start this deployment (its live revision at each firing) instead of a "
            "definition version.",
        ),
    ] = None,
    cron: Annotated[
        str | None,
        typer.Option("--cron", metavar="EXPR", help="Five-field cron, e.g. '0 9 * * 1-5'."),
    ] = None,
    timezone: Annotated[
        str | None,
        typer.Option("--timezone", metavar="ZONE", help="IANA zone of --cron. \\[default: UTC]"),
    ] = None,
    every: Annotated[
        int | None,
        typer.Option("--every", metavar="SECONDS", help="Fire every this many seconds."),
    ] = None,
    start_at: Annotated[
        str | None,
        typer.Option("--start-at", metavar="TIME", help="First slot of --every (ISO 8601)."),
    ] = None,
    input_text: Annotated[
        str,
        typer.Option("--input", metavar="JSON", help="Input object (JSON, @file, or - for stdin)."),
    ] = "{}",
    overlap: Annotated[
        str,
        typer.Option("--overlap", help="While the previous run is unfinished: skip|queue|allow."),
    ] = "skip",
    catch_up: Annotated[
        str, typer.Option("--catch-up", help="Slots missed without an owner: none|latest|all.")
    ] = "none",
    paused: Annotated[bool, typer.Option("--paused", help="Add it paused.")] = False,
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    json_output: JsonOption = False,
) -> None:
    """Add a schedule of DEFINITION VERSION or of --deployment NAME (checked now: cron,
    time zone, target, input; nothing is written if anything is wrong)."""
    if (deployment is None) == (definition is None or version is None):
        raise typer.BadParameter(
            "give DEFINITION VERSION or --deployment NAME", param_hint="--deployment"
        )
    target = (
        {"deployment": deployment}
        if deployment is not None
        else {"definition_name": definition, "definition_version": version}
    )
    arguments: dict[str, Any] = {
        **target,
        "input": parse_json_option("--input", input_text),
        "overlap": overlap,
        "catch_up": catch_up,
        "paused": paused,
    }
    for key, value in (
        ("cron", cron),
        ("timezone", timezone),
        ("every", every),
        ("start_at", start_at),
    ):
        if value is not None:
            arguments[key] = value
    _run(
        Options(db, app_ref, session),
        "schedule_add",
        arguments,
        writes=True,
        show=_said("added"),
        json_output=json_output,
    )


@schedule_app.command("list")
def list_(
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    json_output: JsonOption = False,
) -> None:
    """List the session's schedules with their next fire times."""
    _run(
        Options(db, app_ref, session),
        "schedule_list",
        {},
        writes=False,
        show=render_schedules,
        json_output=json_output,
    )


@schedule_app.command("show")
def show(
    schedule: ScheduleArgument,
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show one schedule: timing, policies, next fire times and recent firings."""
    _run(
        Options(db, app_ref, session),
        "schedule_get",
        {"schedule_id": schedule},
        writes=False,
        show=render_schedule,
        json_output=json_output,
    )


def _change(tool: str, verb: str, doc: str) -> None:
    def command(
        schedule: ScheduleArgument,
        db: DbOption = None,
        app_ref: AppOption = None,
        session: SessionOption = None,
        json_output: JsonOption = False,
    ) -> None:
        _run(
            Options(db, app_ref, session),
            tool,
            {"schedule_id": schedule},
            writes=True,
            show=_triggered if tool == "schedule_trigger" else _said(verb),
            json_output=json_output,
        )

    command.__doc__ = doc
    schedule_app.command(tool.removeprefix("schedule_"))(command)


_change("schedule_pause", "paused", "Pause a schedule: its slots do not fire until resumed.")
_change("schedule_resume", "resumed", "Resume a schedule from its next slot after now.")
_change("schedule_remove", "removed", "Remove a schedule (the runs it started stay).")
_change("schedule_trigger", "fired", "Fire a schedule once now, outside its slots.")
