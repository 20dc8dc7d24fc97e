"""``subscriptions/listen`` (protocol 2026-07-28): run resource changes and task status.

A listen request's filter may list resource URIs (``resourceSubscriptions``) and, for a
client declaring the tasks extension in the request, task IDs (``taskIds``, the
extension's filter key). Every URI must be a resource of this session (a schema, or a
run resource of one of its runs) and every task ID one of its tasks: otherwise the
request is refused before the stream is acknowledged, with what a read answers (no
resource) or what ``tasks/get`` answers (unknown task), both ``INVALID_PARAMS``, and
nothing is watched. Task IDs from a client that did not declare the extension are
refused with ``-32021`` (missing required client capability), as the extension says.
Limits per served session (docs/mcp.md): `MAX_STREAMS` open streams, `MAX_URIS`
entries (URIs and task IDs) in one request, `MAX_WATCHED_RUNS` runs watched for their
resources at once; beyond them a request is refused with ``INVALID_REQUEST`` naming the
limit.

The stream is the SDK's `ListenHandler` protocol done here (the SDK's handler drops
filter keys it does not know, and its bus carries only the core events): the
acknowledgement first, echoing the honored URIs and task IDs; then, tagged with the
listen request's ID, ``notifications/resources/updated`` from the session's shared
`RunWatch` es (`flowledger.mcp.run_watch`) and ``notifications/tasks`` from the
stream's own `TaskWatch` es (`flowledger.mcp.task_watch`): the task as it is, then one
per status change, with the pause's form in ``inputRequests`` when the client declares
form elicitation. A stream whose client stops reading is ended once
`MAX_BUFFERED_EVENTS` are waiting (it re-listens and re-reads, as the SDK's does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, event_matches, event_to_notification

from ..workflows.activities.journal import ActivityJournal
from .forms import declares_forms
from .run_resources import parse_run_uri
from .run_watch import MAX_STREAMS, MAX_URIS, MAX_WATCHED_RUNS, RunReader, RunWatch
from .task_watch import TaskWatch, same_notice
from .tasks import RunTasks, TaskId, missing_extension

__all__ = [
    "MAX_BUFFERED_EVENTS",
    "TASK_IDS_KEY",
    "TASK_NOTIFICATION",
    "RunListen",
    "TaskNotification",
]

log = logging.getLogger(__name__)

MAX_BUFFERED_EVENTS: Final = 1024
#: The filter key the tasks extension adds to ``subscriptions/listen``.
TASK_IDS_KEY: Final = "taskIds"
TASK_NOTIFICATION: Final = "notifications/tasks"


class TaskNotification(types.Notification[dict[str, Any], Literal["notifications/tasks"]]):
    """The tasks extension's status notification: a ``DetailedTask`` (the SDK's
    ``TaskStatusNotification`` is the 2025-11-25 ``notifications/tasks/status``, a type
    only; the extension on 2026-07-28 names it ``notifications/tasks``)."""

    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: dict[str, Any]


@dataclass(frozen=True)
class _TaskNotice:
    """A task's document, as this stream's client is to get it."""

    document: dict[str, Any]


_Event = ServerEvent | _TaskNotice


def _task_ids(notifications: types.SubscriptionFilter) -> list[str]:
    """The filter's task IDs, each once, in order; `MCPError` if they are no list of
    strings."""
    raw = (notifications.model_extra or {}).get(TASK_IDS_KEY)
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise MCPError(
            types.INVALID_PARAMS, f"subscriptions/listen: {TASK_IDS_KEY} must be a list of strings"
        )
    return list(dict.fromkeys(raw))


def _honored(requested: types.SubscriptionFilter, task_ids: list[str]) -> types.SubscriptionFilter:
    """What the acknowledgement echoes: every requested kind (as the SDK's handler)."""
    extra = {TASK_IDS_KEY: task_ids} if task_ids else {}
    return types.SubscriptionFilter(
        tools_list_changed=True if requested.tools_list_changed else None,
        prompts_list_changed=True if requested.prompts_list_changed else None,
        resources_list_changed=True if requested.resources_list_changed else None,
        resource_subscriptions=list(requested.resource_subscriptions)
        if requested.resource_subscriptions
        else None,
        **extra,
    )


class RunListen:
    """Serves ``subscriptions/listen`` for one session. ``check`` raises `MCPError` for
    a URI that is no resource of the session; ``tasks`` (None: no task IDs) answers
    for its tasks."""

    def __init__(
        self,
        check: Callable[[str], Any],
        registry: RunReader,
        journal: ActivityJournal,
        session_id: str,
        *,
        executes: bool,
        tasks: RunTasks | None = None,
    ) -> None:
        self._check = check
        self._registry = registry
        self._journal = journal
        self._session_id = session_id
        self._executes = executes
        self._tasks = tasks
        self.bus = InMemorySubscriptionBus()
        self._streams = 0
        self.watches: dict[str, RunWatch] = {}

    async def publish(self, uri: str) -> None:
        await self.bus.publish(ResourceUpdated(uri=uri))

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        uris = list(params.notifications.resource_subscriptions or ())
        task_ids = _task_ids(params.notifications)
        if task_ids and (self._tasks is None or not RunTasks.declared(ctx)):
            raise missing_extension("subscriptions/listen")
        if len(uris) + len(task_ids) > MAX_URIS:
            raise MCPError(
                types.INVALID_REQUEST,
                f"subscriptions/listen: {len(uris) + len(task_ids)} resource URIs and task "
                f"IDs, at most {MAX_URIS} a stream",
            )
        if self._streams >= MAX_STREAMS:
            raise MCPError(
                types.INVALID_REQUEST,
                f"subscriptions/listen: this session has {MAX_STREAMS} open streams, the limit",
            )
        for uri in uris:
            await self._check(uri)
        tasks = [await self._tasks.known(text) for text in task_ids] if self._tasks else []
        runs = {parsed.run_id for uri in uris if (parsed := parse_run_uri(uri)) is not None}
        self.check_room(runs)
        self._streams += 1
        mine: list[RunWatch] = []
        try:
            for run_id in sorted(runs):
                mine.append(await self.acquire(run_id))
            honored = _honored(params.notifications, task_ids)
            return await self._stream(ctx, ctx.request_id, honored, tasks)
        finally:
            self._streams -= 1
            for watch in mine:
                self.release(watch)

    # -- the shared resource watches (also used by `resources/subscribe`) -------------------

    def check_room(self, runs: set[str]) -> None:
        """Refuse (``INVALID_REQUEST``) watching ``runs`` if that would pass the limit."""
        new = runs - self.watches.keys()
        if len(self.watches) + len(new) > MAX_WATCHED_RUNS:
            raise MCPError(
                types.INVALID_REQUEST,
                f"this session watches {len(self.watches)} runs; "
                f"{len(new)} more would pass the limit of {MAX_WATCHED_RUNS}",
            )

    async def acquire(self, run_id: str) -> RunWatch:
        """The run's watch, started if new; `release` it once done."""
        watch = self.watches.get(run_id)
        if watch is not None:
            watch.users += 1
            return watch
        watch = self.watches[run_id] = RunWatch(
            self._registry,
            self._journal,
            self._session_id,
            run_id,
            self.publish,
            executes=self._executes,
        )
        watch.users += 1
        try:
            await watch.start()
        except Exception as exc:  # checked just before: the database went away
            self.release(watch)
            raise MCPError(types.INTERNAL_ERROR, f"cannot watch run {run_id}") from exc
        return watch

    def release(self, watch: RunWatch) -> None:
        watch.users -= 1
        if not watch.users:
            if self.watches.get(watch.run_id) is watch:
                del self.watches[watch.run_id]
            watch.stop()

    # -- one stream -------------------------------------------------------------------------

    async def _stream(
        self,
        ctx: ServerRequestContext[Any, Any],
        subscription_id: types.RequestId,
        honored: types.SubscriptionFilter,
        tasks: list[TaskId],
    ) -> types.SubscriptionsListenResult:
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        uris = frozenset(honored.resource_subscriptions or ())
        forms = declares_forms(ctx) and self._tasks is not None and self._tasks.asks_forms
        send, recv = anyio.create_memory_object_stream[_Event](MAX_BUFFERED_EVENTS)

        def deliver(event: _Event) -> None:
            try:
                send.send_nowait(event)
            except anyio.ClosedResourceError:
                pass  # the stream is unwinding
            except anyio.WouldBlock:
                log.warning("listen stream %r backlog full; ending the stream", subscription_id)
                send.close()

        def heard(event: ServerEvent) -> None:
            if event_matches(honored, uris, event):
                deliver(event)

        def notice(plain: dict[str, Any], with_form: dict[str, Any]) -> None:
            deliver(_TaskNotice(with_form if forms else plain))

        # Everything is heard before the acknowledgement is written, so nothing is lost;
        # it is still the first frame: only this task writes the stream.
        unsubscribe = self.bus.subscribe(heard)
        watches: list[TaskWatch] = []
        try:
            assert self._tasks is not None or not tasks
            for task in tasks:
                assert self._tasks is not None
                watch = TaskWatch(
                    self._tasks,
                    task,
                    self._journal,
                    self._session_id,
                    notice,
                    executes=self._executes,
                )
                watches.append(watch)
                await watch.start()
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                ),
                related_request_id=subscription_id,
            )
            last: dict[str, dict[str, Any]] = {}
            async for event in recv:
                if isinstance(event, _TaskNotice):
                    document = event.document
                    if same_notice(last.get(document["taskId"]), document):
                        continue
                    last[document["taskId"]] = document
                    notification: Any = TaskNotification(params={**document, "_meta": meta})
                else:
                    notification = event_to_notification(event, meta)
                # The SDK's notification union leaves the extension's type out; sending
                # only dumps the model.
                await ctx.session.send_notification(
                    cast(types.ServerNotification, notification),
                    related_request_id=subscription_id,
                )
        finally:
            unsubscribe()
            for watch in watches:
                watch.stop()
            send.close()
            recv.close()
        return types.SubscriptionsListenResult(_meta=meta)
