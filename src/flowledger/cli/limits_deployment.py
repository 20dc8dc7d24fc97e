"""The scope of ``flowledger limits set|clear --deployment NAME [--session UUID]``.

A deployment belongs to one session: ``--session`` names it, the database's default
session (the one ``flowledger deploy`` uses) otherwise. Setting a limit on a deployment
that does not exist is a usage error naming ``--deployment`` (a typo would otherwise
limit nothing, silently); clearing one is allowed after the deployment was deleted.
"""

from __future__ import annotations

from typing import Any

import typer

from ..storage import Store

__all__ = ["deployment_scope"]


async def deployment_scope(
    store: Store, deployment: str, session: str | None, *, existing: bool = True
) -> tuple[Any, str]:
    from ..deploy.deployments.store import DeploymentStore
    from ..workflows.admission import deployment_scope_name
    from ..workflows.authoring.metadata import NAME_PATTERN
    from ..workflows.records.run import is_id
    from ..workflows.runtime.session import default_session_id

    if NAME_PATTERN.fullmatch(deployment) is None:
        raise typer.BadParameter(
            f"{deployment!r} is not a deployment name", param_hint="--deployment"
        )
    if session is None:
        session = await default_session_id(store)
    elif not is_id(session):
        raise typer.BadParameter("not a session UUID", param_hint="--session")
    if existing and not await DeploymentStore.over(store).revisions(session, deployment):
        raise typer.BadParameter(
            f"no deployment {deployment!r} in session {session}", param_hint="--deployment"
        )
    return "deployment", deployment_scope_name(session, deployment)
