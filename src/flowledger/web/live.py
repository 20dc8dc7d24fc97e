"""Server-Sent Events: the run page and the runs table, updated as the run moves.

What wakes a stream is the activity journal's live subscription of the session (the
runs this process executes, including those ``flowledger start --no-execute`` hands to
it), or, at the latest, `POLL_INTERVAL` seconds (a run another process executes
publishes into the same durable journal, which this process does not hear live).
What a stream *sends* is always read from the durable journal, from the client's
cursor on, so a subscription that dropped records loses nothing:

* a run stream sends each history entry once, as event ``activity`` with SSE ID
  ``<revision>:<event id>`` (the history cursor after it), then an ``run`` event with
  the refreshed header, pause panel and vertex states. A reconnecting browser sends
  its last ID as ``Last-Event-ID`` and the stream reads on from exactly there: no
  duplicates, no gaps.
* the runs stream sends event ``row`` for each run updated after the client's mark
  (its SSE ID is the latest ``updated_at`` sent), matching the page's filters.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final

from ..workflows.activities.activity import ActivityRecord
from ..workflows.activities.journal import ActivityJournal

__all__ = ["HEARTBEAT", "POLL_INTERVAL", "Message", "OpenStreams", "Wake", "sse", "stream"]

POLL_INTERVAL: Final = 1.0
HEARTBEAT: Final = 15.0  # seconds between comments that keep idle proxies from closing


@dataclass(frozen=True)
class Message:
    """One event a stream sends: its name, its data (JSON) and its SSE ID, if it has one
    (the cursor a reconnecting client sends back as ``Last-Event-ID``)."""

    event: str
    data: Any
    id: str | None = None


def sse(message: Message) -> str:
    """One SSE message (the data is compact JSON on one line)."""
    lines = []
    if message.id is not None:
        lines.append(f"id: {message.id}")
    lines.append(f"event: {message.event}")
    lines.append("data: " + json.dumps(message.data, separators=(",", ":"), ensure_ascii=False))
    return "\n".join(lines) + "\n\n"


class OpenStreams:
    """How many live streams this server holds open now (each one holds one HTTP
    connection of a browser: what the browser's per-host connection limit counts)."""

    def __init__(self) -> None:
        self.open = 0
        self.opened = 0  # since the server started


class Wake:
    """Set when the session's live activities include one ``match`` accepts."""

    def __init__(
        self, journal: ActivityJournal, session_id: str, match: Callable[[ActivityRecord], bool]
    ) -> None:
        self._subscription = journal.subscribe(session_id)
        self._match = match
        self._event = asyncio.Event()
        self._task = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        async for record in self._subscription:
            if self._match(record):
                self._event.set()

    async def wait(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), seconds)
        self._event.clear()

    async def close(self) -> None:
        self._subscription.close()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def stream(
    produce: Callable[[], AsyncIterator[Message]],
    wake: Wake,
    streams: OpenStreams,
    *,
    retry_ms: int = 1000,
) -> AsyncIterator[str]:
    """``retry``, then whatever ``produce`` yields each time the stream wakes (live or
    every `POLL_INTERVAL`), with a heartbeat comment when nothing was sent for a while.
    Ends when the client disconnects (the response cancels it); counted in ``streams``
    while it is open."""
    streams.open += 1
    streams.opened += 1
    try:
        yield f"retry: {retry_ms}\n\n"
        quiet = 0.0
        while True:
            sent = False
            async for message in produce():
                sent = True
                yield sse(message)
            quiet = 0.0 if sent else quiet + POLL_INTERVAL
            if quiet >= HEARTBEAT:
                quiet = 0.0
                yield ": keep-alive\n\n"
            await wake.wait(POLL_INTERVAL)
    finally:
        streams.open -= 1
        await wake.close()
