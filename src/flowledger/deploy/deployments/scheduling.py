"""`ScheduledStarts`: how the session's schedules start runs of its deployments.

The schedules (L2) cannot import this layer; `DeployService.serve_deployments` gives the
session this `DeploymentStarter`, and front doors that add schedules pass one. It applies
``run_deployment``'s rules to a firing:

* at ``schedule add``: the deployment must exist in the session (a tenant's session sees
  only its own deployments) and its live revision's input schema must accept the input;
* at each firing: the live revision then (or the one an earlier attempt of the same
  firing chose), the input checked against *that* revision's schema, the environment
  checked by `DeployService.check_before_start` (sources registered, visible, enabled,
  reachable; tools present and allowed), and the run pinned before its record exists.
  The check never has more power than the door that added the schedule: a schedule a
  tenant added (``inline_sources`` false) is checked with tenant access even when a
  worker, which has the operator's, fires it, so its firings never start an inline
  command line or URL (``inline_source_refused``).
  Anything that stops the start is a `DeploymentStartRefusedError` whose ``code`` is the
  first error diagnostic's (``deployment_missing``, ``source_disabled``, ...) or
  ``input_refused``.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Final

from ... import storage
from ...workflows.errors import InvalidInputError
from ...workflows.records.run import Run
from ...workflows.schedules import InvalidScheduleError, Schedules
from ...workflows.schedules.deployments import DeploymentStartRefusedError, PreparedStart
from ..artifacts.errors import ArtifactNotFoundError
from ..registry.access import SourceAccess
from .definition import version_of
from .store import DeploymentNotFoundError

if TYPE_CHECKING:
    from ...workflows.runtime.session import WorkflowSession
    from ...workflows.schedules import ScheduleLoop
    from .service import DeployService

__all__ = ["INPUT_REFUSED", "ScheduledStarts", "deployment_schedules"]

#: The firing's failure code when the chosen revision's input schema refuses the input.
INPUT_REFUSED: Final = "input_refused"


class ScheduledStarts:
    """The `DeploymentStarter` of one session, over its `DeployService` (whose source
    access - operator or tenant - applies to every check)."""

    def __init__(self, service: DeployService) -> None:
        self.service = service
        self.inline_sources = service.sources.access.inline
        self._tenant: DeployService | None = None

    def _checker(self, inline_sources: bool) -> DeployService:
        """The service whose source access a firing is checked with: this one, or a
        tenant's when this one may name inline sources and the schedule may not."""
        if inline_sources or not self.service.sources.access.inline:
            return self.service
        if self._tenant is None:
            from .service import DeployService

            self._tenant = DeployService(
                self.service.session,
                access=SourceAccess.TENANT,
                check_timeout=self.service.check_timeout,
            )
        return self._tenant

    async def check_schedule(self, deployment: str, canonical_input: bytes) -> None:
        service = self.service
        try:
            revision = await service.deployments.get(service.session.session_id, deployment)
            closure = await service.closure_of(revision)
        except (DeploymentNotFoundError, ValueError):
            raise InvalidScheduleError(
                "deployment", f"no deployment {deployment!r} in this session"
            ) from None
        except ArtifactNotFoundError as exc:
            raise InvalidScheduleError("deployment", f"deployment {deployment!r}: {exc}") from None
        if not self.inline_sources:
            inline = sorted(
                dependency
                for dependency, binding in revision.validated.bindings().items()
                if binding.registered is None
            )
            if inline:  # its firings would be refused (`prepare`): say so now
                raise InvalidScheduleError(
                    "deployment",
                    f"deployment {deployment!r} binds inline sources ({', '.join(inline)}), "
                    "which only the operator may start",
                )
        definition = service.definition_of_revision(revision, closure)
        try:
            definition.validate_input(canonical_input)
        except InvalidInputError as exc:
            # not quoted: the reason may repeat the document
            raise InvalidScheduleError(
                "input",
                f"the input schema of deployment {deployment} revision {revision.revision} "
                "refused it",
            ) from exc

    async def prepare(
        self,
        deployment: str,
        canonical_input: bytes,
        *,
        revision: int | None = None,
        inline_sources: bool = False,
    ) -> PreparedStart:
        service = self._checker(inline_sources)
        checked = await service.check_before_start(deployment, revision)
        if isinstance(checked, list):
            first = next(item for item in checked if item.severity == "error")
            raise DeploymentStartRefusedError(first.code, first.message)
        chosen, closure, _warnings, sources = checked
        definition = service.definition_of_revision(chosen, closure)
        try:
            definition.validate_input(canonical_input)
        except InvalidInputError:
            raise DeploymentStartRefusedError(
                INPUT_REFUSED,
                f"the input schema of deployment {deployment} revision {chosen.revision} "
                "refused the schedule's input",
            ) from None

        async def bind(record: Run) -> None:
            # an earlier or racing attempt of this firing may have pinned it: its pin
            # names the same revision (the firing record chose it), so it stands
            if await service.pins.read(record.graph_run_id) is None:
                with contextlib.suppress(storage.LedgerConflictError):
                    await service.pin_run(record, chosen, closure, sources)
            pinned = await service.pins.read(record.graph_run_id)
            if pinned is None or pinned.deployment.get("revision") != chosen.revision:
                raise storage.CorruptDataError(
                    f"pin of graph run {record.graph_run_id}",
                    f"does not name deployment {deployment} revision {chosen.revision}",
                )

        return PreparedStart(chosen.revision, version_of(chosen.revision), bind)


def deployment_schedules(
    session: WorkflowSession,
    *,
    access: SourceAccess = SourceAccess.OPERATOR,
    loop: ScheduleLoop | None = None,
) -> Schedules:
    """The session's `Schedules`, able to target its deployments (checked and started
    with ``access``): what a front door (the CLI, an MCP server) serves."""
    from .service import DeployService

    starter = ScheduledStarts(DeployService(session, access=access))
    return Schedules(session, loop=loop, deployments=starter)
