"""``flowledger source migrate``: register deployments' inline sources and rebind the
deployments to them (`flowledger.deploy.deployments.migration`).

It opens the database itself (no session is owned: nothing executes); ``--dry-run``
opens it read-only and writes nothing. The summary (or ``--json``: the report) names
each source registered, widened or reused, each deployment rebound with its new
revision, and the unfinished runs that keep the inline sources they were pinned to.
Running it again finds nothing to migrate.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .runtime import CliError, DbOption, emit_json, run_command, stdout_console
from .source_render import render_migration

__all__ = ["migrate"]


def migrate(
    session: Annotated[
        list[str] | None,
        typer.Option(
            "--session",
            metavar="UUID",
            help="Only this session's deployments (repeatable). \\[default: every session]",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be done; write nothing.")
    ] = False,
    db: DbOption = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the report as one JSON document (for scripts).")
    ] = False,
) -> None:
    """Move deployments' inline sources (stdio/http bindings) into the registry: each
    distinct spec becomes a registered source visible to the sessions that used it, and
    each such deployment a new revision binding it by name. Started runs keep their pins."""
    from ..workflows.records.run import is_id

    for item in session or []:
        if not is_id(item):
            raise typer.BadParameter(f"{item!r} is not a lowercase UUID", param_hint="--session")

    async def work() -> None:
        from ..deploy import DeploymentConflictError, SourceError
        from ..deploy.deployments.migration import migrate_inline_sources
        from ..host import database_url
        from ..storage import open_store

        async with open_store(database_url(db), read_only=dry_run) as store:
            try:
                report = await migrate_inline_sources(store, session or None, dry_run=dry_run)
            except (SourceError, DeploymentConflictError) as exc:
                # what was written is consistent (sources before the deployments naming them)
                raise CliError(f"{exc}; run the migration again to finish it") from None
        if json_output:
            emit_json(report.to_json())
        else:
            render_migration(stdout_console(), report.to_json())

    run_command(work)
