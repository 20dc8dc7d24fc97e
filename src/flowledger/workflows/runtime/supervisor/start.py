"""`Supervisor.start`: the background start of a pending run, and its `StartTicket`.

A fork (`records.forks`) is a pending run whose seed was written when it was made: `start`
adopts it from that checkpoint (`adoption`), never starts it from its input.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import ConflictError
from ...records.run import RunStatus
from .adoption import reconcile
from .seeding import start_with_seed
from .workers import Controller

if TYPE_CHECKING:
    from .owner import Supervisor


@dataclass(eq=False)
class StartTicket:
    """What `Supervisor.start` returns: ``seeded`` resolves once revision 0 is durable;
    ``failed`` resolves with the error if the run could not be started."""

    seeded: asyncio.Future[None]
    failed: asyncio.Future[BaseException]

    async def wait(self) -> None:
        """Return once seeded, or raise the start failure (bound it with `asyncio.timeout`)."""
        futures: set[asyncio.Future[Any]] = {self.seeded, self.failed}
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
        if not self.seeded.done():
            raise self.failed.result()

    def _seed(self) -> None:
        if not self.seeded.done():
            self.seeded.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if not self.failed.done() and not self.seeded.done():
            self.failed.set_result(error)


async def start_worker(
    sup: Supervisor, controller: Controller, run_id: str, ticket: StartTicket
) -> None:
    try:
        async with controller.lock:
            try:
                run = await sup.registry.get(sup._session_id, run_id)
                if run_id in sup._auto_started and run.status in (
                    RunStatus.RUNNING,
                    RunStatus.INTERRUPTED,
                    RunStatus.COMPLETED,
                    RunStatus.CANCELLED,
                ):
                    ticket._seed()  # `poll` started it first: its seed is durable
                    return
                if run.status is not RunStatus.PENDING:
                    raise ConflictError(sup._session_id, run_id, "run is not pending")
                definition = sup.catalog.resolve(run.definition_name, run.definition_version)
            except Exception as exc:
                ticket._fail(exc)
                return
            if run.forked_from is not None:
                # A fork's seed became durable when it was made: adopt it, never start
                # it; the ticket resolves once the adoption has made it running.
                try:
                    await reconcile(sup, controller, run_id, adopting=ticket._seed)
                except Exception as exc:
                    ticket._fail(exc)
                    raise
                ticket._fail(RuntimeError("the fork was not adopted"))
                return
            try:
                await start_with_seed(sup, controller, definition, run, ticket._seed)
            except Exception as exc:
                ticket._fail(exc)
                raise
            ticket._fail(RuntimeError("durable seed acknowledgement was not observed"))
    except asyncio.CancelledError:
        ticket._fail(RuntimeError("workflow supervisor ownership lost"))
        raise
