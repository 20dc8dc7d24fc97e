"""``flowledger check``: is the database damaged, where, and which runs does it touch.

Opens the database read-only (it writes nothing, and works while other processes use it)
and runs `flowledger.deploy.audit_store`: the engine's own check (SQLite ``PRAGMA
integrity_check``; PostgreSQL amcheck where the extension is installed), every stored
value's checksum, every run's records decoded and held against each other, and the
deploy layer's records. Prints a table, or with ``--json`` the report as one line; exit
code 0 when nothing is damaged, 1 when something is (or the database cannot be read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

from .runtime import DbOption, Options, emit_json, run_command, stdout_console

if TYPE_CHECKING:  # the audit is imported when the command runs (`flowledger` starts fast)
    from ..workflows.audit import AuditReport

__all__ = ["register_check"]


def render_report(console: Console, url: str, report: AuditReport) -> None:
    from ..storage.store import redact_url

    database = report.database
    verdict = "ok" if database.ok else f"{len(database.problems)} problem(s)"
    console.print(
        Text.assemble(
            ("database ", "dim"),
            (redact_url(url), "bold"),
            (f"  {database.method}: ", "dim"),
            (verdict, "green" if database.ok else "bold red"),
        ),
        soft_wrap=True,
    )
    if database.note:
        console.print(Text(f"note: {database.note}", style="yellow"), soft_wrap=True)
    checked = ", ".join(f"{count} {what}" for what, count in report.checked.items())
    console.print(Text(f"read: {checked or 'nothing stored'}", style="dim"), soft_wrap=True)
    if report.ok:
        console.print(Text("no damage found", style="bold green"))
        return
    # One block per damage, not a table: keys and log names are long, and a table folds
    # them mid-word at any width.
    for item in report.damage:
        console.print(
            Text.assemble((f"{item.place:<10} ", "bold red"), (item.name, "bold")),
            soft_wrap=True,
        )
        console.print(Text(f"{'':<10} {item.problem}"), soft_wrap=True)
        if item.runs:
            console.print(
                Text(f"{'':<10} runs: {', '.join(item.runs)}", style="dim"), soft_wrap=True
            )
    more = f" (and {report.more} more not listed)" if report.more else ""
    runs = ", ".join(report.runs) if report.runs else "none named"
    console.print(
        Text.assemble(
            (f"damaged: {len(report.damage)} item(s){more}; ", "bold red"),
            ("runs touched: ", "dim"),
            runs,
        ),
        soft_wrap=True,
    )


def check_command(
    db: DbOption = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the report as one line of JSON (for scripts).")
    ] = False,
) -> None:
    """Check the database for damage and name the runs it touches (exit code 1 if any).

    Runs the database engine's own integrity check, reads every stored value (each
    checksum), decodes every run's records and holds them against each other, and
    checks saved artifacts, deployments and deployed runs' pins, traces and intents.
    Reads only."""
    options = Options(db, None, None)
    damaged = False

    async def work() -> None:
        from ..deploy.audit import audit_store
        from ..storage import open_store

        nonlocal damaged
        async with open_store(options.url, read_only=True) as store:
            report = await audit_store(store)
        damaged = not report.ok
        if json_output:
            emit_json(report.to_json())
        else:
            render_report(stdout_console(), options.url, report)

    run_command(work)
    if damaged:
        raise typer.Exit(1)


def register_check(app: typer.Typer) -> None:
    app.command("check")(check_command)
