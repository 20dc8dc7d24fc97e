"""Task status notifications (``notifications/tasks``, the tasks extension on the
2026-07-28 revision): one listen stream's watch of one task.

A client that declares ``io.modelcontextprotocol/tasks`` lists task IDs in a
``subscriptions/listen`` filter (``taskIds``); `flowledger.mcp.run_watch.RunListen`
checks them and gives each listed task a `TaskWatch` of that stream's own (nothing is
shared between streams, so a notification reaches only the stream that asked).

A watch delivers the task's ``DetailedTask`` as it is when the watch starts, then one per
change of the task's status, in order: the statuses come from the run's activities (each
says the run status it leads to, in journal order), so a pause answered and a run
finished within one registry read still give ``input_required``, ``working``,
``completed``. Each notification is what ``tasks/get`` answers for that status: the
registry is read once the record has left the previous status (activities are published
just before the registry records them; at most `SETTLE_READS` reads, one every 0.1 s).
When the run has already moved past the status an activity announced, the notification
carries that status with the fields the activity knows (``lastUpdatedAt`` is the
activity's time; an ``input_required`` has no outstanding ``inputRequests``). A watch
ends after a terminal status, or when its stream closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

from ..workflows.activities.activity import MESSAGES, ActivityRecord, format_time
from ..workflows.activities.follow import DEFAULT_INTERVAL
from ..workflows.activities.journal import ActivityJournal
from .run_watch import SETTLE_READS, Source, open_source
from .tasks import POLL_INTERVAL_MS, TERMINAL_TASK_STATUSES, RunTasks, TaskId, task_status

__all__ = ["Deliver", "TaskWatch", "same_notice"]

log = logging.getLogger(__name__)

#: Receives a task's document twice: for a client not asked forms, and for one that is.
Deliver = Callable[[dict[str, Any], dict[str, Any]], None]
_MOVED_ON: Final = "the run has moved on since; tasks/get says where it is now"


def same_notice(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    """Whether ``b`` says nothing ``a`` did not: the same status, and for an
    ``input_required`` the same outstanding requests."""
    if a is None or a["status"] != b["status"]:
        return False
    return a.get("inputRequests") == b.get("inputRequests")


class TaskWatch:
    """Follows one task for one listen stream, delivering its documents (`Deliver`)."""

    def __init__(
        self,
        tasks: RunTasks,
        task: TaskId,
        journal: ActivityJournal,
        session_id: str,
        deliver: Deliver,
        *,
        executes: bool,
    ) -> None:
        self._tasks = tasks
        self.task = task
        self._journal = journal
        self._session_id = session_id
        self._deliver = deliver
        self._executes = executes
        self._source: Source | None = None
        self._runner: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start hearing the run, deliver the task as it is now, then follow it in a task
        (a finished task is not followed). `MCPError` if the task is unknown."""
        self._source = await open_source(
            self._journal, self._session_id, self.task.run_id, executes=self._executes
        )
        try:
            plain, with_form = await self._tasks.documents(self.task)
        except BaseException:
            self._source.close()
            raise
        self._deliver(plain, with_form)
        if plain["status"] in TERMINAL_TASK_STATUSES:
            self._source.close()
            return
        self._runner = asyncio.get_running_loop().create_task(self._run(plain["status"]))

    def stop(self) -> None:
        if self._source is not None:
            self._source.close()
        if self._runner is not None:
            self._runner.cancel()

    async def _run(self, last: str) -> None:
        try:
            await self._follow(last)
        except asyncio.CancelledError:
            raise
        except Exception:  # the database went away: the stream stays, without updates
            log.warning("watching task %s stopped", self.task, exc_info=True)
        finally:
            if self._source is not None:
                self._source.close()

    async def _follow(self, last: str) -> None:
        assert self._source is not None
        async for record in self._source:
            if record.run_id != self.task.run_id:
                continue
            status = task_status(record.status)
            if status == last:
                continue
            plain, with_form = await self._settled(record, status, last)
            self._deliver(plain, with_form)
            last = status
            if status in TERMINAL_TASK_STATUSES:
                return

    async def _settled(
        self, record: ActivityRecord, status: str, previous: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The task's documents once the registry has left ``previous`` (bounded); if it
        shows another status than ``status`` by then, the documents the activity makes."""
        documents = await self._tasks.documents(self.task)
        for _ in range(SETTLE_READS):
            if documents[0]["status"] != previous:
                break
            await asyncio.sleep(DEFAULT_INTERVAL)
            documents = await self._tasks.documents(self.task)
        if documents[0]["status"] == status:
            return documents
        past = self._past(documents[0], record, status)
        return past, past

    def _past(self, now: dict[str, Any], record: ActivityRecord, status: str) -> dict[str, Any]:
        """A notice of ``status``, which the run has already left (never a terminal one)."""
        document: dict[str, Any] = {
            "taskId": str(self.task),
            "status": status,
            "createdAt": now["createdAt"],
            "lastUpdatedAt": format_time(record.occurred_at),
            "ttlMs": None,
            "pollIntervalMs": POLL_INTERVAL_MS,
            "statusMessage": f"{MESSAGES[record.kind]}; {_MOVED_ON}",
        }
        if status == "input_required":
            document["inputRequests"] = {}
        return document
