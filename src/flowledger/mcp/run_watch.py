"""Subscriptions to run resources (``subscriptions/listen``, protocol 2026-07-28).

A client lists resource URIs in a listen request's filter; every URI must be a resource
this session has (a schema, or a run resource of one of its runs): otherwise the request
is refused with ``INVALID_PARAMS`` ("no resource", as a read), before the stream is
acknowledged, and nothing is watched. Limits per served session (documented in
docs/mcp.md), beyond which a listen request is refused with ``INVALID_REQUEST`` naming
the limit: `MAX_STREAMS` open listen streams, `MAX_URIS` URIs in one request,
`MAX_WATCHED_RUNS` distinct runs watched at once.

Each watched run has one `RunWatch` (shared by every stream that lists it) that follows
what the server already hears of the run - its activities live when the server executes
the session's runs, otherwise its durable journal (`JournalFollower`, a read every
0.1 s) - and, after each activity, reads the run's registry record. Activities are
published *before* the registry records the status they lead to, so after a status
activity the record is read again at the follower's interval until it shows that status
(at most `SETTLE_READS` reads). Whenever the record's revision has changed since the
last notification, ``notifications/resources/updated`` is published for the run's three
URIs (a stream delivers only the ones it listed), in order. A watch ends when the run is
finished (after notifying that) or when no stream lists it any more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Final, Protocol

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

from ..workflows.activities.activity import ActivityKind, ActivityRecord
from ..workflows.activities.follow import DEFAULT_INTERVAL, JournalFollower
from ..workflows.activities.journal import ActivityJournal
from ..workflows.records.run import Run
from .run_resources import parse_run_uri, run_uris

__all__ = [
    "MAX_STREAMS",
    "MAX_URIS",
    "MAX_WATCHED_RUNS",
    "SETTLE_READS",
    "RunListen",
    "RunWatch",
]

log = logging.getLogger(__name__)

MAX_STREAMS: Final = 32
MAX_URIS: Final = 64
MAX_WATCHED_RUNS: Final = 256
SETTLE_READS: Final = 100


class RunReader(Protocol):
    """What a watch needs of the run registry."""

    async def get(self, session_id: str, run_id: str) -> Run: ...


class _Source(Protocol):
    def close(self) -> None: ...

    def __aiter__(self) -> AsyncIterator[ActivityRecord]: ...


class RunWatch:
    """Publishes ``ResourceUpdated`` for one run's URIs on each change of its record."""

    def __init__(
        self,
        registry: RunReader,
        journal: ActivityJournal,
        session_id: str,
        run_id: str,
        publish: Callable[[str], Any],
        *,
        executes: bool,
    ) -> None:
        self._registry = registry
        self._journal = journal
        self._session_id = session_id
        self.run_id = run_id
        self._publish = publish
        self._executes = executes
        self._source: _Source | None = None
        self.users = 0
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start hearing the run, read its record, then follow it in a task: a change
        after `start` returns is notified (a finished run is not followed)."""
        # Listen first, then read: a change between the two is heard, not lost.
        if self._executes:
            self._source = self._journal.subscribe(self._session_id)
        else:
            self._source = await JournalFollower(
                self._journal, self._session_id, self.run_id
            ).start()
        try:
            run = await self._registry.get(self._session_id, self.run_id)
        except BaseException:
            self._source.close()
            raise
        if run.status.terminal:
            self._source.close()
            return
        self.task = asyncio.get_running_loop().create_task(self._run(run.revision))

    def stop(self) -> None:
        if self._source is not None:
            self._source.close()
        if self.task is not None:
            self.task.cancel()

    async def _run(self, last: int) -> None:
        try:
            await self._follow(last)
        except asyncio.CancelledError:
            raise
        except Exception:  # the database went away: the stream stays, without updates
            log.warning("watching run %s stopped", self.run_id, exc_info=True)
        finally:
            if self._source is not None:
                self._source.close()

    async def _follow(self, last: int) -> None:
        assert self._source is not None
        async for record in self._source:
            if record.run_id != self.run_id:
                continue
            run = await self._settled(record)
            if run.revision != last:
                last = run.revision
                for uri in run_uris(self.run_id):
                    await self._publish(uri)
            if run.status.terminal:
                return

    async def _settled(self, record: ActivityRecord) -> Run:
        """The record once it shows the status ``record`` leads to (bounded)."""
        run = await self._registry.get(self._session_id, self.run_id)
        if record.kind == ActivityKind.VERTEX_COMPLETED:
            return run
        for _ in range(SETTLE_READS):
            if str(run.status) == record.status:
                break
            await asyncio.sleep(DEFAULT_INTERVAL)
            run = await self._registry.get(self._session_id, self.run_id)
        return run


class RunListen:
    """Serves ``subscriptions/listen`` for one session: checks every URI (``check``
    raises `MCPError` for one that is no resource of the session), then the SDK's
    `ListenHandler` streams the events the watches publish on this session's bus."""

    def __init__(
        self,
        check: Callable[[str], Any],
        registry: RunReader,
        journal: ActivityJournal,
        session_id: str,
        *,
        executes: bool,
    ) -> None:
        self._check = check
        self._registry = registry
        self._journal = journal
        self._session_id = session_id
        self._executes = executes
        self.bus = InMemorySubscriptionBus()
        self._handler = ListenHandler(self.bus, max_subscriptions=MAX_STREAMS)
        self._streams = 0
        self.watches: dict[str, RunWatch] = {}

    async def _publish(self, uri: str) -> None:
        await self.bus.publish(ResourceUpdated(uri=uri))

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        uris = list(params.notifications.resource_subscriptions or ())
        if len(uris) > MAX_URIS:
            raise MCPError(
                types.INVALID_REQUEST,
                f"subscriptions/listen: {len(uris)} resource URIs, at most {MAX_URIS} a stream",
            )
        if self._streams >= MAX_STREAMS:
            raise MCPError(
                types.INVALID_REQUEST,
                f"subscriptions/listen: this session has {MAX_STREAMS} open streams, the limit",
            )
        for uri in uris:
            await self._check(uri)
        runs = {parsed.run_id for uri in uris if (parsed := parse_run_uri(uri)) is not None}
        new = runs - self.watches.keys()
        if len(self.watches) + len(new) > MAX_WATCHED_RUNS:
            raise MCPError(
                types.INVALID_REQUEST,
                f"subscriptions/listen: this session watches {len(self.watches)} runs; "
                f"{len(new)} more would pass the limit of {MAX_WATCHED_RUNS}",
            )
        self._streams += 1
        mine: list[RunWatch] = []
        try:
            for run_id in sorted(runs):
                mine.append(await self._acquire(run_id))
            return await self._handler(ctx, params)
        finally:
            self._streams -= 1
            for watch in mine:
                watch.users -= 1
                if not watch.users:
                    if self.watches.get(watch.run_id) is watch:
                        del self.watches[watch.run_id]
                    watch.stop()

    async def _acquire(self, run_id: str) -> RunWatch:
        watch = self.watches.get(run_id)
        if watch is not None:
            watch.users += 1
            return watch
        watch = self.watches[run_id] = RunWatch(
            self._registry,
            self._journal,
            self._session_id,
            run_id,
            self._publish,
            executes=self._executes,
        )
        watch.users += 1
        try:
            await watch.start()
        except Exception as exc:  # checked just before: the database went away
            watch.users -= 1
            if not watch.users:
                del self.watches[run_id]
            raise MCPError(
                types.INTERNAL_ERROR, f"subscriptions/listen: cannot watch run {run_id}"
            ) from exc
        return watch
