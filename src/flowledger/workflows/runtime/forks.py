"""Forking a workflow run: a new run of the same definition version from any revision.

`fork_run` makes the fork in this order, checking everything before the first write so
that a refused fork writes nothing:

1. the origin's record (this session's: `NotFoundError` otherwise) and its definition,
   resolved by the origin's name and version. A caller that names a definition or
   version other than the origin's gets `InvalidForkError` (field ``definition``), as
   does a registered graph that is not the one the origin's checkpoints were written by.
2. the flow fork (`flow.Runner.fork` through ``TypedDefinition.fork``): revision 0 of a
   new graph run with the origin's state at that revision, patched. A revision that is
   not one of the origin's is `InvalidForkError` (field ``revision``); a patch that is
   not a JSON object of the state type's top-level fields with values of their types
   is `InvalidForkError` (field ``patch``, ``state_field`` naming the field). Where the
   fork continues and what it re-executes: `flow.fork`.
3. the fork marker, then the run record (`RunRegistry.create`, which writes the marker
   before the record): a ``pending`` run whose ``forked_from`` is
   ``{run_id, revision, checkpoint_digest}`` and whose input reference is the origin's.

With ``after`` the fork is made from the revision that ends the step ``revision`` is in,
when the origin reached it (`flow.fork.step_end`): what forking *after* a history entry
means, so the vertex whose completion the entry records is not run again. `plan_fork`
answers, writing nothing, what a fork would do: the revision it is made from, its first
step and every vertex it runs again (`flow.ForkPlan`).

The owner of the session then adopts the pending fork from its durable seed, exactly as
it adopts a pending run whose seed exists (`Supervisor.start`, or a worker's `poll` for
a front door): the fork is never *started* from its input.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from ... import flow
from ..errors import InvalidForkError
from ..records.run import ForkedFrom, Run, RunStatus
from .catalog import Catalog

__all__ = ["fork_run", "plan_fork"]


class _Registry(Protocol):
    async def get(self, session_id: str, run_id: str) -> Run: ...

    async def create(self, run: Run) -> Run: ...

    async def claim_fork(self, session_id: str, origin_run_id: str, fork_run_id: str) -> None: ...

    async def release_fork(self, session_id: str, origin_run_id: str, fork_run_id: str) -> None: ...


class _Forkable(Protocol):
    async def fork(
        self, graph_run_id: str, revision: int, patch: Any, *, run_id: str
    ) -> flow.ForkOrigin: ...

    async def fork_plan(
        self, graph_run_id: str, revision: int, *, after: bool
    ) -> flow.ForkPlan: ...


async def plan_fork(
    *,
    session_id: str,
    catalog: Catalog,
    registry: _Registry,
    origin_run_id: str,
    revision: int,
    after: bool,
) -> flow.ForkPlan:
    """What `fork_run` of ``origin_run_id`` at ``revision`` (with ``after``) would do;
    refused as it would be, for the origin and the revision; writes nothing."""
    origin = await registry.get(session_id, origin_run_id)
    definition = catalog.resolve(origin.definition_name, origin.definition_version)
    planner = getattr(definition, "fork_plan", None)
    if not callable(planner):
        raise InvalidForkError(
            "definition",
            f"{origin.definition_name} version {origin.definition_version} cannot be forked",
        )
    try:
        plan: flow.ForkPlan = await planner(origin.graph_run_id, revision, after=after)
    except BaseException as exc:
        refusal = _refusal(exc, origin, revision)
        if refusal is None:
            raise
        raise refusal from exc
    return plan


async def fork_run(
    *,
    session_id: str,
    catalog: Catalog,
    registry: _Registry,
    origin_run_id: str,
    revision: int,
    patch: dict[str, Any] | None,
    new_id: Callable[[], str],
    now: Callable[[], datetime],
    definition_name: str | None = None,
    definition_version: str | None = None,
    after: bool = False,
) -> Run:
    """Make a fork of ``origin_run_id`` at ``revision`` (with ``after``: at the end of
    its step; see the module docstring) and return its pending run record."""
    origin = await registry.get(session_id, origin_run_id)
    for given, actual, what in (
        (definition_name, origin.definition_name, "definition"),
        (definition_version, origin.definition_version, "definition version"),
    ):
        if given is not None and given != actual:
            raise InvalidForkError(
                "definition",
                f"run {origin.id} is a run of {origin.definition_name} version "
                f"{origin.definition_version}, not of {what} {given!r}: a fork continues "
                "its origin's definition version",
            )
    if patch is not None and not isinstance(patch, dict):
        raise InvalidForkError("patch", "the patch must be a JSON object of state fields")
    definition = catalog.resolve(origin.definition_name, origin.definition_version)
    forkable = getattr(definition, "fork", None)
    if not callable(forkable):
        raise InvalidForkError(
            "definition",
            f"{origin.definition_name} version {origin.definition_version} cannot be forked",
        )
    if after:
        revision = (
            await plan_fork(
                session_id=session_id,
                catalog=catalog,
                registry=registry,
                origin_run_id=origin_run_id,
                revision=revision,
                after=True,
            )
        ).revision
    fork_id, graph_run_id, execution_id = new_id(), new_id(), new_id()
    await registry.claim_fork(session_id, origin.id, fork_id)  # before anything else
    try:
        made = await _seed(forkable, origin, revision, patch, graph_run_id)
    except BaseException:
        await registry.release_fork(session_id, origin.id, fork_id)
        raise
    moment = now()
    record = Run(
        session_id=session_id,
        tool_execution_id=execution_id,
        definition_name=origin.definition_name,
        definition_version=origin.definition_version,
        id=fork_id,
        graph_run_id=graph_run_id,
        input=origin.input,
        ledger_locator=f"flow/runs/{graph_run_id}",
        created_at=moment,
        updated_at=moment,
        status=RunStatus.PENDING,
        artifact_session_id=session_id,
        artifact_run_id=fork_id,
        forked_from=ForkedFrom(origin.id, made.revision, made.checkpoint_digest),
    )
    return await registry.create(record)


async def _seed(
    forkable: Callable[..., Any], origin: Run, revision: int, patch: Any, graph_run_id: str
) -> flow.ForkOrigin:
    """Write the fork's revision 0; the flow layer's refusals become `InvalidForkError`."""
    try:
        made: flow.ForkOrigin = await forkable(
            origin.graph_run_id, revision, patch, run_id=graph_run_id
        )
        return made
    except BaseException as exc:
        refusal = _refusal(exc, origin, revision)
        if refusal is None:
            raise
        raise refusal from exc


def _refusal(exc: BaseException, origin: Run, revision: int) -> InvalidForkError | None:
    """The flow layer's refusal of a fork as an `InvalidForkError` (None: not one)."""
    if isinstance(exc, flow.ForkRevisionError):
        if exc.tip < 0:
            return InvalidForkError("revision", f"revision must be an integer, not {revision!r}")
        return InvalidForkError(
            "revision", f"run {origin.id} has revisions 0..{exc.tip}, not {revision!r}"
        )
    if isinstance(exc, flow.CheckpointNotFoundError):
        return InvalidForkError("revision", f"run {origin.id} has no checkpoints")
    if isinstance(exc, flow.StatePatchError):
        where = f"state field {exc.field!r}" if exc.field else "the patch"
        return InvalidForkError("patch", f"{where}: {exc.detail}", state_field=exc.field)
    if isinstance(
        exc, flow.GraphMismatchError | flow.GraphVersionMismatchError | flow.UnknownVertexError
    ):
        return InvalidForkError(
            "definition",
            f"the graph registered as {origin.definition_name} version "
            f"{origin.definition_version} is not the graph run {origin.id} was written by",
        )
    return None
