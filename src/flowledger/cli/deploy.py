"""``flowledger deploy``: deployments and deployed runs from the command line.

``flowledger inspect`` and ``flowledger trace`` (top-level: `inspect`, `trace`) read
deployed runs; ``flowledger artifact save|show|list|delete`` and ``flowledger draft``
use `run_service` too. ``delete`` and ``rollback`` write; a refusal (in use, a moved
live revision) prints ``[code] message`` on stderr, exit code 1, nothing written.

Reading commands (``list``, ``show``, ``check``, ``inspect``, ``trace``) open the database
read-only: it must exist, and nothing is written. Every command prints a summary or a
table (``deploy_render.py``), or with ``--json`` its `DeployService` result as one line
of JSON, like the other commands. ``run`` and ``resume`` own the session while the run
executes (like ``start``), showing a spinner on a terminal: they return once it has
stopped (interrupted, completed, failed) and the session is idle. A refused start
(``unrunnable``) and a blocked resume print their diagnostics and exit with code 1;
nothing was written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from .deploy_render import (
    render_check,
    render_deleted,
    render_deployed_run,
    render_deployment,
    render_deployments,
    render_next,
    render_trace,
)
from .runtime import (
    CliError,
    Options,
    emit_json,
    fail,
    parse_json_option,
    run_command,
    stdout_console,
)

__all__ = ["Cursor", "Limit", "Query", "deploy_app", "inspect", "run_service", "trace"]

deploy_app = typer.Typer(
    help="Deployments (flowledger.deployment/v1) and their pinned runs.", no_args_is_help=True
)

Db = Annotated[
    str | None,
    typer.Option("--db", metavar="URL", help="Database URL. \\[default: $FLOWLEDGER_DB]"),
]
Session = Annotated[str | None, typer.Option("--session", metavar="UUID", help="Session to use.")]
Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON (for scripts).")]
Render = Callable[[Console, dict[str, Any], list[str]], None]
RunId = Annotated[str, typer.Argument(metavar="RUN", help="Run id (a UUID).")]
Query = Annotated[
    str | None,
    typer.Option("--query", metavar="TEXT", help="Only names containing TEXT (a prefix too)."),
]
Limit = Annotated[
    int | None, typer.Option("--limit", metavar="N", help="At most N per page. \\[default: 50]")
]
Cursor = Annotated[
    str | None,
    typer.Option("--cursor", metavar="NAME", help="Continue after this name (a page's `next`)."),
]


@asynccontextmanager
async def _service(options: Options, *, owner: bool, writes: bool) -> AsyncIterator[Any]:
    """Reading commands open the database read-only (it must exist; nothing is written),
    saving ones write without owning the session, ``run`` and ``resume`` own it."""
    from ..deploy import DeployService
    from ..host import open_session
    from ..workflows import Catalog

    read_only = not (owner or writes)
    async with open_session(
        options.url, Catalog(), options.session, activate=False, read_only=read_only
    ) as session:
        service = DeployService(session)
        if not owner:
            yield service
            return
        await service.serve_deployments()  # before activation, so unfinished runs are adopted
        await session.supervisor.activate()
        try:
            yield service
            await session.supervisor.wait_idle()
        finally:
            await session.supervisor.shutdown()


def run_service(
    db: str | None,
    session: str | None,
    work: Callable[[Any], Awaitable[dict[str, Any]]],
    render: Render,
    as_json: bool,
    *,
    progress: str = "",
    owner: bool = False,
    writes: bool = False,
    refused: Callable[[dict[str, Any]], bool] = lambda _: False,
) -> None:
    options = Options(db, None, session)

    async def main() -> None:
        from ..deploy import (
            ArtifactError,
            DeploymentConflictError,
            DeploymentNotFoundError,
            NotADeployedRunError,
        )
        from ..deploy.deployments.lifecycle import DeploymentInUseError
        from ..deploy.drafts.errors import DraftError
        from ..deploy.sources.errors import SourceError
        from ..workflows import NotFoundError

        console = stdout_console()
        async with _service(options, owner=owner, writes=writes) as service:
            try:
                if progress and not as_json and console.is_terminal:
                    with console.status(progress):
                        result = await work(service)
                else:
                    result = await work(service)
            except (DeploymentInUseError, DeploymentConflictError, DraftError, SourceError) as exc:
                # these read as "[code] message", so `flowledger explain CODE` follows
                raise CliError(f"[{exc.code}] {exc}") from None
            except (
                ArtifactError,
                DeploymentNotFoundError,
                NotADeployedRunError,
                NotFoundError,
                ValueError,
            ) as exc:
                code = getattr(exc, "code", "")
                coded = code in {"artifact_in_use", "artifact_missing", "deployment_missing"}
                raise CliError(f"[{code}] {exc}" if coded else str(exc)) from None
        if as_json:
            emit_json(result)
        else:
            render(console, result, options.flags())
        if refused(result):
            raise typer.Exit(1)

    run_command(main)


def _read(file: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {file}: {exc.strerror or exc}") from None


@deploy_app.command("set", help="Save a deployment as its next revision and make it live.")
def set_deployment(
    file: Path, db: Db = None, session: Session = None, as_json: Json = False
) -> None:
    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.deployment_save(_read(file))
        return result

    run_service(
        db,
        session,
        work,
        lambda c, r, f: render_deployment(c, r, verb="saved"),
        as_json,
        writes=True,
    )


@deploy_app.command("list", help="The deployments by name: live revision and revision count.")
def list_deployments(
    query: Query = None,
    limit: Limit = None,
    cursor: Cursor = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.deployment_list(
            query=query, limit=limit, cursor=cursor
        )
        return result

    def render(console: Console, result: dict[str, Any], flags: list[str]) -> None:
        render_deployments(console, result)
        again = [*(["--query", query] if query else []), *([f"--limit={limit}"] if limit else [])]
        render_next(console, result, ["deploy", "list", *again, *flags])

    run_service(db, session, work, render, as_json)


@deploy_app.command("show", help="One revision of a deployment (default: the live one).")
def show(
    name: str,
    revision: Annotated[int | None, typer.Option("--revision", metavar="N")] = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.deployment_show(name, revision)
        return result

    run_service(db, session, work, lambda c, r, f: render_deployment(c, r), as_json)


@deploy_app.command(
    "rollback",
    help="Make an earlier revision live again (default: the one below the live revision). "
    "No revision is written; the next `set` numbers after the highest.",
)
def rollback(
    name: str,
    to: Annotated[
        int | None, typer.Option("--to", metavar="N", help="The revision to make live.")
    ] = None,
    expect: Annotated[
        int | None,
        typer.Option(
            "--expect",
            metavar="N",
            help="Only if revision N is live now (compare-and-swap). \\[default: what is "
            "live when the command reads it]",
            show_default=False,
        ),
    ] = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(service: Any) -> dict[str, Any]:
        live = expect
        if live is None:
            live = await service.deployments.live_revision(service.session.session_id, name)
            if live is None:
                live = 0  # nothing live: the store answers deployment_missing
        result: dict[str, Any] = await service.deployment_rollback(name, max(live, 1), to)
        return result

    run_service(
        db,
        session,
        work,
        lambda c, r, f: render_deployment(c, r, verb="live now:"),
        as_json,
        writes=True,
    )


@deploy_app.command(
    "delete",
    help="Delete a deployment and every revision; refused while an unfinished run uses it.",
)
def delete(name: str, db: Db = None, session: Session = None, as_json: Json = False) -> None:
    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.deployment_delete(name)
        return result

    run_service(db, session, work, lambda c, r, f: render_deleted(c, r), as_json, writes=True)


@deploy_app.command(
    "check",
    help="Validate the live revision's environment (sources, secrets, tools) as `run` "
    "would, without starting or writing. Exit code 0 when runnable, 1 when not.",
)
def check(
    name: str,
    revision: Annotated[int | None, typer.Option("--revision", metavar="N")] = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.deployment_check(name, revision)
        return result

    run_service(
        db,
        session,
        work,
        lambda c, r, f: render_check(c, r),
        as_json,
        progress=f"checking {name}...",
        refused=lambda r: r["status"] != "runnable",
    )


@deploy_app.command(
    "run", help="Validate the live revision's environment, pin it, and run the deployment."
)
def run(
    name: str,
    input: Annotated[
        str, typer.Option("--input", metavar="JSON", help="The input (JSON, @file or -).")
    ] = "{}",
    revision: Annotated[int | None, typer.Option("--revision", metavar="N")] = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    try:
        document = parse_json_option("--input", input)
    except CliError as exc:
        fail(str(exc))

    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.run_deployment(
            name, document, revision=revision, wait_seconds=600
        )
        return result

    run_service(
        db,
        session,
        work,
        render_deployed_run,
        as_json,
        progress=f"running {name}...",
        owner=True,
        refused=lambda r: r["status"] == "unrunnable",
    )


@deploy_app.command(
    "resume", help="Resume an interrupted deployed run after revalidating its pinned sources."
)
def resume(
    run_id: RunId,
    payload: Annotated[
        str | None, typer.Option("--payload", metavar="JSON", help="The resume payload.")
    ] = None,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    try:
        document = None if payload is None else parse_json_option("--payload", payload)
    except CliError as exc:
        fail(str(exc))

    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.resume_run(run_id, document, wait_seconds=600)
        return result

    run_service(
        db,
        session,
        work,
        render_deployed_run,
        as_json,
        progress=f"resuming {run_id}...",
        owner=True,
        refused=lambda r: r.get("resumed") is False,
    )


def inspect(
    run_id: RunId,
    revalidate: Annotated[
        bool,
        typer.Option(
            "--revalidate/--no-revalidate", help="Connect to the pinned sources to check them."
        ),
    ] = True,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.inspect_run(run_id, revalidate=revalidate)
        return result

    run_service(db, session, work, render_deployed_run, as_json)


def trace(
    run_id: RunId,
    start: Annotated[int, typer.Option("--start", metavar="N")] = 0,
    limit: Annotated[int, typer.Option("--limit", metavar="N")] = 50,
    db: Db = None,
    session: Session = None,
    as_json: Json = False,
) -> None:
    async def work(service: Any) -> dict[str, Any]:
        result: dict[str, Any] = await service.read_run_trace(run_id, start=start, limit=limit)
        return result

    run_service(db, session, work, render_trace, as_json)
