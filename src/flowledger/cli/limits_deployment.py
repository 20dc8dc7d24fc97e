"""The scope of ``flowledger limits set|clear --deployment NAME [--session UUID]``.

A deployment belongs to one session: ``--session`` names it, the database's default
session (the one ``flowledger deploy`` uses) otherwise. Setting a limit on a deployment
that does not exist is refused with a `DeploymentScopeError` naming ``--deployment`` (a
typo would otherwise limit nothing, silently); clearing one is allowed after the
deployment was deleted.
"""

from __future__ import annotations

from typing import Any

from ..storage import Store

__all__ = ["DeploymentScopeError", "deployment_scope"]


class DeploymentScopeError(LookupError):
    """``--deployment`` (or its ``--session``) names no deployment; ``option`` says which."""

    def __init__(self, option: str, reason: str) -> None:
        self.option = option
        super().__init__(f"{option}: {reason}")


async def deployment_scope(
    store: Store, deployment: str, session: str | None, *, existing: bool = True
) -> tuple[Any, str]:
    from ..deploy.deployments.store import DeploymentStore
    from ..workflows.admission import deployment_scope_name
    from ..workflows.authoring.metadata import NAME_PATTERN
    from ..workflows.records.run import is_id
    from ..workflows.runtime.session import default_session_id

    if NAME_PATTERN.fullmatch(deployment) is None:
        raise DeploymentScopeError("--deployment", f"{deployment!r} is not a deployment name")
    if session is None:
        session = await default_session_id(store)
    elif not is_id(session):
        raise DeploymentScopeError("--session", f"{session!r} is not a session UUID")
    if existing and not await DeploymentStore.over(store).revisions(session, deployment):
        raise DeploymentScopeError(
            "--deployment", f"no deployment {deployment!r} in session {session}"
        )
    return "deployment", deployment_scope_name(session, deployment)
