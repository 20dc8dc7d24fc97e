"""``flowledger prune``: delete finished runs older than a duration, with all their data;
``flowledger backfill-refs``: let an upgraded database's attachments be swept at all.

Prune opens the store itself (no catalog is needed: nothing is executed) and runs one
`flowledger.workflows.retention.pruning.prune` pass over the session, with the deploy layer's
per-run logs. ``--dry-run`` opens the store read-only and writes nothing. The table and
``--json`` show the same report. A database written before attachment references were
kept sweeps no attachment until ``backfill-refs`` (`flowledger.deploy.backfill_refs`) has
registered its logs' references, once, after every process writing to it was upgraded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .runtime import CliError, DbOption, Options, emit_json, run_command, stdout_console

if TYPE_CHECKING:  # the library is imported when a command runs (`flowledger` starts fast)
    from ..workflows.retention.pruning import PruneReport

__all__ = ["register_prune"]


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"


def render_report(console: Console, report: PruneReport) -> None:
    doc: dict[str, Any] = report.to_json()
    verb = "would delete" if report.dry_run else "deleted"
    console.print(
        Text.assemble(
            ("prune of session ", "dim"),
            (report.session_id, "bold"),
            (f": runs finished before {doc['cutoff']}", "dim"),
        ),
        soft_wrap=True,
    )
    table = Table(show_edge=False)
    table.add_column("what")
    table.add_column(verb, justify="right")
    table.add_column("bytes", justify="right")
    runs = doc["runs"]
    for status in ("completed", "cancelled", "failed"):
        if status in report.policy.statuses:
            table.add_row(f"runs {status}", str(runs[status]), "")
    deleted, size = doc["deleted"], doc["bytes"]
    table.add_row("run records", str(deleted["records"]), _size(size["records"]))
    table.add_row("other keys", str(deleted["kv_keys"]), _size(size["kv_keys"]))
    table.add_row("logs", str(deleted["logs"]), _size(size["logs"]))
    table.add_row("input blobs", str(deleted["input_blobs"]), _size(size["input_blobs"]))
    if deleted["leftover_runs"] or deleted["leftover_keys"]:
        table.add_row(
            "leftovers of earlier passes",
            f"{deleted['leftover_runs']} run(s), {deleted['leftover_keys']} key(s)",
            "",
        )
    table.add_row(Text("total", style="bold"), "", Text(_size(size["total"]), style="bold"))
    console.print(table)
    kept = {reason: count for reason, count in doc["kept"].items() if count}
    if kept:
        console.print(
            Text("kept: ", style="dim")
            + Text(", ".join(f"{count} {reason}" for reason, count in kept.items()))
        )
    console.print(Text(report.attachments_note(), style="dim"))
    if report.dry_run:
        console.print(Text("dry run: nothing was written", style="dim"))


def prune_command(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            help="Prune runs that finished longer ago than this: 30d, 12h, 90m, 1d12h.",
        ),
    ],
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            metavar="LIST",
            help="Only runs with these statuses (comma-separated). "
            "\\[default: completed,cancelled,failed]",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be deleted; write nothing.")
    ] = False,
    db: DbOption = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            metavar="UUID",
            help="Session to prune. \\[default: the database's default session]",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON (for scripts).")
    ] = False,
) -> None:
    """Delete finished runs older than --older-than and everything they left behind.

    Never a pending, running or interrupted run, one with a resume or cancel request,
    or one a remaining fork or child run refers to."""
    from ..workflows.records.run import is_id

    options = Options(db, None, session)
    if session is not None and not is_id(session):
        raise typer.BadParameter(f"{session!r} is not a UUID", param_hint="--session")

    async def work() -> None:
        from ..deploy.runs.retention import deployed_run_logs
        from ..storage import open_store
        from ..workflows.retention.pruning import RetentionPolicy, prune
        from ..workflows.runtime.session import default_session_id

        try:
            policy = RetentionPolicy.parse(older_than, status)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        async with open_store(options.url, read_only=dry_run) as store:
            sid = session or await default_session_id(store)
            report = await prune(store, sid, policy, dry_run=dry_run, run_logs=(deployed_run_logs,))
        if json_output:
            emit_json(report.to_json())
        else:
            render_report(stdout_console(), report)

    run_command(work)


def backfill_refs_command(
    db: DbOption = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON (for scripts).")
    ] = False,
) -> None:
    """Register an upgraded database's attachment references, so that prune can sweep.

    Reads which attachments the checkpoint and pin logs written before references were
    kept refer to, and records them. Run it once after upgrading, when every process
    writing to the database runs this version; it may run while runs go on, and running
    it again is harmless."""
    options = Options(db, None, None)

    async def work() -> None:
        from ..deploy.refs import backfill_refs
        from ..storage import open_store

        async with open_store(options.url) as store:
            logs = await backfill_refs(store)
        if json_output:
            emit_json({"logs": logs, "refs_complete": True})
            return
        stdout_console().print(
            f"registered the attachment references of {logs} log(s); "
            "prune now sweeps the attachments nothing refers to"
        )

    run_command(work)


def register_prune(app: typer.Typer) -> None:
    app.command("prune")(prune_command)
    app.command("backfill-refs")(backfill_refs_command)
