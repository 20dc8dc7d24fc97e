"""The ``flowledger`` command line (typer + rich).

``runs fork RUN --at REV`` makes a new run from revision REV of RUN (optionally with
``--patch``: a JSON object of state fields) and, like ``start``, executes it here until
it stops (or, with ``--no-execute``, leaves it to a worker).

Reading commands (``definitions``, ``runs list``, ``runs show``, ``history``) never
execute anything and work while another process owns the session; with ``--json`` they
print exactly the result of the matching ``workflow_*`` tool. ``start`` and ``resume``
own the session and keep running until it is idle, because this process executes the
run (``start --detach`` returns once the run is durably started; ``resume RUN`` without
a payload continues a run left running by a process that is gone); ``cancel`` owns it
just long enough to cancel. An owner stopped by a signal or a closed stdout stops at the
next step boundary and says which runs it leaves (``stopping.py``). With
``--no-execute`` the three are front doors instead: they only write the pending run or
the request, and wait for a ``flowledger worker`` to act on it. ``worker`` executes the
runs of every session. ``demo`` shows all of it.
"""

from __future__ import annotations

import shlex
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from .. import __version__
from .artifact import artifact_app
from .capability import capability_app
from .check import register_check
from .deploy import deploy_app
from .deploy import inspect as deploy_inspect
from .deploy import trace as deploy_trace
from .draft import draft_app
from .explain import register_explain
from .helptext import hide_redundant_types
from .limits import limits_app
from .observing import LogFormatChoice, LogFormatOption, MetricsHostOption, MetricsPortOption
from .observing import log_format as chosen_format
from .prune import register_prune
from .render import (
    Pause,
    render_definitions,
    render_history,
    render_pause,
    render_run,
    render_runs,
    status_text,
)
from .runtime import (
    AppOption,
    CliError,
    DbOption,
    Host,
    JsonOption,
    Options,
    SessionOption,
    check_idle,
    emit_json,
    make_fork_tools,
    open_host,
    parse_json_option,
    run_command,
    stdout_console,
)
from .schedule import schedule_app
from .source import source_app
from .sources_file import SourcesOption
from .web import register_web

# Every module imported above is light (typer, rich and the CLI's own option types). The
# library behind a command (the engine, the tools, the deploy layer, the MCP SDK) is
# imported inside the command that runs, so `flowledger --help` or a read of one table
# does not pay for all of it; tests/cli/test_startup.py keeps it that way.

__all__ = ["app", "main"]

MAX_PAGE = 100

RunArgument = Annotated[str, typer.Argument(metavar="RUN", help="Run id (a UUID).")]
NoExecuteOption = Annotated[
    bool,
    typer.Option(
        "--no-execute",
        help="Front door: do not own the session; a `flowledger worker` executes the run "
        "(this command writes the request and waits for the worker).",
    ),
]

app = typer.Typer(
    name="flowledger",
    help="Durable graph workflows: run, pause, resume from any process, and watch.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
hide_redundant_types()
runs_app = typer.Typer(help="List and inspect runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
app.add_typer(artifact_app, name="artifact")
app.add_typer(source_app, name="source")
app.add_typer(capability_app, name="capability")
register_web(app)
register_prune(app)
register_explain(app)
register_check(app)
app.add_typer(deploy_app, name="deploy")
app.add_typer(draft_app, name="draft")
app.add_typer(schedule_app, name="schedule")
app.add_typer(limits_app, name="limits")
app.command("inspect", help="A deployed run: status, readiness, output, interrupt.")(deploy_inspect)
app.command("trace", help="A range of a deployed run's trace (what each node did).")(deploy_trace)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"flowledger {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Durable graph workflows: run, pause, resume from any process, and watch.

    Start with [bold]flowledger demo[/].
    """


@app.command(
    help="Run the built-in document review end to end (start here).\n\n"
    "Live progress, a retried step, the approval pause, a resume from a new process, "
    "and the activity history. The run stays in the database for `flowledger runs list`."
)
def demo(
    db: DbOption = None,
    session: SessionOption = None,
) -> None:
    from .demo import run_demo

    options = Options(db, None, session)

    async def work() -> None:
        await run_demo(options, stdout_console())

    run_command(work)


# -- reading ----------------------------------------------------------------------------


@app.command()
def definitions(
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    json_output: JsonOption = False,
) -> None:
    """List the workflow definitions that can be started."""
    options = Options(db, app_ref, session)

    async def work() -> None:
        async with open_host(options, owner=False) as host:
            result = await host.call("workflow_definition_list", {})
        if json_output:
            emit_json(result)
        else:
            render_definitions(stdout_console(), result)

    run_command(work)


@runs_app.command("list")
def runs_list(
    after: Annotated[
        str | None, typer.Option("--after", metavar="RUN", help="Continue after this run id.")
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            metavar="N",
            help="At most this many runs (1-100). \\[default: 50]",
            show_default=False,
        ),
    ] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            metavar="STATUS",
            help="Only runs of this status, or 'queued' (pending, waiting for a slot).",
        ),
    ] = None,
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    json_output: JsonOption = False,
) -> None:
    """List runs (one page, in run id order; the table shows it newest first). Queued
    runs show their place: the scope they wait in and their position."""
    options = Options(db, app_ref, session)

    async def work() -> None:
        arguments: dict[str, Any] = {}
        if status is not None:
            arguments["status"] = status
        if after is not None:
            arguments["after"] = after
        if limit is not None:
            arguments["limit"] = _page_limit(limit)
        async with open_host(options, owner=False) as host:
            result = await host.call("workflow_run_list", arguments)
        if json_output:
            emit_json(result)
        else:
            render_runs(stdout_console(), result, options.flags())

    run_command(work)


@runs_app.command("show")
def runs_show(
    run: RunArgument,
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show one run; for a paused run, what it waits for and how to resume it."""
    from .continuing import print_continue_hint

    options = Options(db, app_ref, session)

    async def work() -> None:
        async with open_host(options, owner=False) as host:
            result = await host.call("workflow_run_get", {"run_id": run})
            if json_output:
                emit_json(result)
                return
            pause = Pause.from_run(result, options.flags())
        console = stdout_console()
        render_run(console, result, pause)
        print_continue_hint(console, result, options.flags())

    run_command(work)


@runs_app.command("fork")
def runs_fork(
    run: RunArgument,
    at: Annotated[
        int,
        typer.Option(
            "--at",
            metavar="REV",
            help="The checkpoint revision to fork from (0 up to the run's latest; see "
            "`flowledger history RUN`).",
        ),
    ],
    patch_text: Annotated[
        str | None,
        typer.Option(
            "--patch",
            metavar="JSON",
            help="Replace state fields in the fork: a JSON object of top-level state "
            "fields, @file.json, or - for stdin.",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the fork's run as JSON once it stopped.")
    ] = False,
    no_execute: NoExecuteOption = False,
) -> None:
    """Fork a run from one of its revisions: a new run of the same definition version
    continues from the state there (steps after it run again) and executes here, with
    live progress, until it stops."""
    from .watch import Watch

    options = Options(db, app_ref, session)

    async def work() -> None:
        arguments: dict[str, Any] = {"run_id": run, "revision": at}
        if patch_text is not None:
            arguments["patch"] = parse_json_option("--patch", patch_text)
        console = stdout_console()
        if no_execute:
            async with open_host(options, owner=False, front_door=True) as host:
                result = await make_fork_tools(host.session, owner=False).call(
                    "workflow_run_fork", arguments
                )
            if json_output:
                emit_json(result)
                return
            console.print(Text.assemble(("forked run ", "dim"), (str(result["run_id"]), "bold")))
            _print_status(console, result, note="a worker executes it")
            return
        async with open_host(options, owner=True) as host:
            async with Watch(host.session, console, quiet=json_output) as watch:
                result = await make_fork_tools(host.session, owner=True).call(
                    "workflow_run_fork", arguments
                )
                fork_id = str(result["run_id"])
                title = f"{result['definition_name']} {result['definition_version']}"
                if not json_output:
                    console.print(
                        Text.assemble(
                            ("forked run ", "dim"),
                            (fork_id, "bold"),
                            f"  {title} from {run} at revision {at}",
                        )
                    )
                await watch.follow(fork_id, title)
                error = await host.session.supervisor.wait_idle()
            await _finish(host, console, fork_id, error, quiet=json_output)

    run_command(work)


@app.command()
def history(
    run: RunArgument,
    after_revision: Annotated[
        int | None,
        typer.Option(
            "--after-revision", metavar="N", help="Continue from this revision (a page cursor)."
        ),
    ] = None,
    after_event_id: Annotated[
        str | None,
        typer.Option("--after-event-id", metavar="UUID", help="Continue after this event."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            metavar="N",
            help="At most this many entries (1-100). \\[default: 50]",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show a run's activity history (one page; follow the printed cursor for more)."""
    from .loops import definition_loops

    options = Options(db, app_ref, session)

    async def work() -> None:
        arguments: dict[str, Any] = {"run_id": run}
        if after_revision is not None:
            arguments["after_revision"] = after_revision
        if after_event_id is not None:
            arguments["after_event_id"] = after_event_id
        if limit is not None:
            arguments["limit"] = _page_limit(limit)
        async with open_host(options, owner=False) as host:
            result = await host.call("workflow_run_history", arguments)
            loops = False
            run_record = await host.call("workflow_run_get", {"run_id": run})
            # Activities never copy a cancel's reason (docs/workflows.md): the page
            # carries it beside its entries, from the run's cancelled checkpoint.
            if run_record.get("cancel_reason"):
                result = {**result, "cancel_reason": run_record["cancel_reason"]}
            if not json_output:
                loops = bool(
                    definition_loops(
                        host.session.catalog,
                        str(run_record.get("definition_name", "")),
                        str(run_record.get("definition_version", "")),
                    )
                )
        if json_output:
            emit_json(result)
        else:
            render_history(stdout_console(), result, options.flags(), loops=loops)

    run_command(work)


# -- changing ---------------------------------------------------------------------------


@app.command()
def start(
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="Definition name, e.g. document_review.")
    ],
    version: Annotated[str, typer.Argument(metavar="VERSION", help="Definition version, e.g. v1.")],
    input_text: Annotated[
        str,
        typer.Option(
            "--input",
            "-i",
            metavar="JSON",
            help="The run's input: a JSON object, @file.json, or - for stdin.",
        ),
    ] = "{}",
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    json_output: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the run as JSON once it stopped (with --detach: once started).",
        ),
    ] = False,
    no_execute: NoExecuteOption = False,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach",
            help="Return once the run's first checkpoint is durable; the next process "
            "that owns the session (any start, resume, mcp or worker) executes it.",
        ),
    ] = False,
) -> None:
    """Start a run and execute it here, with live progress, until it stops: completed,
    paused (interrupted), failed or cancelled."""
    from .watch import Watch

    options = Options(db, app_ref, session)

    async def work() -> None:
        document = parse_json_option("--input", input_text)
        console = stdout_console()
        if no_execute:
            async with open_host(options, owner=False, front_door=True) as host:
                result = await host.call(
                    "workflow_run_start",
                    {"definition_name": name, "definition_version": version, "input": document},
                )
            if json_output:
                emit_json(result)
                return
            run_id = str(result["run_id"])
            console.print(
                Text.assemble(("started run ", "dim"), (run_id, "bold"), f"  {name} {version}")
            )
            _print_status(console, result, note="a worker executes it")
            return
        async with open_host(options, owner=True) as host:
            async with Watch(host.session, console, quiet=json_output or detach) as watch:
                result = await host.call(
                    "workflow_run_start",
                    {"definition_name": name, "definition_version": version, "input": document},
                )
                run_id = str(result["run_id"])
                if not json_output:
                    console.print(
                        Text.assemble(
                            ("started run ", "dim"), (run_id, "bold"), f"  {name} {version}"
                        )
                    )
                if detach:
                    if json_output:
                        emit_json(result)
                    assert host.leaving is not None
                    host.leaving.detach()
                    return
                await watch.follow(run_id, f"{name} {version}")
                error = await host.session.supervisor.wait_idle()
            await _finish(host, console, run_id, error, quiet=json_output)

    run_command(work)


async def _status(host: Host, run: str) -> str:
    """The run's status, or ``""`` if it cannot be read (the resume then says why)."""
    from ..tools import ToolError

    try:
        current = await host.call("workflow_run_get", {"run_id": run})
    except ToolError:
        return ""
    return str(current.get("run_status", ""))


async def _title(host: Host, run: str) -> str:
    """``"<definition> <version>"`` of an interrupted run, else ``""`` (the resume tool
    says what is wrong, in its own words)."""
    from ..tools import ToolError

    try:
        current = await host.call("workflow_run_get", {"run_id": run})
    except ToolError:
        return ""
    if current.get("run_status") != "interrupted":
        return ""
    return f"{current.get('definition_name', '')} {current.get('definition_version', '')}"


@app.command()
def resume(
    run: RunArgument,
    payload_text: Annotated[
        str | None,
        typer.Option(
            "--payload",
            "-p",
            metavar="JSON",
            help="The answer the paused run waits for: a JSON object, @file.json, or - for "
            "stdin. Leave it out to retry a run paused by an error, or to continue a run "
            "left running (or pending) by a process that is gone.",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    json_output: JsonOption = False,
    no_execute: NoExecuteOption = False,
) -> None:
    """Resume a paused run here, with live progress, until it pauses again or ends; or,
    without --payload, continue a run nobody executes any more."""
    from .continuing import follow_left_run, refuse_payload_for_left_run
    from .watch import Watch

    options = Options(db, app_ref, session)

    async def work() -> None:
        console = stdout_console()
        payload = None if payload_text is None else parse_json_option("--payload", payload_text)
        arguments: dict[str, Any] = {"run_id": run}
        if payload is not None:
            arguments["resume"] = payload
        if no_execute:
            async with open_host(options, owner=False, front_door=True) as host:
                if payload is None and await _status(host, run) in ("pending", "running"):
                    raise CliError(
                        "--no-execute needs --payload: a run left running is continued by "
                        "the process that owns the session (a worker adopts it by itself)"
                    )
                title = await _title(host, run)
                # a worker executes it; its activities are read back from the journal
                async with Watch(host.session, console, quiet=json_output, from_journal=True) as w:
                    await w.follow(run, title)
                    result = await host.call("workflow_run_resume", arguments)
                if json_output:
                    emit_json(result)
                    return
                _print_status(console, result)
                pause = Pause.from_run(result, host.options.flags())
                if pause is not None:
                    render_pause(console, pause)
            return
        async with open_host(options, owner=True, announce=payload is not None) as host:
            if payload is None and await _status(host, run) in ("pending", "running"):
                error = await follow_left_run(host, console, run, quiet=json_output)
                await _finish(host, console, run, error, quiet=json_output)
                return
            if payload is not None:
                await refuse_payload_for_left_run(host, run)
            title = await _title(host, run)
            async with Watch(host.session, console, quiet=json_output) as watch:
                if not json_output and title:
                    console.print(
                        Text.assemble(("resuming run ", "dim"), (run, "bold"), f"  {title}")
                    )
                await watch.follow(run, title)
                await host.call("workflow_run_resume", arguments)
                error = await host.session.supervisor.wait_idle()
            await _finish(host, console, run, error, quiet=json_output)

    run_command(work)


@app.command()
def cancel(
    run: RunArgument,
    reason: Annotated[
        str | None,
        typer.Option("--reason", metavar="TEXT", help="Why (at most 512 bytes; kept on the run)."),
    ] = None,
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    json_output: JsonOption = False,
    no_execute: NoExecuteOption = False,
) -> None:
    """Cancel a run that has not finished (cancelling a cancelled run is a no-op)."""
    options = Options(db, app_ref, session)

    async def work() -> None:
        arguments: dict[str, Any] = {"run_id": run}
        if reason is not None:
            arguments["reason"] = reason
        async with open_host(options, owner=not no_execute, front_door=no_execute) as host:
            result = await host.call("workflow_run_cancel", arguments)
        if json_output:
            emit_json(result)
            return
        status = str(result.get("run_status", ""))
        line = Text.assemble("run ", (run, "bold"), " is ", status_text(status))
        if result.get("idempotent"):
            line.append(" (it already was)", style="dim")
        stdout_console().print(line)

    run_command(work)


@app.command()
def mcp(
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")
    ] = False,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            metavar="HOST",
            help="HTTP: address to listen on. \\[default: 127.0.0.1]",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            metavar="PORT",
            min=1,
            max=65535,
            help="HTTP: port to listen on. \\[default: 8765]",
            show_default=False,
        ),
    ] = None,
    tokens_file: Annotated[
        str | None,
        typer.Option(
            "--tokens-file",
            metavar="PATH",
            help="HTTP: bearer tokens, one token (and optionally its session UUID) a line. "
            "\\[default: $FLOWLEDGER_MCP_TOKENS]",
            show_default=False,
        ),
    ] = None,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Hide and refuse the tools that change runs.")
    ] = False,
    no_execute: Annotated[
        bool,
        typer.Option(
            "--no-execute",
            help="Front door: never own the session; the tools write pending runs and "
            "requests that `flowledger worker` processes execute.",
        ),
    ] = False,
    allow_inline_sources: Annotated[
        bool,
        typer.Option(
            "--allow-inline-sources",
            help="HTTP: let clients name command lines, URLs and environment variables "
            "in deployments and source_probe (the operator's power: every token holder "
            "can then run commands on this host). Off: only registered sources.",
        ),
    ] = False,
    sources: SourcesOption = None,
    db: DbOption = None,
    app_ref: AppOption = None,
    session: SessionOption = None,
    log_format: LogFormatOption = LogFormatChoice.HUMAN,
) -> None:
    """Serve the workflow tools over MCP: stdio by default, streamable HTTP with --http.

    Over stdio, stdout carries the protocol; messages go to stderr."""
    if tokens_file is not None and not http:
        raise typer.BadParameter("--tokens-file needs --http", param_hint="--tokens-file")
    if (host is not None or port is not None) and not http:
        raise typer.BadParameter("--host and --port need --http", param_hint="--host/--port")
    if allow_inline_sources and not http:
        raise typer.BadParameter(
            "--allow-inline-sources needs --http", param_hint="--allow-inline-sources"
        )
    options = Options(db, app_ref, session)

    async def work() -> None:
        from ..httpsec import StartupError
        from ..mcp import serve  # imported here: only this command needs it

        extra: dict[str, Any] = {}
        if host is not None:
            extra["host"] = host
        if port is not None:
            extra["port"] = port
        try:
            await serve(
                options.url,
                app=app_ref,
                session=session,
                read_only=read_only,
                no_execute=no_execute,
                http=http,
                tokens_file=tokens_file,
                allow_inline_sources=allow_inline_sources,
                sources=sources,
                **extra,
            )
        except StartupError as exc:
            raise CliError(str(exc)) from None

    run_command(work, quiet_logs=False, log_format=chosen_format(log_format))


@app.command(
    # One line per paragraph: rich help keeps a docstring's line breaks.
    help="Execute the runs of every session: claim sessions with unfinished runs, adopt "
    "the runs of workers that died, and act on front doors' requests.\n\n"
    "Run as many as you like against one PostgreSQL database. SIGTERM or Ctrl-C stops a "
    "worker cleanly (its sessions are released at once)."
)
def worker(
    db: DbOption = None,
    app_ref: AppOption = None,
    lease_ttl: Annotated[
        float,
        typer.Option(
            "--lease-ttl",
            min=0.05,
            max=3600,
            metavar="S",
            help="Session lease TTL: how long a dead worker's sessions wait for adoption.",
        ),
    ] = 15.0,
    poll: Annotated[
        float,
        typer.Option(
            "--poll",
            min=0.01,
            max=60,
            metavar="S",
            help="Seconds between looks for work when nothing wakes the worker (the "
            "fallback poll; every 0.5 s instead while wake-ups are not delivered).",
        ),
    ] = 5.0,
    max_sessions: Annotated[
        int,
        typer.Option(
            "--max-sessions", min=1, max=10_000, metavar="N", help="Sessions owned at most."
        ),
    ] = 100,
    runs_per_session: Annotated[
        int,
        typer.Option(
            "--runs-per-session",
            min=1,
            max=64,
            metavar="N",
            help="Runs of one session executed at once.",
        ),
    ] = 4,
    retention: Annotated[
        str | None,
        typer.Option(
            "--retention",
            metavar="DURATION",
            help="Prune the finished runs of the sessions this worker owns once they are "
            "older than this (30d, 12h; as `flowledger prune`). \\[default: the catalog's "
            "retention, else none]",
            show_default=False,
        ),
    ] = None,
    retention_status: Annotated[
        str | None,
        typer.Option(
            "--retention-status",
            metavar="LIST",
            help="With --retention: only runs with these statuses. "
            "\\[default: completed,cancelled,failed]",
            show_default=False,
        ),
    ] = None,
    retention_every: Annotated[
        str | None,
        typer.Option(
            "--retention-every",
            metavar="DURATION",
            help="With --retention: time between passes over a session. \\[default: 1h]",
            show_default=False,
        ),
    ] = None,
    rebuild_index: Annotated[
        bool,
        typer.Option(
            "--reindex",
            help="First index the unfinished runs of every session (for runs written by "
            "older versions, which workers cannot find otherwise).",
        ),
    ] = False,
    sources: SourcesOption = None,
    metrics_port: MetricsPortOption = None,
    metrics_host: MetricsHostOption = "127.0.0.1",
    log_format: LogFormatOption = LogFormatChoice.HUMAN,
) -> None:
    options = Options(db, app_ref, None)
    if retention is None and (retention_status is not None or retention_every is not None):
        raise typer.BadParameter("needs --retention", param_hint="--retention-status/-every")

    async def work() -> None:
        from ..workflows.retention.pruning import RetentionPolicy
        from ..workflows.runtime.worker import WorkerSettings
        from .worker import run_worker

        try:
            policy = (
                None
                if retention is None
                else RetentionPolicy.parse(retention, retention_status, retention_every)
            )
        except ValueError as exc:
            raise CliError(str(exc)) from None
        settings = WorkerSettings(
            lease_ttl=lease_ttl,
            poll=poll,
            max_sessions=max_sessions,
            runs_per_session=runs_per_session,
            retention=policy,
        )
        await run_worker(
            options,
            settings,
            rebuild_index=rebuild_index,
            sources=sources,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
        )

    run_command(work, quiet_logs=False, log_format=chosen_format(log_format))


# -- shared -----------------------------------------------------------------------------


def _page_limit(limit: int) -> int:
    """``--limit`` as its help says: 1-100 (the tools would read 0 as "the default")."""
    if not 1 <= limit <= MAX_PAGE:
        raise CliError(f"--limit must be in 1..{MAX_PAGE}, not {limit}")
    return limit


def _print_status(console: Console, result: dict[str, Any], *, note: str = "") -> None:
    run_id = str(result.get("run_id", ""))
    status = str(result.get("run_status", ""))
    line = Text.assemble(("run ", "dim"), (run_id, "bold"), " is ", status_text(status))
    if result.get("status_summary"):
        line.append(f" ({result['status_summary']})", style="dim")
    if note and status in ("pending", "running"):
        line.append(f"; {note}", style="dim")
    console.print(line)


async def _pause_or_none(host: Host, run_id: str) -> Pause | None:
    from .watch import load_pause

    try:
        return await load_pause(host.session, run_id, host.options.flags())
    except Exception:  # the record says interrupted; what it waits for is the extra detail
        return None


async def _finish(
    host: Host, console: Console, run_id: str, error: BaseException | None, *, quiet: bool
) -> None:
    """After the session went idle: report the run's outcome (``quiet``: print the run as
    JSON). A run left unfinished is reported when the session is let go (`open_host`)."""
    check_idle(run_id, error)
    supervisor = host.session.supervisor
    if supervisor.stopping:
        await supervisor.stop()  # the run's record catches up with its last checkpoint
    run = await host.call("workflow_run_get", {"run_id": run_id})
    if quiet:
        emit_json(run)
        return
    status = str(run.get("run_status", ""))
    line = Text.assemble(("run ", "dim"), (run_id, "bold"), " is ", status_text(status))
    if run.get("status_summary"):
        line.append(f" ({run['status_summary']})", style="dim")
    console.print(line)
    if status == "interrupted":
        pause = await _pause_or_none(host, run_id)
        if pause is not None:
            render_pause(console, pause)
        else:
            command = ["flowledger", "resume", run_id, "--payload", "{...}", *host.options.flags()]
            console.print(
                Text.assemble(("resume with: ", "dim"), shlex.join(command)), soft_wrap=True
            )


def main() -> None:
    """The ``flowledger`` console script. ``FLOWLEDGER_TRACES=otlp`` exports traces of
    what the command runs, ``FLOWLEDGER_METRICS=otlp`` its metrics (docs/observability.md)."""
    from ..observability import otel_metrics, tracing

    try:
        tracing.enable_from_environment()
        otel_metrics.mirror_from_environment()
    except (ValueError, RuntimeError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(2) from None
    app(prog_name="flowledger")
