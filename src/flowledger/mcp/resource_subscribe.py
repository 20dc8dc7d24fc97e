"""``resources/subscribe`` and ``resources/unsubscribe``: run resource changes for
handshake-era clients (revisions through 2025-11-25; 2026-07-28 clients listen,
`flowledger.mcp.listen`).

A subscription belongs to the client's connection (an MCP session over HTTP, the pipe
over stdio). The URI must be a resource of this session, exactly as for a read: a
schema, or a run resource of one of its runs; anything else - another session's run
included - is refused with the read's "no resource" (``INVALID_PARAMS``) and watches
nothing. Subscribing twice is one subscription; unsubscribing a URI not subscribed is
acknowledged and changes nothing.

Each changed URI is sent as ``notifications/resources/updated`` on the connection's
standalone channel (the HTTP GET stream), in the order the session's shared `RunWatch`
publishes them (`flowledger.mcp.run_watch`). Updates not sent yet are kept once per URI
(a level trigger: the client re-reads), so what waits for a slow client is bounded by
its subscriptions.

Releasing: the SDK tells a handler of no disconnect, but every connection has an exit
stack that it unwinds when the connection ends (the client deletes its MCP session, the
session idles out, the pipe closes, the server stops). The first subscription of a
connection pushes its release there; unsubscribing releases a run's watch as soon as
none of the connection's URIs names the run. Bounds: `MAX_URIS` URIs per connection,
and the session's `MAX_WATCHED_RUNS` runs watched at once (shared with listen streams);
beyond them ``INVALID_REQUEST`` names the limit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError

from .listen import RunListen
from .run_resources import parse_run_uri
from .run_watch import MAX_URIS, RunWatch

__all__ = ["ResourceSubscriptions"]

log = logging.getLogger(__name__)

_STATE_KEY: Final = "flowledger.resource_subscriptions"


def _connection(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The request's connection. The SDK hands lowlevel handlers no public way to it (its
    `Context` will have ``connection``); without it a subscription could never be
    released, so it is refused."""
    connection = getattr(ctx.session, "_connection", None)
    if not isinstance(connection, Connection):
        raise MCPError(
            types.INTERNAL_ERROR, "resources/subscribe: this connection's end cannot be known"
        )
    return connection


class _Subscriber:
    """One connection's subscriptions: its URIs, the run watches they hold, and the task
    sending their updates."""

    def __init__(self, listen: RunListen, session: ServerSession) -> None:
        self._listen = listen
        self._session = session
        self.uris: set[str] = set()
        self.watches: dict[str, RunWatch] = {}
        self.closed = False
        self._waiting: dict[str, None] = {}  # URIs updated and not sent yet, in order
        self._wake = asyncio.Event()
        self._unsubscribe = listen.bus.subscribe(self._heard)
        self._sender = asyncio.get_running_loop().create_task(self._send())

    def _heard(self, event: ServerEvent) -> None:
        if isinstance(event, ResourceUpdated) and event.uri in self.uris:
            self._waiting[event.uri] = None
            self._wake.set()

    async def _send(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._waiting:
                uri = next(iter(self._waiting))
                del self._waiting[uri]
                try:
                    await self._session.send_notification(
                        types.ResourceUpdatedNotification(
                            params=types.ResourceUpdatedNotificationParams(uri=uri)
                        )
                    )
                except Exception as exc:  # the client went away; the exit stack closes us
                    log.debug("resource update not sent: %s", exc)

    def release_run(self, run_id: str) -> None:
        """Let go of ``run_id``'s watch unless a subscribed URI still names the run."""
        if any((p := parse_run_uri(u)) is not None and p.run_id == run_id for u in self.uris):
            return
        watch = self.watches.pop(run_id, None)
        if watch is not None:
            self._listen.release(watch)

    def close(self) -> None:
        """The connection ended: release everything."""
        self.closed = True
        self._unsubscribe()
        self._sender.cancel()
        self.uris.clear()
        for run_id in list(self.watches):
            self.release_run(run_id)


class ResourceSubscriptions:
    """The two handlers, over one session's listen (its watches and bus) and its
    resource check (``check`` raises `MCPError` for a URI that is no resource)."""

    def __init__(self, check: Callable[[str], Any], listen: RunListen) -> None:
        self._check = check
        self._listen = listen

    def _subscriber(self, ctx: ServerRequestContext[Any, Any]) -> _Subscriber:
        connection = _connection(ctx)
        subscriber = connection.state.get(_STATE_KEY)
        if not isinstance(subscriber, _Subscriber):
            subscriber = connection.state[_STATE_KEY] = _Subscriber(self._listen, ctx.session)
            connection.exit_stack.callback(subscriber.close)
        return subscriber

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        await self._check(uri)
        subscriber = self._subscriber(ctx)
        if uri in subscriber.uris:
            return types.EmptyResult()
        if len(subscriber.uris) >= MAX_URIS:
            raise MCPError(
                types.INVALID_REQUEST,
                f"resources/subscribe: this connection has {MAX_URIS} subscriptions, the limit",
            )
        parsed = parse_run_uri(uri)
        if parsed is not None and parsed.run_id not in subscriber.watches:
            self._listen.check_room({parsed.run_id})
            watch = await self._listen.acquire(parsed.run_id)
            if subscriber.closed:  # the connection ended meanwhile: nobody would release it
                self._listen.release(watch)
                raise MCPError(types.INTERNAL_ERROR, "resources/subscribe: the connection ended")
            if parsed.run_id in subscriber.watches:  # a concurrent request got there first
                self._listen.release(watch)
            else:
                subscriber.watches[parsed.run_id] = watch
        subscriber.uris.add(uri)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        subscriber = _connection(ctx).state.get(_STATE_KEY)
        if isinstance(subscriber, _Subscriber) and uri in subscriber.uris:
            subscriber.uris.discard(uri)
            parsed = parse_run_uri(uri)
            if parsed is not None:
                subscriber.release_run(parsed.run_id)
        return types.EmptyResult()
