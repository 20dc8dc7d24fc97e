"""What the two live streams send each time they wake (`live.stream` says when).

Both read from the durable journal and registry, never from what woke them, so a stream
that reconnects with its last event ID picks up exactly where it was.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, Final

from starlette.responses import StreamingResponse

from ..tools.results import run_result
from ..workflows.activities.activity import ActivityRecord
from ..workflows.errors import NotFoundError
from ..workflows.records.run import Run, RunStatus
from .live import Message, OpenStreams, Wake, stream
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
# New runs are looked for newest first in pages of 1, 2, 4, ... up to 100 runs (each run
# of a page is read), so a wake with nothing new reads one run; at most 5,000 runs a wake.
_NEW_PAGE: Final = 100
_NEW_RUNS: Final = 5000


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

    async def __call__(self) -> AsyncIterator[Message]:
        tools = self._served.tools
        fresh = await all_history(tools, self._run_id, self._cursor)
        for entry in fresh:
            self._cursor = Cursor.after(entry)
            yield Message("activity", {"html": self._entry_html(entry)}, self._cursor.text())
        run = await get_run(tools, self._run_id)
        signature = pretty_json(run)
        if fresh or signature != self._last:
            self._last = signature
            entries = await recent_history(tools, run)
            yield Message("run", await self._run_event(run, entries))


class RowEvents:
    """The runs table: each run updated after the mark (an ``updated_at``), if it matches
    the filter (event ``row``, its ID the latest ``updated_at`` sent).

    The first wake reads the session's runs whole (up to `views.MAX_RUNS`), as the table
    does. Later wakes read only the runs that can have changed since: the unfinished ones
    (the registry's unfinished-run index, one listing), the ones that were unfinished at
    the previous wake (to send the row of a run that finished), and the runs created
    since the newest one seen (the newest-first run order index, read down to it). A
    terminal run never changes status, so the rest stay as they were. Where the index is
    not complete yet (a session older than it), every wake reads the runs whole.
    Runs read off the registry are sent as ``workflow_run_list`` sends them (`run_result`):
    nothing beyond a tool result reaches the table.
    """

    def __init__(
        self,
        served: Served,
        chosen: RunFilter,
        since: str,
        *,
        row_html: Callable[[dict[str, Any]], Awaitable[str | None]],
    ) -> None:
        self._served = served
        self._filter = chosen
        self._mark = since
        self._moment = moment(since)
        self._row_html = row_html
        self._watch: set[str] | None = None  # the runs unfinished at the last wake
        self._newest: datetime | None = None  # the latest ``created_at`` seen
        self._at_newest: set[str] = set()  # the runs created at exactly that moment

    async def __call__(self) -> AsyncIterator[Message]:
        runs = await self._candidates()
        changed = sorted(
            (run for run in runs if moment(run["updated_at"]) > self._moment),
            key=lambda run: (moment(run["updated_at"]), moment(run["created_at"])),
        )
        for run in changed:
            self._mark, self._moment = str(run["updated_at"]), moment(run["updated_at"])
            if self._filter.matches(run):
                html = await self._row_html(run)
                if html is not None:  # None: the row fails a filter the run alone does not say
                    yield Message("row", {"run_id": run["run_id"], "html": html}, self._mark)

    async def _candidates(self) -> list[dict[str, Any]]:
        session = self._served.session
        index = session.registry.index
        if self._watch is None or index is None or not await index.complete(session.session_id):
            runs = await all_runs(self._served.tools)
            self._watch = {r["run_id"] for r in runs if r["run_status"] in _OPEN}
            for run in runs:
                self._saw_created(moment(run["created_at"]), str(run["run_id"]))
            return runs
        found = await self._created()
        wanted = (set(await index.runs(session.session_id)) | self._watch) - found.keys()
        for run_id in sorted(wanted):
            try:
                found[run_id] = await session.registry.get(session.session_id, run_id)
            except NotFoundError:
                continue  # pruned, or an index entry whose record never came
        self._watch = {run.id for run in found.values() if not run.status.terminal}
        return [run_result(run) for run in found.values()]

    async def _created(self) -> dict[str, Run]:
        """The runs created since the newest one seen, newest first off the order index."""
        session = self._served.session
        found: dict[str, Run] = {}
        cursor = ""
        newest, known = self._newest, set(self._at_newest)
        size = 1
        while len(found) < _NEW_RUNS:
            page = await session.registry.list_newest(session.session_id, cursor=cursor, limit=size)
            size = min(size * 2, _NEW_PAGE)
            for run in page.runs:
                if newest is not None and (
                    run.created_at < newest or (run.created_at == newest and run.id in known)
                ):
                    return found
                found[run.id] = run
                self._saw_created(run.created_at, run.id)
            if not page.next:
                break
            cursor = page.next
        return found

    def _saw_created(self, created: datetime, run_id: str) -> None:
        if self._newest is None or created > self._newest:
            self._newest, self._at_newest = created, {run_id}
        elif created == self._newest:
            self._at_newest.add(run_id)


_OPEN: Final = frozenset(str(status) for status in RunStatus if not status.terminal)


def event_stream(
    served: Served,
    produce: Callable[[], AsyncIterator[Message]],
    match: Callable[[ActivityRecord], bool],
    headers: Mapping[str, str],
    streams: OpenStreams,
) -> StreamingResponse:
    """The SSE response: ``produce`` each time a live activity ``match`` accepts arrives."""
    wake = Wake(served.session.journal, served.session_id, match)
    return StreamingResponse(stream(produce, wake, streams), media_type=_MEDIA, headers=headers)
