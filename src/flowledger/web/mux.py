"""One live stream per browser: the page streams of all its tabs, multiplexed.

Over HTTP/1.1 a browser holds at most six connections per host, so with a stream per
tab the seventh dashboard tab never loaded. The page script opens its stream through
one shared worker per browser (``static/live-worker.js``), which holds a single
``GET /events?sub=ADDRESS&sub=ADDRESS...`` for every tab and hands each tab its events.

Each ``sub`` is the address of a page stream, as a page names it (``/events/runs?...``
or ``/events/runs/{id}?after=...``), its cursor in the query (the worker moves it on
with each event, so a reconnect reads on from exactly there). The stream sends each
part's events under their own names with data ``{"sub": i, "id": ID, "data": DATA}``
(``i`` the part's position among the ``sub`` parameters, ``ID`` the part's SSE ID or
null). A part the page stream would refuse (a malformed address, no such run, including
another session's) is sent once as event ``refused`` (``{"sub": i, "status", "message"}``)
and the other parts go on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Final

from ..workflows.activities.activity import ActivityRecord
from .live import Message

__all__ = ["MAX_PARTS", "Part", "Refused", "Streams"]

MAX_PARTS: Final = 20  # page streams in one stream; the worker opens another for more


@dataclass(frozen=True)
class Part:
    """One page stream: what it sends each wake, and which live activities wake it."""

    produce: Callable[[], AsyncIterator[Message]]
    match: Callable[[ActivityRecord], bool]


@dataclass(frozen=True)
class Refused:
    """A page stream the server refused, with the status and message its own address
    would have answered."""

    status: int
    message: str


class Streams:
    """The parts of one multiplexed stream: each wake sends what every part sends,
    tagged with its position; the refusals once, first."""

    def __init__(self, parts: Sequence[Part | Refused]) -> None:
        self._parts = list(parts)
        self._live = [(i, p) for i, p in enumerate(self._parts) if isinstance(p, Part)]
        self._told = False

    def match(self, record: ActivityRecord) -> bool:
        return any(part.match(record) for _, part in self._live)

    async def __call__(self) -> AsyncIterator[Message]:
        if not self._told:
            self._told = True
            for i, part in enumerate(self._parts):
                if isinstance(part, Refused):
                    data = {"sub": i, "status": part.status, "message": part.message}
                    yield Message("refused", data)
        for i, part in self._live:
            async for message in part.produce():
                yield Message(message.event, {"sub": i, "id": message.id, "data": message.data})
