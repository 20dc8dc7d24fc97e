"""``flowledger limits set|show|clear``: the operator's limits.

A ``max_running`` limit applies to one definition name (across every session and
worker), to one deployment (of one session: ``--deployment NAME``, with ``--session
UUID`` naming whose, by default the database's default session) or to one session;
``--source NAME --calls N --per DURATION`` limits the tool calls deployed runs make to a
registered source instead (`rate_limits`). Limits live in the database
(`flowledger.workflows.admission.Limits`), so every worker reads the same ones; they are
an operator's setting, not a tool, so no MCP tool changes them. Starts beyond a limit
wait, queued, and start in FIFO order as slots free; calls beyond one wait for the
window to free.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from .rate_limits import clear_rate, rate_rows, set_rate
from .runtime import DbOption, Options, emit_json, run_command, stdout_console

__all__ = ["limits_app"]

limits_app = typer.Typer(
    help=(
        "Concurrency limits (at most N running runs per definition, deployment or "
        "session) and call rate limits (at most N calls per interval to a registered "
        "source)."
    ),
    no_args_is_help=True,
)

DefinitionScope = Annotated[
    str | None,
    typer.Option("--definition", metavar="NAME", help="Limit the runs of this definition."),
]
DeploymentScope = Annotated[
    str | None,
    typer.Option(
        "--deployment",
        metavar="NAME",
        help="Limit the runs of this deployment (every revision) of --session's session.",
    ),
]
SessionScope = Annotated[
    str | None,
    typer.Option(
        "--session",
        metavar="UUID",
        help="Limit the runs of this session; with --deployment: the deployment's session.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
SourceScope = Annotated[
    str | None,
    typer.Option("--source", metavar="NAME", help="Limit calls to this registered source."),
]


def _checked_limit(value: int | None) -> int | None:
    """A usage error (exit 2, naming --max-running) for a limit out of range."""
    from ..workflows.admission import InvalidLimitError, validate_limit

    if value is None:
        return None
    try:
        return validate_limit(value)
    except InvalidLimitError as exc:
        raise typer.BadParameter(str(exc)) from None


def _scope(definition: str | None, session: str | None) -> tuple[Any, str]:
    from ..workflows.records.run import is_id

    if (definition is None) == (session is None):
        raise typer.BadParameter(
            "give exactly one of --definition NAME, --deployment NAME or --session UUID",
            param_hint="--definition/--deployment/--session",
        )
    if session is not None:
        if not is_id(session):
            raise typer.BadParameter("not a session UUID", param_hint="--session")
        return "session", session
    assert definition is not None
    return "definition", definition


def _check_options(definition: str | None, deployment: str | None, session: str | None) -> None:
    """A usage error (exit 2) before the database is opened for a scope that is not one."""
    if deployment is None:
        _scope(definition, session)
    elif definition is not None:
        raise typer.BadParameter(
            "give exactly one of --definition NAME, --deployment NAME or --session UUID",
            param_hint="--definition/--deployment/--session",
        )


async def _resolve(
    store: Any,
    definition: str | None,
    deployment: str | None,
    session: str | None,
    *,
    existing: bool = True,
) -> tuple[Any, str]:
    """The scope the options name; with ``existing``, a deployment must exist."""
    if deployment is None:
        return _scope(definition, session)
    from .limits_deployment import deployment_scope

    return await deployment_scope(store, deployment, session, existing=existing)


@limits_app.command("set")
def limits_set(
    max_running: Annotated[
        int | None,
        typer.Option(
            "--max-running",
            metavar="N",
            help="At most N running (1-10000).",
            callback=_checked_limit,
        ),
    ] = None,
    definition: DefinitionScope = None,
    deployment: DeploymentScope = None,
    session: SessionScope = None,
    source: SourceScope = None,
    calls: Annotated[
        int | None, typer.Option("--calls", metavar="N", help="With --source: N calls...")
    ] = None,
    per: Annotated[
        str | None, typer.Option("--per", metavar="DURATION", help="...per 60s, 1m, 1h.")
    ] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Set a limit; later starts beyond it are queued (calls beyond it wait)."""
    from ..storage import open_store
    from ..workflows.admission import Limits

    if source is not None and (definition, deployment, session, max_running) == (None,) * 4:
        set_rate(source, calls, per, db, json_output)
        return
    if max_running is None:
        raise typer.BadParameter("give --max-running N", param_hint="--max-running")
    _check_options(definition, deployment, session)
    options = Options(db)

    async def work() -> None:
        async with open_store(options.url) as store:
            kind, name = await _resolve(store, definition, deployment, session)
            await Limits(store.kv).set(kind, name, max_running)
        if json_output:
            emit_json({"scope": f"{kind}/{name}", "max_running": max_running})
        else:
            stdout_console().print(f"{kind} {name}: at most {max_running} running")

    run_command(work)


@limits_app.command("clear")
def limits_clear(
    definition: DefinitionScope = None,
    deployment: DeploymentScope = None,
    session: SessionScope = None,
    source: SourceScope = None,
    db: DbOption = None,
) -> None:
    """Remove a limit (queued runs start as slots allow: none are limited any more)."""
    from ..storage import open_store
    from ..workflows.admission import Limits

    if source is not None and (definition, deployment, session) == (None,) * 3:
        clear_rate(source, db)
        return
    _check_options(definition, deployment, session)
    options = Options(db)

    async def work() -> None:
        async with open_store(options.url) as store:
            kind, name = await _resolve(store, definition, deployment, session, existing=False)
            removed = await Limits(store.kv).clear(kind, name)
        stdout_console().print(f"{kind} {name}: " + ("limit removed" if removed else "no limit"))

    run_command(work)


@limits_app.command("show")
def limits_show(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Every limit."""
    from ..storage import open_store
    from ..workflows.admission import Limits

    options = Options(db)

    async def work() -> None:
        async with open_store(options.url) as store:
            found = await Limits(store.kv).all()
            rates = await rate_rows(store)
        if json_output:
            runs = [{"scope": f"{k}/{n}", "max_running": m} for k, n, m in found]
            emit_json({"limits": runs + rates})
            return
        table = Table("scope", "name", "limit")
        for kind, name, limit in found:
            table.add_row(kind, name, f"{limit} running")
        for rate in rates:
            table.add_row(
                "source",
                rate["scope"].removeprefix("source/"),
                f"{rate['calls']} calls per {rate['per_seconds']:g}s"
                f" ({rate['in_window']} in window)",
            )
        stdout_console().print(table)

    run_command(work)
