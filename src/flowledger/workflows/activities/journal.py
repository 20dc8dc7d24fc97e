"""`ActivityJournal`: the durable activity publisher (flowledger's stand-in for the
reference's Harness publisher, workflows-spec §6.4-6.6 and §10).

Layout: one ledger log per run, named ``sessions/<session_id>/workflows/activity/<run_id>``
(generation 0). The journal is a projection of the run's checkpoints, so a damaged one
is rebuilt from them (`rebuild`) into a new log, generation ``g``
(``sessions/<session_id>/workflows/activity-rebuilt/<run_id>/<g>``); the run's current
generation is the tip of its pointer log ``sessions/<session_id>/workflows/
activity-generation/<run_id>`` (no record there: 0), so it is found with one tip read
and a damaged pointer record changes nothing. The ledger is append-only: a superseded
log stays as it was, unread.
Each ledger record is compact UTF-8 JSON ``{"revision": r, "activity": {...}}`` where
``activity`` is `ActivityRecord.to_json`. Records are kept in non-decreasing revision
order (`publish` refuses anything else), which is what lets `page` binary-search.

Publishing is **idempotent by event_id**: an item whose ``event_id`` is already in the
journal is a successful duplicate, never a second record and never a second
notification. Reconciliation publishes at least once with stable IDs (§6.4), so this
makes delivery effectively once. `publish` appends before it returns, so a success means
the activities are durable.

Assumption behind the cheap duplicate check: publication for one run is sequential
(one supervisor owns the session; it publishes a revision's activities, then advances
the run's activity cursor). A duplicate can therefore only be a re-publish of what was
last appended, so `publish` compares against the journal's *tail* (the last
``max(len(items), 64)`` records) instead of scanning the whole log. An item older than
that window would not be recognised; it would then be refused if its revision is below
the journal's last one (the ordering rule), so a broken caller cannot silently corrupt
the order.

Live subscribers (`subscribe`) receive the records published *through this journal
object* (a process-local fan-out for MCP notifications and the dashboard), only of their
session, in journal order, each once; a slow subscriber loses its oldest records
(``dropped`` counts them) rather than blocking publishers. When an append fails with an
unknown outcome (an error other than a conflict: the write may have landed), nobody is
notified; the next publish to that run reads the tail anyway, and if those records are
there it notifies them then, before anything newer. Use one journal per process and
event loop.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterable, Sequence
from types import TracebackType
from typing import Any, Final

from ...storage import (
    MAX_READ_LIMIT,
    MAX_RECORDS_PER_APPEND,
    CorruptDataError,
    Ledger,
    LedgerConflictError,
    Record,
    fence_arg,
)
from ..errors import ActivityValidationError, CorruptRecordError
from .activity import ActivityRecord, ProjectedActivity
from .history import HistoryPage, PageBuilder, check_page_args

__all__ = [
    "DEFAULT_SUBSCRIPTION_SIZE",
    "PUBLISH_ATTEMPTS",
    "TAIL_WINDOW",
    "ActivityJournal",
    "ActivitySubscription",
    "generation_log",
    "journal_name",
]

DEFAULT_SUBSCRIPTION_SIZE: Final = 1000
#: Minimum number of trailing journal records compared with a publish for duplicates.
TAIL_WINDOW: Final = 64
#: Compare-and-append attempts per publish before a `LedgerConflictError` is raised.
PUBLISH_ATTEMPTS: Final = 6

_UUID_CHARS: Final = frozenset("0123456789abcdef-")


def _check_uuid(what: str, value: object) -> str:
    if (
        not isinstance(value, str)
        or len(value) != 36
        or not _UUID_CHARS.issuperset(value)
        or [len(p) for p in value.split("-")] != [8, 4, 4, 4, 12]
        or value == "00000000-0000-0000-0000-000000000000"
    ):
        raise ValueError(f"{what} {value!r} is not a nonzero canonical lowercase UUID")
    return value


def journal_name(session_id: str, run_id: str, generation: int = 0) -> str:
    """The ledger log of one run's activities (of a rebuilt ``generation``, if not 0)."""
    _check_uuid("session id", session_id)
    _check_uuid("run id", run_id)
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
        raise ValueError(f"journal generation {generation!r} must be a non-negative int")
    if generation:
        return f"sessions/{session_id}/workflows/activity-rebuilt/{run_id}/{generation}"
    return f"sessions/{session_id}/workflows/activity/{run_id}"


def generation_log(session_id: str, run_id: str) -> str:
    """The log whose tip is the run's current journal generation."""
    _check_uuid("session id", session_id)
    _check_uuid("run id", run_id)
    return f"sessions/{session_id}/workflows/activity-generation/{run_id}"


def _encode(item: ProjectedActivity) -> bytes:
    doc = {"revision": item.revision, "activity": item.activity.to_json()}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for key, value in pairs:
        if key in doc:
            raise ValueError(f"duplicate key {key!r}")
        doc[key] = value
    return doc


def _no_constant(token: str) -> Any:
    raise ValueError(f"non-JSON number {token}")


def _decode(name: str, record: Record, session_id: str, run_id: str) -> ProjectedActivity:
    key = f"{name}#{record.seq}"
    try:
        doc = json.loads(
            record.payload.decode("utf-8"),
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
        )
        if not isinstance(doc, dict) or set(doc) != {"revision", "activity"}:
            raise ValueError('expected exactly the fields "revision" and "activity"')
        revision = doc["revision"]
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
            raise ValueError("revision must be a non-negative integer")
        activity = ActivityRecord.from_json(doc["activity"])
    except (ValueError, ActivityValidationError) as exc:  # includes UnicodeDecodeError
        raise CorruptRecordError(key, exc) from exc
    if activity.session_id != session_id or activity.run_id != run_id:
        raise CorruptRecordError(key, "activity belongs to another run")
    return ProjectedActivity(revision, activity)


class ActivitySubscription:
    """Live activities of one session: ``async for record in subscription``.

    Bounded: when ``maxsize`` records are waiting, the oldest is dropped and ``dropped``
    grows. `close` (idempotent) unsubscribes; records already queued are still delivered,
    then iteration ends."""

    def __init__(
        self, journal: ActivityJournal, session_id: str, maxsize: int = DEFAULT_SUBSCRIPTION_SIZE
    ) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError("maxsize must be a positive int")
        self.session_id = session_id
        self.dropped = 0
        self._journal = journal
        self._queue: asyncio.Queue[ActivityRecord | None] = asyncio.Queue(maxsize)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def pending(self) -> int:
        """Records waiting to be read."""
        return self._queue.qsize()

    def _offer(self, record: ActivityRecord) -> None:
        if self._closed:
            return
        if self._queue.full():
            self._queue.get_nowait()
            self.dropped += 1
        self._queue.put_nowait(record)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._journal._unsubscribe(self)
        if self._queue.empty():
            self._queue.put_nowait(None)  # wake a reader blocked in __anext__

    def __aiter__(self) -> ActivitySubscription:
        return self

    async def __anext__(self) -> ActivityRecord:
        if self._closed and self._queue.empty():
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is None:
            raise StopAsyncIteration
        return item

    def __enter__(self) -> ActivitySubscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> ActivitySubscription:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ActivityJournal:
    """The durable, idempotent activity publisher with O(page) history reads."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._subscribers: dict[str, set[ActivitySubscription]] = {}
        # Per log: the last chunk whose append failed with an unknown outcome (not a
        # conflict). If a later publish finds it durable, its subscribers are told then.
        self._unconfirmed: dict[str, list[ProjectedActivity]] = {}

    # -- publishing -----------------------------------------------------------------------

    async def publish(self, items: Sequence[ProjectedActivity]) -> int:
        """Durably append the activities of one run, in order; return how many were new.

        Items already in the journal (by ``event_id``, also repeats within ``items``) are
        skipped: a duplicate is a success. Everything new is appended with one
        compare-and-append per 64 records (the ledger's batch limit; each batch is atomic,
        and a retry completes an interrupted publish). A lost race re-reads the tail and
        retries, up to `PUBLISH_ATTEMPTS` times. Subscribers of the session are notified
        after each successful append.

        Refused with `ValueError` before anything is written: items of different runs,
        invalid activities (`ActivityValidationError`), revisions that decrease within
        ``items`` or fall below the journal's last revision."""
        batch = self._check_batch(items)
        if not batch:
            return 0
        first = batch[0].activity
        session_id, run_id = first.session_id, first.run_id
        window = max(len(batch), TAIL_WINDOW)
        async with self._lock(session_id, run_id):
            name = await self._current(session_id, run_id)
            appended = 0
            attempts = 0
            tip, known, last_revision = await self._tail(name, session_id, run_id, window)
            self._confirm(name, session_id, known)
            while True:
                pending = [item for item in batch if item.activity.event_id not in known]
                if not pending:
                    return appended
                if pending[0].revision < last_revision:
                    raise ValueError(
                        f"activity revision {pending[0].revision} is below the journal's "
                        f"last revision {last_revision} for run {run_id}"
                    )
                chunk = pending[:MAX_RECORDS_PER_APPEND]
                attempts += 1
                try:
                    tip = await self._ledger.append(
                        name, [_encode(item) for item in chunk], expected=tip, **fence_arg()
                    )
                except LedgerConflictError:
                    if attempts >= PUBLISH_ATTEMPTS:
                        raise
                    tip, known, last_revision = await self._tail(name, session_id, run_id, window)
                    continue
                except BaseException:
                    # Perhaps written, perhaps not: a later publish finds out and notifies.
                    self._unconfirmed[name] = chunk
                    raise
                attempts = 0
                appended += len(chunk)
                known.update(item.activity.event_id for item in chunk)
                last_revision = chunk[-1].revision
                self._notify(session_id, chunk)

    def _lock(self, session_id: str, run_id: str) -> asyncio.Lock:
        key = journal_name(session_id, run_id)
        lock = self._locks.get(key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[key] = lock
        return lock

    async def generation(self, session_id: str, run_id: str) -> int:
        """The run's current journal generation (0 until a `rebuild`)."""
        return await self._ledger.tip(generation_log(session_id, run_id))

    async def _current(self, session_id: str, run_id: str) -> str:
        return journal_name(session_id, run_id, await self.generation(session_id, run_id))

    async def rebuild(
        self,
        session_id: str,
        run_id: str,
        pages: AsyncIterable[Sequence[ProjectedActivity]],
    ) -> int:
        """Write the run's whole journal anew from ``pages`` (its activities in order, as
        projected from its checkpoints) into a fresh log, then make that log current;
        return its generation. Until the switch, readers and publishers keep the old
        log, so a rebuild cut short changes nothing (its partial log is left unused).
        Subscribers are not notified: these activities were published before. Refused
        with `ValueError` like `publish` (items of another run, revisions that go back)."""
        pointer = generation_log(session_id, run_id)
        async with self._lock(session_id, run_id):
            current = await self._ledger.tip(pointer)
            generation = current + 1
            while await self._ledger.tip(journal_name(session_id, run_id, generation)):
                generation += 1  # a rebuild that did not finish left this one
            if generation - current > MAX_RECORDS_PER_APPEND:
                raise RuntimeError(f"too many unfinished journal rebuilds for run {run_id}")
            name = journal_name(session_id, run_id, generation)
            tip, previous = 0, -1
            async for page in pages:
                batch = self._check_batch(page)
                for item in batch:
                    if (item.activity.session_id, item.activity.run_id) != (session_id, run_id):
                        raise ValueError("one rebuild holds the activities of one run only")
                    if item.revision < previous:
                        raise ValueError("activity revisions must not decrease in a rebuild")
                    previous = item.revision
                for start in range(0, len(batch), MAX_RECORDS_PER_APPEND):
                    chunk = batch[start : start + MAX_RECORDS_PER_APPEND]
                    tip = await self._ledger.append(
                        name, [_encode(item) for item in chunk], expected=tip, **fence_arg()
                    )
            marker = json.dumps({"generation": generation}).encode("utf-8")
            await self._ledger.append(
                pointer, [marker] * (generation - current), expected=current, **fence_arg()
            )
            self._unconfirmed.pop(journal_name(session_id, run_id, current), None)
        return generation

    def _confirm(self, name: str, session_id: str, known: set[str]) -> None:
        """Notify the records of an earlier failed append that turned out to be durable."""
        chunk = self._unconfirmed.pop(name, None)
        if chunk:
            self._notify(session_id, [i for i in chunk if i.activity.event_id in known])

    @staticmethod
    def _check_batch(items: Sequence[ProjectedActivity]) -> list[ProjectedActivity]:
        if isinstance(items, ProjectedActivity) or not isinstance(items, Sequence):
            raise TypeError("publish takes a sequence of ProjectedActivity")
        batch: list[ProjectedActivity] = []
        seen: set[str] = set()
        previous = -1
        owner: tuple[str, str] | None = None
        for item in items:
            if not isinstance(item, ProjectedActivity) or not isinstance(
                item.activity, ActivityRecord
            ):
                raise TypeError("publish takes a sequence of ProjectedActivity")
            revision = item.revision
            if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
                raise ValueError(f"activity revision {revision!r} must be a non-negative int")
            item.activity.validate()
            run = (item.activity.session_id, item.activity.run_id)
            if owner is None:
                owner = run
            elif run != owner:
                raise ValueError("one publish holds the activities of one run only")
            if revision < previous:
                raise ValueError("activity revisions must not decrease within a publish")
            previous = revision
            if item.activity.event_id in seen:
                continue
            seen.add(item.activity.event_id)
            batch.append(item)
        return batch

    async def _tail(
        self, name: str, session_id: str, run_id: str, window: int
    ) -> tuple[int, set[str], int]:
        """``(tip, event IDs of the last `window` records, last revision or -1)``."""
        tip = await self._ledger.tip(name)
        records = await self._read_range(name, max(0, tip - window), tip)
        known: set[str] = set()
        last_revision = -1
        for record in records:
            item = _decode(name, record, session_id, run_id)
            known.add(item.activity.event_id)
            last_revision = item.revision
        return tip, known, last_revision

    async def _read(self, name: str, after: int, limit: int) -> list[Record]:
        """Records after ``after``; a record missing in between (a gap in the sequence)
        is a `CorruptRecordError`, like a damaged one."""
        try:
            records = await self._ledger.read(name, after=after, limit=limit)
        except CorruptDataError as exc:
            raise CorruptRecordError(name, exc) from exc
        for offset, record in enumerate(records):
            if record.seq != after + 1 + offset:
                raise CorruptRecordError(name, f"record {after + 1 + offset} is missing")
        return records

    async def _read_range(self, name: str, after: int, upto: int) -> list[Record]:
        """Records with ``after < seq <= upto``."""
        out: list[Record] = []
        while after < upto:
            chunk = await self._read(name, after, min(upto - after, MAX_READ_LIMIT))
            if not chunk:
                raise CorruptRecordError(name, f"records {after + 1}..{upto} are missing")
            out.extend(chunk)
            after = chunk[-1].seq
        return out

    # -- live subscribers -----------------------------------------------------------------

    def subscribe(
        self, session_id: str, *, maxsize: int = DEFAULT_SUBSCRIPTION_SIZE
    ) -> ActivitySubscription:
        """Receive every activity this journal publishes for ``session_id`` from now on."""
        _check_uuid("session id", session_id)
        subscription = ActivitySubscription(self, session_id, maxsize)
        self._subscribers.setdefault(session_id, set()).add(subscription)
        return subscription

    def _unsubscribe(self, subscription: ActivitySubscription) -> None:
        subscribers = self._subscribers.get(subscription.session_id)
        if subscribers is None:
            return
        subscribers.discard(subscription)
        if not subscribers:
            del self._subscribers[subscription.session_id]

    def _notify(self, session_id: str, items: Sequence[ProjectedActivity]) -> None:
        subscribers = self._subscribers.get(session_id)
        if not subscribers:
            return
        for item in items:
            for subscription in tuple(subscribers):
                subscription._offer(item.activity)

    # -- reading --------------------------------------------------------------------------

    async def has_records(self, session_id: str, run_id: str) -> bool:
        """Whether the run's journal holds anything (any generation): a run record's
        witness (`records.registry.RunWitness`), since only a run's owner writes it,
        after the run record exists, and a prune deletes it before the run's tombstone."""
        if await self.generation(session_id, run_id) > 0:
            return True
        return await self._ledger.tip(journal_name(session_id, run_id)) > 0

    async def position(self, session_id: str, run_id: str) -> int:
        """How many activities of the run are stored: a position for `read_after`."""
        return await self._ledger.tip(await self._current(session_id, run_id))

    async def read_after(
        self, session_id: str, run_id: str, position: int, *, limit: int = MAX_READ_LIMIT
    ) -> list[ProjectedActivity]:
        """The run's activities stored after ``position`` (at most ``limit``), in order:
        the next position is ``position + len(result)``. Whoever published them.
        Positions count records of the current generation: a rebuilt journal holds the
        same activities in the same order, so a reader's position stays meaningful."""
        name = await self._current(session_id, run_id)
        records = await self._read(name, position, limit)
        return [_decode(name, record, session_id, run_id) for record in records]

    async def records(self, session_id: str, run_id: str) -> list[ProjectedActivity]:
        """The whole journal of one run, in order (for tests and small runs)."""
        name = await self._current(session_id, run_id)
        tip = await self._ledger.tip(name)
        out: list[ProjectedActivity] = []
        previous = -1
        for record in await self._read_range(name, 0, tip):
            item = _decode(name, record, session_id, run_id)
            if item.revision < previous:
                raise CorruptRecordError(f"{name}#{record.seq}", "revision goes backwards")
            previous = item.revision
            out.append(item)
        return out

    async def page(
        self,
        session_id: str,
        run_id: str,
        *,
        after_revision: int = 0,
        after_event_id: str | None = None,
        limit: int = 0,
        activity_cursor: int = 0,
    ) -> HistoryPage:
        """Exactly ``page_history(await records(...), ...)``, reading O(log n + page) records:
        a binary search finds the first record at or after ``after_revision``, then the
        journal is read forward only as far as the page needs, plus one record to know
        whether more remain. Skipping to an ``after_event_id`` inside one revision reads
        that revision up to the cursor event.

        ``activity_cursor`` is the run record's: its activities below that revision were
        published (revision 0's ``run_started`` among them). A journal with no record then
        contradicts the run record - the log was lost, or a damaged index misses it - and
        is a `CorruptRecordError`, never an empty history."""
        limit, cursor = check_page_args(after_revision, after_event_id, limit)
        name = await self._current(session_id, run_id)
        tip = await self._ledger.tip(name)
        if tip == 0 and activity_cursor > 0:
            raise CorruptRecordError(
                name,
                f"the run's activities up to revision {activity_cursor - 1} were published, "
                "but its journal holds none",
            )
        builder = PageBuilder(after_revision, cursor, limit)
        seq = await self._first_at_or_after(name, session_id, run_id, tip, after_revision)
        after = seq - 1
        previous = -1
        size = limit + 1
        while after < tip:
            chunk = await self._read(name, after, min(tip - after, size))
            if not chunk:
                raise CorruptRecordError(name, f"records {after + 1}..{tip} are missing")
            for record in chunk:
                item = _decode(name, record, session_id, run_id)
                if item.revision < previous:
                    raise CorruptRecordError(f"{name}#{record.seq}", "revision goes backwards")
                previous = item.revision
                if not builder.feed(item):
                    return builder.finish()
            after = chunk[-1].seq
            size = min(size * 2, MAX_READ_LIMIT)  # long skips to a cursor event stay O(skip)
        return builder.finish()

    async def _first_at_or_after(
        self, name: str, session_id: str, run_id: str, tip: int, revision: int
    ) -> int:
        """The smallest seq in 1..tip whose revision is >= ``revision``, else ``tip + 1``."""
        lo, hi = 1, tip + 1
        if revision == 0:
            return lo
        while lo < hi:
            mid = (lo + hi) // 2
            chunk = await self._read(name, mid - 1, 1)
            if not chunk:
                raise CorruptRecordError(name, f"record {mid} is missing")
            if _decode(name, chunk[0], session_id, run_id).revision >= revision:
                hi = mid
            else:
                lo = mid + 1
        return lo
