"""How a schedule starts a run of a deployment, without importing the deploy layer.

Deployments live in the deploy layer (L3), above schedules (L2). A process that serves
deployments gives its session a `DeploymentStarter` (`DeployService.serve_deployments`
does, and the front doors that add schedules pass one to `Schedules`); schedules call
it:

* when a schedule is added: `check_schedule` - the deployment exists in the session and
  its live revision's input schema accepts the input (else `InvalidScheduleError` naming
  ``deployment`` or ``input``);
* when a slot fires: `prepare` - the deployment's live revision at firing time (or,
  when an earlier attempt of the same firing chose one, that revision), the input checked
  again against that revision's schema, the environment checked as ``run_deployment``
  checks it - with no more power over sources than the door that added the schedule had
  (``inline_sources``). What it returns pins the new run (`PreparedStart.bind`, called with the run
  record before the record is created, like ``run_deployment``'s pin). A refusal is a
  `DeploymentStartRefusedError` with a stable ``code`` (``deployment_missing``,
  ``input_refused``, or the first error diagnostic's code, e.g. ``source_disabled``):
  the firing records it and no run is created.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ..errors import WorkflowError
from ..records.run import Run

__all__ = [
    "DeploymentStartRefusedError",
    "DeploymentStarter",
    "DeploymentsNotServedError",
    "PreparedStart",
]


class DeploymentStartRefusedError(WorkflowError):
    """A deployment's run could not be started for a firing; ``code`` is stable."""

    def __init__(self, code: str, reason: str) -> None:
        self.code = code
        self.reason = reason
        super().__init__(f"{code}: {reason}")


class DeploymentsNotServedError(WorkflowError):
    """This process cannot start deployments (nothing gave the session a starter): the
    slot is left for an owner that can."""

    def __init__(self, schedule_id: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(
            f"schedule {schedule_id} targets a deployment, and this process does not "
            "serve deployments"
        )


@dataclass(frozen=True, slots=True)
class PreparedStart:
    """What a firing needs to create a deployment's run: the definition version of the
    chosen revision, and ``bind``, which pins the run (given its record, before the
    record is created; pinning the same run again is a no-op)."""

    revision: int
    definition_version: str
    bind: Callable[[Run], Awaitable[None]]


class DeploymentStarter(Protocol):
    #: Whether the door this starter serves may name inline sources (command lines,
    #: URLs): an operator's door. A schedule remembers it (`Schedule.inline_sources`),
    #: so an owner with more power (a worker) fires a tenant's schedule as the tenant.
    inline_sources: bool

    async def check_schedule(self, deployment: str, canonical_input: bytes) -> None: ...

    async def prepare(
        self,
        deployment: str,
        canonical_input: bytes,
        *,
        revision: int | None = None,
        inline_sources: bool = False,
    ) -> PreparedStart: ...
