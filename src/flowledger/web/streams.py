"""What the two live streams send each time they wake (`live.stream` says when).

Both read from the durable journal and registry, never from what woke them, so a stream
that reconnects with its last event ID picks up exactly where it was.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final

from starlette.responses import StreamingResponse

from ..workflows.activities.activity import ActivityRecord
from .live import Wake, sse, stream
from .sessions import Served
from .views import (
    Cursor,
    RunFilter,
    all_history,
    all_runs,
    get_run,
    moment,
    pretty_json,
    recent_history,
)

__all__ = ["RowEvents", "RunEvents", "event_stream"]

_MEDIA: Final = "text/event-stream"


class RunEvents:
    """One run: every history entry after the cursor, once (event ``activity``, its ID the
    cursor after it), then the run's state whenever it changed (event ``run``)."""

    def __init__(
        self,
        served: Served,
        run_id: str,
        cursor: Cursor,
        *,
        entry_html: Callable[[Mapping[str, Any]], str],
        run_event: Callable[[dict[str, Any], list[dict[str, Any]]], Awaitable[dict[str, Any]]],
    ) -> None:
        self._served = served
        self._run_id = run_id
        self._cursor = cursor
        self._entry_html = entry_html
        self._run_event = run_event
        self._last = ""

    async def __call__(self) -> AsyncIterator[str]:
        tools = self._served.tools
        fresh = await all_history(tools, self._run_id, self._cursor)
        for entry in fresh:
            self._cursor = Cursor.after(entry)
            yield sse("activity", {"html": self._entry_html(entry)}, event_id=self._cursor.text())
        run = await get_run(tools, self._run_id)
        signature = pretty_json(run)
        if fresh or signature != self._last:
            self._last = signature
            entries = await recent_history(tools, run)
            yield sse("run", await self._run_event(run, entries))


class RowEvents:
    """The runs table: each run updated after the mark (an ``updated_at``), if it matches
    the filter (event ``row``, its ID the latest ``updated_at`` sent)."""

    def __init__(
        self,
        served: Served,
        chosen: RunFilter,
        since: str,
        *,
        row_html: Callable[[dict[str, Any]], Awaitable[str]],
    ) -> None:
        self._served = served
        self._filter = chosen
        self._mark = since
        self._moment = moment(since)
        self._row_html = row_html

    async def __call__(self) -> AsyncIterator[str]:
        runs = await all_runs(self._served.tools)
        changed = sorted(
            (run for run in runs if moment(run["updated_at"]) > self._moment),
            key=lambda run: (moment(run["updated_at"]), moment(run["created_at"])),
        )
        for run in changed:
            self._mark, self._moment = str(run["updated_at"]), moment(run["updated_at"])
            if self._filter.matches(run):
                html = await self._row_html(run)
                yield sse("row", {"run_id": run["run_id"], "html": html}, event_id=self._mark)


def event_stream(
    served: Served,
    produce: Callable[[], AsyncIterator[str]],
    match: Callable[[ActivityRecord], bool],
    headers: Mapping[str, str],
) -> StreamingResponse:
    """The SSE response: ``produce`` each time a live activity ``match`` accepts arrives."""
    wake = Wake(served.session.journal, served.session_id, match)
    return StreamingResponse(stream(produce, wake), media_type=_MEDIA, headers=headers)
