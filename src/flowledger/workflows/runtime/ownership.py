"""Whether anyone executes a run right now: the session lease, read without holding it.

A pending or running run makes progress only while some process holds its session's
lease (``sessions/<session>/workflows/owner``): a ``start`` or ``resume`` in progress,
an MCP server, a worker. When that process exits, the run stays ``running`` (or
``pending``) with nobody executing it until the next owner opens the session and adopts
it. `run_owner` says which case a run is in, for ``workflow_run_get`` and ``runs show``:

* ``{"live": true, "lease_epoch": N, "until": T}`` - an owner holds the lease (until T
  unless it renews it, which a live owner does every third of its TTL);
* ``{"live": false, "since": T}`` - nobody does, since T: when the last owner's lease
  ended (released, or ran out after a crash), or when the run last changed if that is
  later or unknown.

Interrupted and terminal runs need no owner to stay correct, so they get no ``owner``.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ...storage import Leaser
from ..activities.activity import format_time
from ..records.run import Run, RunStatus, owner_lease_name

__all__ = ["OwnerReader", "left_message", "owner_reader", "run_owner"]

#: ``workflow_run_get``'s ``owner`` field of a run (None: the run has none).
OwnerReader = Callable[[Run], Awaitable[dict[str, Any] | None]]


async def run_owner(leases: Leaser, run: Run) -> dict[str, Any] | None:
    """The ``owner`` field of a pending or running ``run`` (None for other statuses)."""
    if run.status not in (RunStatus.PENDING, RunStatus.RUNNING):
        return None
    lease = await leases.status(owner_lease_name(run.session_id))
    if lease.held and lease.until is not None:
        return {"live": True, "lease_epoch": lease.epoch, "until": format_time(lease.until)}
    since = run.updated_at if lease.until is None else max(lease.until, run.updated_at)
    return {"live": False, "since": format_time(since)}


def owner_reader(leases: Leaser) -> OwnerReader:
    """`run_owner` bound to one store's leases (what `WorkflowTools` takes)."""

    async def read(run: Run) -> dict[str, Any] | None:
        return await run_owner(leases, run)

    return read


def left_message(run: Run, flags: Sequence[str] = ()) -> str:
    """The line an owner prints for a run it leaves unfinished as it exits, with the
    command that continues it (``flags``: the ``--db`` and friends to repeat)."""
    command = shlex.join(["flowledger", "resume", run.id, *flags])
    if run.status is RunStatus.PENDING:
        return (
            f"run {run.id} left pending (not started); it starts when any owner opens the "
            f"session ({command})"
        )
    return (
        f"run {run.id} left running at revision {run.checkpoint_revision}; it continues "
        f"when any owner opens the session ({command})"
    )
