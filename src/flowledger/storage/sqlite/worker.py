"""How a SQLite store runs its calls: one transaction at a time, appends group-committed.

Calls run on the calling thread, one at a time, each a whole transaction: an
uncontended commit blocks the event loop for its own duration (with ``FULL``, one
fsync), but waiting for another process's lock never does - the wait is an
asynchronous retry up to ``busy_timeout``; a group's COMMIT runs on a writer thread. A
call cancelled while it waits has not started; a started call runs to completion.
`Store.close` lets the calls in line finish, then closes the connection; later calls
raise `StoreClosedError`. A thread that runs no event loop may append with
`Worker.append_blocking` (`SQLiteLedger.append_blocking`): the same lone transaction,
taking the connection in turn with the calls above by blocking on its lock.

Ledger appends made concurrently on one store are *group-committed* (see `Worker`): one
transaction, a savepoint per append (so each keeps its own checks and its own outcome,
and a failed one writes nothing), one COMMIT. Each append is still atomic; a group is
applied in the order its appends were made; a caller is answered only after the COMMIT
holding its records returned; a failed COMMIT fails every append of its group, and only
those.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from ..errors import StorageError, StoreClosedError
from .database import Database, is_busy, rollback
from .ledger import Append, append_rows

__all__ = ["Worker", "append_alone", "begin_group", "commit_group"]

_T = TypeVar("_T")


def append_alone(db: Database, append: Append) -> int:
    """One append as its own transaction (the path of a lone writer)."""
    db.check_files()
    db.cursor.execute("BEGIN IMMEDIATE")
    try:
        tip, log, refs = append_rows(db, append)
        db.commit()
    except BaseException:
        rollback(db.conn)
        db.log_ids.pop(append.name, None)  # a rolled-back insert assigned no id
        raise
    db.log_ids[append.name] = log
    db.known_refs.add(refs)
    return tip


def begin_group(db: Database, appends: Sequence[Append]) -> list[int | BaseException]:
    """Open one transaction and run every append of ``appends`` in it, each inside
    its own savepoint: a member whose checks fail (a conflict, a fence) is rolled
    back to its savepoint and gets its exception; the others stay. The transaction
    is left open for `commit_group`. If the transaction itself is lost (SQLite rolls
    back the whole of it on some I/O errors), it raises and nothing is written."""
    conn, cursor = db.conn, db.cursor
    db.check_files()
    cursor.execute("BEGIN IMMEDIATE")
    outcomes: list[int | BaseException] = []
    db.group_refs = []
    try:
        for append in appends:
            cursor.execute("SAVEPOINT member")
            try:
                tip, _log, refs = append_rows(db, append)
            except Exception as exc:
                if not conn.in_transaction:
                    raise  # the whole transaction is gone, not just this member
                cursor.execute("ROLLBACK TO member")
                cursor.execute("RELEASE member")
                outcomes.append(exc)
            else:
                cursor.execute("RELEASE member")
                outcomes.append(tip)
                db.group_refs.extend(refs)
    except BaseException:
        rollback(conn)
        for append in appends:
            db.log_ids.pop(append.name, None)
        raise
    return outcomes


def commit_group(db: Database, appends: Sequence[Append]) -> None:
    """Commit the transaction `begin_group` left open (one fsync with ``FULL``); on
    failure roll it back and raise: then no member of the group was written."""
    refs, db.group_refs = db.group_refs, []
    try:
        db.commit()
    except BaseException:
        rollback(db.conn)
        for append in appends:
            db.log_ids.pop(append.name, None)  # ids read or assigned in it may be gone
        raise
    db.known_refs.add(refs)


# A lone append commits on the event loop's thread (no hand-off to the writer thread)
# once this many groups in a row held a single append; one group of two or more appends
# switches to committing on the writer thread.
_LONE_STREAK: Final = 4
_FIRST_PAUSE: Final = 0.0005
_MAX_PAUSE: Final = 0.02


@dataclass(eq=False, slots=True)
class _Job:
    """A call waiting in line: a ledger append (joins the next group) or any other call."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    deadline: float  # time.monotonic() after which a wait for another process's lock fails
    append: Append | None = None
    fn: Callable[..., Any] | None = None
    args: tuple[Any, ...] = ()


class Worker:
    """Runs a store's database calls, one transaction at a time, and group-commits appends.

    A call other than a ledger append is a whole transaction (or one read) run on the
    caller's thread when the connection is free; it never spans an ``await``. SQLite's
    own busy handler is off (it would sleep inside the event loop); a call that finds
    the database locked by another connection is retried after an asynchronous pause,
    until the store's ``busy_timeout`` has passed. An uncontended call costs no thread
    hand-off: on this kind of machine waking a thread after an fsync cost more than the
    transaction itself.

    Ledger appends wait in line for one pass of the event loop, so that appends ready in
    the same pass (many runs in one process) form a *group*: one ``BEGIN IMMEDIATE``
    transaction in which each member's checks and rows (`ledger.append_rows`) run
    inside its own savepoint - a member that fails its checks is rolled back alone and
    raises its own error - and one ``COMMIT`` (one fsync with ``FULL``). That COMMIT runs
    on a writer thread while the event loop keeps running; appends that arrive meanwhile
    form the next group. Every member's await returns after the COMMIT that holds its
    records has returned (is durable), in the order of the line; if the COMMIT itself
    fails, every member of that group raises (the same `sqlite3.Error` class, saying the
    group's commit failed and nothing of it was written) and later groups go on. A lone
    writer commits on its own thread as before, without a hand-off (see `_LONE_STREAK`).
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        # The connection: one call or one group at a time. Stores may be shared by threads
        # with their own event loops; a group holds it from BEGIN until its COMMIT is done
        # (so it is released by the writer thread).
        self._lock = threading.Lock()
        self._mutex = threading.Lock()  # the line and the flags below
        self._queue: list[_Job] = []
        self._draining = False  # a drain is scheduled (or running) on some event loop
        self._committing = False  # a group's COMMIT is in flight on the writer thread
        self._lone = _LONE_STREAK  # groups in a row of a single append
        self._last_log = ""  # the log of the latest append
        self._pause = _FIRST_PAUSE
        self._writer: _Writer | None = None
        self._closed = False

    async def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        deadline: float | None = None
        pause = _FIRST_PAUSE
        while True:
            if not self._lock.acquire(blocking=False):
                # A group is committing, or another thread's call runs: wait in line.
                return await self._wait_in_line(self._job(fn=fn, args=args))  # type: ignore[no-any-return]
            try:
                if self._closed:
                    raise StoreClosedError()
                try:
                    return fn(*args)
                except sqlite3.OperationalError as exc:
                    if not is_busy(exc):
                        raise
            finally:
                self._lock.release()
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.db.settings.busy_timeout_ms / 1000
            if now >= deadline:
                raise _locked()
            await asyncio.sleep(pause)
            pause = min(pause * 2, _MAX_PAUSE)

    async def append(self, append: Append) -> int:
        """Append in the next group; return the new tip once its COMMIT is durable.

        A lone writer - the previous append went to the same log, recent groups held a
        single append, nothing waits in line - appends at once, as its own transaction,
        without waiting for the rest of the pass of the event loop."""
        lone = self._lone >= _LONE_STREAK and append.name == self._last_log
        self._last_log = append.name
        idle = not (self._queue or self._draining or self._committing)
        if lone and idle and self._lock.acquire(blocking=False):
            try:
                if self._closed:
                    raise StoreClosedError()
                return append_alone(self.db, append)
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
            finally:
                self._lock.release()
        return await self._wait_in_line(self._job(append=append))  # type: ignore[no-any-return]

    def append_blocking(self, append: Append) -> int:
        """A lone append from a thread that runs no event loop: its own transaction on
        the calling thread, as `append` makes for a lone writer, once the connection is
        free - a group's COMMIT in flight or another thread's call is waited for by
        blocking on the connection's lock (the order `_drain` and `call` keep too), and
        another process's write lock by sleeping, up to ``busy_timeout``. Returns the new
        tip once the COMMIT is durable; on any error nothing of it is written."""
        deadline: float | None = None
        pause = _FIRST_PAUSE
        while True:
            with self._lock:
                if self._closed:
                    raise StoreClosedError()
                try:
                    tip = append_alone(self.db, append)
                except sqlite3.OperationalError as exc:
                    if not is_busy(exc):
                        raise
                else:
                    self._last_log = append.name
                    return tip
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.db.settings.busy_timeout_ms / 1000
            if now >= deadline:
                raise _locked()
            time.sleep(pause)  # this thread runs no event loop: nothing else waits on it
            pause = min(pause * 2, _MAX_PAUSE)

    def _job(self, **what: Any) -> _Job:
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self.db.settings.busy_timeout_ms / 1000
        return _Job(loop, loop.create_future(), deadline, **what)

    async def _wait_in_line(self, job: _Job) -> Any:
        with self._mutex:
            if self._closed:
                raise StoreClosedError()
            self._queue.append(job)
            kick = not self._draining and not self._committing
            self._draining = self._draining or kick
        if kick:
            job.loop.call_soon(self._drain)  # after the rest of this pass of the loop
        try:
            return await job.future
        except asyncio.CancelledError:
            with self._mutex:
                if job in self._queue:  # not started: nothing of it is written
                    self._queue.remove(job)
            raise

    def _drain(self) -> None:
        """On an event loop's thread: run everything in line (unless a COMMIT is in
        flight: the writer thread calls this again when it is done)."""
        while True:
            with self._mutex:
                if self._committing or not self._queue:
                    self._draining = False
                    return
                jobs, self._queue = self._queue, []
            retry: list[_Job] = []
            self._lock.acquire()  # at most one statement of another thread's call
            handed = False
            try:
                handed = self._run(jobs, retry)
            finally:
                if not handed:
                    self._lock.release()
            if handed:
                return
            if retry:  # another process holds the write lock: try again after a pause
                with self._mutex:
                    self._queue[:0] = retry
                asyncio.get_running_loop().call_later(self._pause, self._drain)
                self._pause = min(self._pause * 2, _MAX_PAUSE)
                return
            self._pause = _FIRST_PAUSE

    def _run(self, jobs: list[_Job], retry: list[_Job]) -> bool:
        """Run ``jobs`` (holding the connection); True if a group's COMMIT was handed to
        the writer thread, which then owns the connection until it is done."""
        now = time.monotonic()
        answers: list[tuple[_Job, object]] = []
        appends: list[_Job] = []
        for job in jobs:
            if job.future.done():  # cancelled while waiting: never started
                continue
            if job.append is not None:
                appends.append(job)
                continue
            assert job.fn is not None
            try:
                answers.append((job, job.fn(*job.args)))
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    answers.append((job, exc))
                elif now < job.deadline:
                    retry.append(job)
                else:
                    answers.append((job, _locked()))
            except Exception as exc:
                answers.append((job, exc))
        handed = False
        try:
            if appends:
                handed = self._run_appends(appends, retry, answers, now)
        finally:
            _answer(answers)
        return handed

    def _run_appends(
        self,
        jobs: list[_Job],
        retry: list[_Job],
        answers: list[tuple[_Job, object]],
        now: float,
    ) -> bool:
        self._lone = self._lone + 1 if len(jobs) == 1 else 0
        try:
            if len(jobs) == 1 and self._lone >= _LONE_STREAK:
                answers.append((jobs[0], append_alone(self.db, jobs[0].append)))  # type: ignore[arg-type]
                return False
            outcomes = begin_group(self.db, [job.append for job in jobs])  # type: ignore[misc]
        except sqlite3.OperationalError as exc:
            for job in jobs:
                if not is_busy(exc):
                    answers.append((job, _group_failed(exc, len(jobs))))
                elif now < job.deadline:
                    retry.append(job)
                else:
                    answers.append((job, _locked()))
            return False
        except Exception as exc:
            answers.extend((job, _group_failed(exc, len(jobs))) for job in jobs)
            return False
        with self._mutex:
            self._committing = True
            self._draining = False  # from now on the writer thread starts the next drain
        if self._writer is None:
            self._writer = _Writer()
        self._writer.submit(lambda: self._commit(jobs, outcomes))
        return True

    def _commit(self, jobs: list[_Job], outcomes: list[int | BaseException]) -> None:
        """On the writer thread, holding the connection: commit the group, release the
        connection, answer the members, and start the next drain if appends are waiting."""
        answers: list[tuple[_Job, object]]
        try:
            commit_group(self.db, [job.append for job in jobs])  # type: ignore[misc]
        except Exception as exc:
            answers = [
                (job, out if isinstance(out, BaseException) else _group_failed(exc, len(jobs)))
                for job, out in zip(jobs, outcomes, strict=True)
            ]
        else:
            answers = list(zip(jobs, outcomes, strict=True))
        finally:
            with self._mutex:
                self._committing = False
                kick = bool(self._queue) and not self._draining
                self._draining = self._draining or kick
                target = self._queue[0].loop if kick else None
            self._lock.release()
        _answer(answers)
        if target is not None:
            try:
                target.call_soon_threadsafe(self._drain)
            except RuntimeError:  # that loop is closed; whoever waits next kicks again
                with self._mutex:
                    self._draining = False

    def check_open(self) -> None:
        if self._closed:
            raise StoreClosedError()

    async def close(self) -> None:
        """Refuse new calls, let the calls already in line finish, close the connection."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
        while True:
            with self._mutex:
                busy = self._queue or self._committing or self._draining
            if not busy:
                break
            # Rare (a close racing its own calls), so a short poll rather than a signal
            # that every thread's loop would have to deliver.
            await asyncio.sleep(0.001)
        with self._lock:
            self.db.close()
        if self._writer is not None:
            self._writer.stop()


class _Writer:
    """The thread that runs group COMMITs (fsyncs) while the event loop keeps running."""

    def __init__(self) -> None:
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._serve, name="flowledger-sqlite-commit", daemon=True
        )
        self._thread.start()

    def submit(self, task: Callable[[], None]) -> None:
        self._tasks.put(task)

    def _serve(self) -> None:
        while (task := self._tasks.get()) is not None:
            task()

    def stop(self) -> None:
        self._tasks.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join()


def _answer(answers: Iterable[tuple[_Job, object]]) -> None:
    """Settle each job's future on its own event loop: directly if that is this thread's
    loop, else with one thread-safe callback per loop."""
    try:
        here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    elsewhere: dict[asyncio.AbstractEventLoop, list[tuple[_Job, object]]] = {}
    for job, outcome in answers:
        if job.loop is here:
            _settle(job, outcome)
        else:
            elsewhere.setdefault(job.loop, []).append((job, outcome))
    for loop, batch in elsewhere.items():
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
            loop.call_soon_threadsafe(_settle_all, batch)


def _settle_all(answers: list[tuple[_Job, object]]) -> None:
    for job, outcome in answers:
        _settle(job, outcome)


def _settle(job: _Job, outcome: object) -> None:
    if job.future.done():
        return
    if isinstance(outcome, BaseException):
        job.future.set_exception(outcome)
    else:
        job.future.set_result(outcome)


def _locked() -> sqlite3.OperationalError:
    return sqlite3.OperationalError("database is locked (busy_timeout passed)")


def _group_failed(error: Exception, size: int) -> Exception:
    """What each member of a group is told when the group could not be written: the same
    error class (so callers that handle a database error still do), saying so."""
    what = (
        "this append was not written"
        if size == 1
        else f"the commit of a group of {size} ledger appends failed: none of them, "
        "this one included, was written"
    )
    failed: Exception
    if isinstance(error, sqlite3.Error):
        failed = type(error)(f"{error} ({what})")
        for attribute in ("sqlite_errorcode", "sqlite_errorname"):
            if hasattr(error, attribute):
                setattr(failed, attribute, getattr(error, attribute))
    elif size == 1:
        return error
    else:
        failed = StorageError(f"{error} ({what})")
    failed.__cause__ = error
    return failed
