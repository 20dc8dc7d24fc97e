"""The dashboard's queues panel (on the Schedules page): each limit the session is
subject to, with its running and queued counts, and each call rate limit of a source
the session may use, with the calls in its window. Read-only: limits are the
operator's (``flowledger limits``).

What a tenant sees is what concerns its own runs: limits of the definitions in its
catalog (their counts include other sessions' runs, as a queued run's position does),
of its own deployments (``deployment/<session>/<name>``), its own session's limit, and
the sources the registry lets it see. Other sessions'
limits, and sources it may not use, are not shown."""

from __future__ import annotations

from typing import Any

from ..deploy.registry.rates import RateLimits
from ..deploy.registry.store import SourceRegistry
from ..workflows.admission import Limits, occupancy
from .sessions import Served

__all__ = ["queue_rows", "rate_rows"]


async def queue_rows(served: Served) -> list[dict[str, Any]]:
    """The ``max_running`` limits that concern ``served``'s session, with occupancy."""
    session = served.session
    kv = session.registry.kv
    names = {item.name for item in session.catalog.list()}
    rows: list[dict[str, Any]] = []
    for kind, name, limit in await Limits(kv).all():
        if (
            (kind == "definition" and name in names)
            or (kind == "deployment" and name.startswith(f"{session.session_id}/"))
            or (kind == "session" and name == session.session_id)
        ):
            found = await occupancy(kv, session.registry, f"{kind}/{name}", limit)
            rows.append({"kind": kind, "name": name, **found.to_json()})
    return rows


async def rate_rows(served: Served) -> list[dict[str, Any]]:
    """The call rate limits of the registered sources ``served``'s session may see."""
    registry = SourceRegistry(served.session.registry.kv)
    rates = RateLimits(registry)
    rows: list[dict[str, Any]] = []
    for name, rate in await rates.all():
        try:
            registered = await registry.get(name)
        except LookupError:
            continue  # removed since its limit was set
        if not registered.source.visible_to(served.session_id):
            continue
        rows.append({"source": name, **rate.to_json(), "in_window": await rates.in_window(name)})
    return rows
