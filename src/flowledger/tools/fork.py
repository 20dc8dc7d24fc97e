"""``workflow_run_fork``: fork a run of this session from one of its revisions.

A bundle of its own beside the run tools of workflows-spec §7 (`WorkflowTools`, which
stay exactly the spec's), with the same conventions: JSON arguments in, a JSON result
out, `ToolError` on any failure, bound to one session, mutating (a read-only server
hides it).

Arguments: ``run_id`` (the origin), ``revision`` (a checkpoint revision of the origin,
0 up to its latest), ``patch`` (optional: a JSON object of top-level state fields) and,
optionally, ``definition_name`` / ``definition_version``, which must then be the
origin's; ``after`` (optional boolean: fork the revision that ends the step
``revision`` is in, when the origin reached it - what forking after a history entry
means, so the vertex it records does not run again); ``preview`` (optional boolean:
make nothing, return the plan: ``revision`` the fork would be made from, ``step`` it
runs first, ``first`` that step's vertices, ``again`` every vertex the origin executed
from that step on, which the fork runs again on the same path). The fork is made by
`workflows.runtime.forks.fork_run` (nothing is written when it is refused) and handed
to the session's control (a supervisor, or a front door whose worker executes it) like
a started run; the call returns the fork's run record, with
``forked_from``, once its owner has taken it up.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from flowledger.clock import Clock, system_clock
from flowledger.workflows.records.registry import RunRegistry
from flowledger.workflows.runtime.catalog import Catalog
from flowledger.workflows.runtime.forks import fork_run, plan_fork

from .arguments import ArgumentField, canonical_uuid, decode_arguments, new_uuid, parse_id
from .bundle import SupervisorPort, ToolInfo
from .errors import ToolError, translate
from .results import run_result

__all__ = ["FORK_TOOL", "ForkTools"]

FORK_TOOL: Final = "workflow_run_fork"
_DESCRIPTION: Final = (
    "Fork a run from one of its checkpoint revisions: a new run of the same definition "
    "version continues from the origin's state there (optionally patched: an object of "
    "top-level state fields). Steps after the fork point run again; after=true forks the "
    "end of the revision's step (its vertex does not run again); preview=true makes nothing "
    "and returns which revision the fork is made from and which vertices run again. "
    "Returns the new run."
)
_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "run_id": {"type": "string"},
        "revision": {"type": "integer"},
        "patch": {"type": "object"},
        "definition_name": {"type": "string"},
        "definition_version": {"type": "string"},
        "after": {"type": "boolean"},
        "preview": {"type": "boolean"},
    },
    "required": ["run_id", "revision"],
    "additionalProperties": False,
}
_FIELDS: Final = (
    ArgumentField("run_id", "string", required=True),
    ArgumentField("revision", "integer", required=True),
    ArgumentField("patch", "object"),
    ArgumentField("definition_name", "string"),
    ArgumentField("definition_version", "string"),
    ArgumentField("after", "boolean"),
    ArgumentField("preview", "boolean"),
)
DEFAULT_START_TIMEOUT: Final = 30.0


class ForkTools:
    """The ``workflow_run_fork`` tool of one session over its catalog, registry and
    control (``supervisor``: the session's `Supervisor`, or a `FrontDoor`)."""

    def __init__(
        self,
        session_id: str,
        *,
        catalog: Catalog,
        registry: RunRegistry,
        supervisor: SupervisorPort,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        new_id: Callable[[], str] = new_uuid,
        clock: Clock = system_clock,
    ) -> None:
        if canonical_uuid(session_id) != session_id:
            raise ValueError("fork tools: session ID must be a nonzero lowercase UUID")
        self._session_id = session_id
        self._catalog = catalog
        self._registry = registry
        self._supervisor = supervisor
        self._start_timeout = float(start_timeout)
        self._new_id = new_id
        self._clock = clock  # the session's: the fork's run record is stamped from it

    def infos(self) -> builtins.list[ToolInfo]:
        return [
            ToolInfo(
                name=FORK_TOOL,
                description=_DESCRIPTION,
                schema=copy.deepcopy(_SCHEMA),
                mutating=True,
            )
        ]

    async def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]:
        if name != FORK_TOOL:
            raise ToolError(f"unknown tool {name!r}")
        document = decode_arguments(arguments, _FIELDS)
        try:
            return await self._fork(document)
        except ToolError:
            raise
        except Exception as exc:
            raise translate(exc, action="fork run") from exc

    def _mint(self) -> str:
        value: object = self._new_id()
        if isinstance(value, uuid.UUID):
            value = str(value)
        minted = canonical_uuid(value)
        if minted is None:
            raise ToolError("mint run ID: the ID source returned a zero or malformed UUID")
        return minted

    async def _fork(self, arguments: dict[str, Any]) -> dict[str, Any]:
        action = "fork run"
        origin_id = parse_id("run_id", arguments["run_id"])
        if arguments.get("preview", False):
            return await self._plan(origin_id, arguments)
        try:
            fork = await fork_run(
                session_id=self._session_id,
                catalog=self._catalog,
                registry=self._registry,
                origin_run_id=origin_id,
                revision=arguments["revision"],
                patch=arguments.get("patch"),
                new_id=self._mint,
                now=self._clock.now,
                definition_name=arguments.get("definition_name"),
                definition_version=arguments.get("definition_version"),
                after=arguments.get("after", False),
            )
        except Exception as exc:
            raise translate(exc, action=action, run_id=origin_id) from exc
        try:
            ticket = await self._supervisor.start(fork.id)
            async with asyncio.timeout(self._start_timeout):
                await ticket.wait()
        except TimeoutError as exc:
            raise ToolError(
                f"run {fork.id} was forked, but no owner took it up within "
                f"{self._start_timeout:g}s; check it with workflow_run_get",
                cause=exc,
            ) from exc
        except Exception as exc:
            raise translate(exc, action=action, run_id=fork.id) from exc
        try:
            current = await self._registry.get(self._session_id, fork.id)
        except Exception as exc:
            raise translate(exc, action=action, run_id=fork.id) from exc
        return run_result(current)

    async def _plan(self, origin_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The preview: what the fork would do (`flow.ForkPlan`); nothing is written."""
        try:
            plan = await plan_fork(
                session_id=self._session_id,
                catalog=self._catalog,
                registry=self._registry,
                origin_run_id=origin_id,
                revision=arguments["revision"],
                after=arguments.get("after", False),
            )
        except Exception as exc:
            raise translate(exc, action="preview fork", run_id=origin_id) from exc
        return {
            "run_id": origin_id,
            "requested_revision": arguments["revision"],
            "revision": plan.revision,
            "step": plan.step,
            "first": list(plan.first),
            "again": list(plan.again),
        }
