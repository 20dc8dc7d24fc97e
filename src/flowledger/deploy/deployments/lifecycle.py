"""`Lifecycle`: deleting saved artifacts and deployments, refused while something still
needs them, and rolling a deployment back.

What keeps what (every check reads the session's own records; another session's names
are simply not found):

* an artifact version is kept by a parent artifact that pins it as a child, and by a
  deployment any of whose revisions runs it: every revision, not only the live one,
  because `rollback` can make any earlier revision live again and a revision's artifact
  must exist for that. A run is kept through its deployment (below), so the artifact
  and children its pin names stay too;
* a deployment is kept by its unfinished runs (pending, running or interrupted): their
  definitions are compiled from its revisions. Finished runs keep their records and
  pins; their deployment may go (`DeployService` then compiles such a run from the
  snapshots its pin holds, so it can still be inspected and traced).

A refusal is a typed error with a code naming the referrers: `ArtifactInUseError`
(``artifact_in_use``) or `DeploymentInUseError` (``deployment_in_use``); nothing is
written. A deployment reference left on an artifact by a deployment that no longer has
a revision running it (a crash in the middle of a deployment's delete) is stale and
cleared by the artifact's delete.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ...workflows.records.registry import RunRegistry
from ...workflows.records.run import MAX_RUN_PAGE_SIZE
from ..artifacts.errors import ArtifactInUseError
from ..artifacts.store import MAX_LISTED_REFERRERS, ArtifactStore, Referrer
from .definition import revision_of
from .store import DeploymentNotFoundError, DeploymentStore

__all__ = ["DeploymentInUseError", "Lifecycle"]

_RUN_PAGE: Final = MAX_RUN_PAGE_SIZE
_ATTEMPTS: Final = 4  # a reference arriving between the check and the delete: look again


class DeploymentInUseError(Exception):
    """A deployment's delete refused while unfinished runs use it (``runs``: their ids,
    at most `MAX_LISTED_REFERRERS`; ``more``: whether there are others)."""

    code = "deployment_in_use"

    def __init__(self, name: str, runs: Sequence[str], more: bool) -> None:
        self.name = name
        self.runs = tuple(runs)
        shown = ", ".join(f"run {run}" for run in self.runs) + (", ..." if more else "")
        super().__init__(
            f"deployment {name!r} is still used by unfinished runs: {shown} "
            "(cancel them or let them finish first)"
        )


def _shown(referrer: Referrer) -> str:
    """A referrer as a person reads it: a parent artifact as ``name@version``."""
    if referrer.kind == "artifact":
        name, _, rest = referrer.id.partition(".")
        version = rest.rpartition(".")[0]
        return f"artifact {name}@{version}"
    return f"{referrer.kind} {referrer.id}"


class Lifecycle:
    """Deleting and rolling back within one session."""

    def __init__(
        self,
        session_id: str,
        artifacts: ArtifactStore,
        deployments: DeploymentStore,
        runs: RunRegistry,
    ) -> None:
        self.session_id = session_id
        self.artifacts = artifacts
        self.deployments = deployments
        self.runs = runs

    async def unfinished_runs(self, name: str) -> list[str]:
        """The ids of the unfinished deployed runs of deployment ``name``, newest first."""
        found: list[str] = []
        cursor = ""
        while True:
            page = await self.runs.list_newest(
                self.session_id, definition=name, cursor=cursor, limit=_RUN_PAGE
            )
            found.extend(
                run.id
                for run in page.runs
                if not run.status.terminal and revision_of(run.definition_version) is not None
            )
            if not page.next:
                return found
            cursor = page.next

    async def delete_deployment(self, name: str) -> dict[str, Any]:
        """Delete every revision of deployment ``name``: ``{name, deleted, revisions}``;
        `DeploymentInUseError` while unfinished runs use it, `DeploymentNotFoundError`
        when it does not exist (nothing written in either case)."""
        if not await self.deployments.revisions(
            self.session_id, name
        ) and not await self.deployments.live_revision(self.session_id, name):
            raise DeploymentNotFoundError(name)
        busy = await self.unfinished_runs(name)
        if busy:
            raise DeploymentInUseError(
                name, busy[:MAX_LISTED_REFERRERS], len(busy) > MAX_LISTED_REFERRERS
            )
        numbers = await self.deployments.delete(self.session_id, name)
        return {"name": name, "deleted": True, "revisions": numbers}

    async def _blocking(self, name: str, version: str) -> list[str]:
        """What keeps ``name@version`` (stale deployment references cleared)."""
        blocking: list[str] = []
        for referrer in await self.artifacts.references(self.session_id, name, version):
            if referrer.kind == "deployment":
                named = await self.deployments.artifacts_named(self.session_id, referrer.id)
                numbers = named.get((name, version))
                if not numbers:
                    await self.artifacts.remove_reference(self.session_id, name, version, referrer)
                    continue
                listed = ", ".join(str(number) for number in numbers)
                plural = "s" if len(numbers) > 1 else ""
                blocking.append(f"deployment {referrer.id} (revision{plural} {listed})")
            else:
                blocking.append(_shown(referrer))
        return blocking

    async def delete_artifact(self, name: str, version: str) -> dict[str, Any]:
        """Delete saved version ``name@version``: ``{name, version, digest, deleted}``;
        `ArtifactInUseError` naming what keeps it, `ArtifactNotFoundError` when it is not
        saved (nothing written in either case)."""
        record = await self.artifacts.record(self.session_id, name, version)
        for _ in range(_ATTEMPTS):
            blocking = await self._blocking(name, version)
            if blocking:
                raise ArtifactInUseError(
                    name,
                    version,
                    blocking[:MAX_LISTED_REFERRERS],
                    len(blocking) > MAX_LISTED_REFERRERS,
                )
            try:
                await self.artifacts.delete(self.session_id, name, version)
            except ArtifactInUseError:
                continue  # a reference arrived since: name it
            return {"name": name, "version": version, "digest": record.digest, "deleted": True}
        raise ArtifactInUseError(name, version, await self._blocking(name, version), False)

    async def rollback(self, name: str, live: int, to: int | None = None) -> dict[str, Any]:
        """Make revision ``to`` (default: the highest below ``live``) live again, if
        ``live`` is still the live revision (`DeploymentConflictError` otherwise);
        the revision now live, with ``previous`` (the one it replaced)."""
        revision = await self.deployments.rollback(self.session_id, name, expected=live, to=to)
        answer = revision.to_json()
        answer["previous"] = live
        return answer
