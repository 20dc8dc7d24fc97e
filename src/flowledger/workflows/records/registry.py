"""`RunRegistry`: run records in a KV store, changed only by checked compare-and-swap.

One key per run (`run_key`), holding `encode_run` bytes; the KV revision is
the run's `Run.revision`. Every write is either create-only or a CAS at the
revision the caller read, so two writers can never both win, and a rejected
write leaves the stored record unchanged. Records of another session are
invisible (not found, never listed). Storage errors other than the expected
conflict / not-found cases propagate unchanged (with a note naming the
operation), so callers can treat them as transient.

Beside the records, a newest-first run order index (`order_prefix`) that `list_newest`
pages through: written before the record on create and on a status move, so a run is
never missing from it; an entry without a matching record (a crash in between, a status
left behind) is skipped by the listing, which checks every run it returns.

A forked run (``forked_from`` set) also gets its fork marker (`forks.fork_marker_key`:
an empty value under ``sessions/<sid>/workflows/forks/<origin run id>/<fork run id>``),
written before its record like the order entries, so a run some fork refers to is always
findable from the origin's ID - retention relies on exactly that layout to never prune
such a run.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Final

from flowledger import storage
from flowledger.observability import tracing

from ..errors import ConflictError, CorruptRecordError, InvalidForkError, NotFoundError
from .forks import fork_marker_key
from .run import (
    DEFAULT_RUN_PAGE_SIZE,
    MAX_RUN_PAGE_SIZE,
    Run,
    RunStatus,
    can_transition,
    decode_run,
    encode_run,
    is_id,
    pruning_key,
    run_key,
    runs_prefix,
)
from .unfinished import UnfinishedIndex

__all__ = ["RunPage", "RunRegistry", "RunWitness", "order_prefix", "status_prefix"]

log = logging.getLogger(__name__)


#: ``witness(session_id, run_id)``: whether the run left a record that only ever comes
#: after its run record was created (its activity journal). A run record not found whose
#: run left one is damage, not absence (`RunRegistry.get`).
RunWitness = Callable[[str, str], Awaitable[bool]]


@dataclass(frozen=True)
class RunPage:
    """One page of a session's runs, ordered by run ID text.

    ``next`` is the cursor for the following page (the last run's ID), or
    ``""`` when this page is empty or nothing follows it.
    """

    runs: list[Run]
    next: str


ORDER_SEGMENT: Final = "workflows/run-order"
_ALL: Final = "all/"
_INDEXED: Final = "indexed"  # written once every run of the session has its entries
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
# A filtered page reads at most this many index entries per returned run slot: a rare
# status or definition among many runs gives a short page with a cursor, never a scan.
_SCAN_FACTOR: Final = 4


def order_prefix(session_id: str) -> str:
    """``sessions/<sid>/workflows/run-order/``: the session's newest-first listing index.

    Each run has three empty entries, ``all/<rank>-<run>``, ``status/<status>/<rank>-<run>``
    and ``definition/<digest>/<rank>-<run>``, where ``<rank>`` is ``created_at`` in
    microseconds since the epoch, zero-padded so that key order is time order.
    """
    return runs_prefix(session_id).removesuffix("workflows/runs/") + ORDER_SEGMENT + "/"


def _rank(run: Run) -> str:
    delta = run.created_at - _EPOCH
    total = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return f"{max(total, 0):017d}-{run.id}"


def _definition_segment(name: str) -> str:
    # Definition names need not be valid key names; a digest always is.
    return "definition/" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:32] + "/"


def _status_segment(status: str) -> str:
    return f"status/{status}/"


def status_prefix(session_id: str, status: RunStatus) -> str:
    """The prefix of the listing index's entries of the session's runs with ``status``:
    listing its keys counts them without reading a record (a leftover entry of a run
    that moved on, after a delete that failed, is counted too until it is cleaned up)."""
    return order_prefix(session_id) + _status_segment(str(status))


def _entries(run: Run) -> list[str]:
    prefix = order_prefix(run.session_id)
    rank = _rank(run)
    return [
        prefix + _ALL + rank,
        prefix + _status_segment(str(run.status)) + rank,
        prefix + _definition_segment(run.definition_name) + rank,
    ]


def _is_cursor(text: str) -> bool:
    rank, sep, run_id = text.partition("-")
    return bool(sep) and len(rank) == 17 and rank.isdigit() and is_id(run_id)


def _trace_attributes(run: Run) -> dict[str, str | int | bool]:
    """What the ``flowledger.run`` span of a new run names (never its input)."""
    attributes: dict[str, str | int | bool] = {
        "flowledger.run.id": run.id,
        "flowledger.graph_run.id": run.graph_run_id,
        "flowledger.definition.name": run.definition_name,
        "flowledger.definition.version": run.definition_version,
    }
    if run.parent_run_id is not None:
        attributes["flowledger.parent_run.id"] = run.parent_run_id
    if run.forked_from is not None:
        attributes["flowledger.forked_from.run.id"] = run.forked_from.run_id
    return attributes


def _identity(run: Run) -> tuple[object, ...]:
    """The fields a CAS may never change (``created_at`` compared as an instant)."""
    return (
        run.session_id,
        run.tool_execution_id,
        run.definition_name,
        run.definition_version,
        run.id,
        run.graph_run_id,
        run.parent_run_id,
        run.artifact_session_id,
        run.artifact_run_id,
        run.artifact_input_kind,
        run.artifact_input_session_id,
        run.artifact_input_run_id,
        run.input,
        run.ledger_locator,
        run.created_at,
        run.forked_from,
        run.scheduled_by,
        run.trace_parent,
    )


def _before(new: object, old: object) -> bool:
    """``new < old``; values that cannot be compared are left to validation on encode."""
    try:
        return bool(new < old)  # type: ignore[operator]
    except TypeError:
        return False


def _with_default_namespace(run: Run) -> Run:
    if (
        run.artifact_session_id is None
        and run.artifact_run_id is None
        and run.artifact_input_kind == ""
        and run.artifact_input_session_id is None
        and run.artifact_input_run_id is None
    ):
        return dataclasses.replace(run, artifact_session_id=run.session_id, artifact_run_id=run.id)
    return run


class RunRegistry:
    """Create, read, update (CAS) and page through run records of any session.

    With an ``index`` (`UnfinishedIndex`), the registry keeps it: `create` writes the
    run's entry before the record, and a compare-and-swap that makes a run completed or
    cancelled deletes it afterwards (a failed delete is only logged; workers remove stale
    entries). A failed run keeps its entry: its owner removes it once the run's
    activities are published (`UnfinishedIndex`). With a ``witness`` (`RunWitness`), a
    record not found of a run that left its journal is corrupt, not absent (`get`).
    """

    def __init__(
        self,
        kv: storage.KV,
        *,
        index: UnfinishedIndex | None = None,
        witness: RunWitness | None = None,
    ) -> None:
        if not isinstance(kv, storage.KV):
            raise TypeError("RunRegistry requires a storage.KV")
        if index is not None and not isinstance(index, UnfinishedIndex):
            raise TypeError("RunRegistry index must be an UnfinishedIndex")
        self._kv = kv
        self._index = index
        self._witness = witness

    @property
    def index(self) -> UnfinishedIndex | None:
        """The unfinished-run index this registry keeps, if any."""
        return self._index

    @property
    def kv(self) -> storage.KV:
        """The store the records live in (admission keeps its slots there too)."""
        return self._kv

    async def create(self, run: Run) -> Run:
        """Store a new run record; return it with its KV revision (workflows-spec §3.7).

        ``run.revision`` must be 0 (`ValueError`). When all five artifact
        namespace fields are empty, ``artifact_session_id`` defaults to the
        session and ``artifact_run_id`` to the run ID; if any is set, none is
        defaulted. An invalid record is a `ValueError` and nothing is written.
        An existing record under the key is a `ConflictError` with reason
        ``run already exists``.
        """
        if not isinstance(run, Run):
            raise TypeError(f"expected a Run, not {type(run).__name__}")
        if run.revision != 0:
            raise ValueError("new run revision must be zero")
        run = _with_default_namespace(run)
        if run.trace_parent is None and tracing.ENABLED:
            run = replace(run, trace_parent=tracing.run_root(_trace_attributes(run)))
        key = run_key(run.session_id, run.id)
        data = encode_run(run)
        batched = await self._create_at_once(run, key, data)
        if batched is not None:
            return batched
        if self._index is not None and not run.status.terminal:
            try:
                await self._index.add(run.session_id, run.id)
            except Exception as exc:
                exc.add_note("index unfinished run")
                raise
        try:
            await self._mark_if_new(run.session_id)
            if run.forked_from is not None:  # before the record, like the order entries
                await self._order_add(
                    fork_marker_key(run.session_id, run.forked_from.run_id, run.id)
                )
            for entry in _entries(run):  # before the record: a listed run may lack a record,
                await self._order_add(entry)  # never a record its entries
        except Exception as exc:
            exc.add_note("create run metadata")
            raise
        try:
            revision = await self._kv.put(key, data, expected=0, **storage.fence_arg())
        except storage.ConflictError as exc:
            raise ConflictError(
                run.session_id, run.id, "run already exists", expected=0, actual=exc.actual
            ) from exc
        except Exception as exc:
            exc.add_note("create run metadata")
            raise
        return dataclasses.replace(run, revision=revision)

    async def _create_at_once(self, run: Run, key: str, data: bytes) -> Run | None:
        """`create`'s writes - the unfinished-index entry, the session's index marker if
        it is new, the fork marker and order entries, the record - in one transaction
        where the KV batches them (one commit instead of five or six, each a wait for the
        disk), so a crash leaves all of them or none. None where it cannot batch, or when
        a key exists (a create retried after a crash left its entries, or the record): the
        writes one at a time then keep what is there, or say the run already exists."""
        kv = self._kv
        index = self._index
        if not isinstance(kv, storage.BatchKV) or (index is not None and index.kv is not kv):
            return None
        writes: list[storage.KVWrite] = []
        if index is not None and not run.status.terminal:
            writes.append(index.entry(run.session_id, run.id))
        if await self._marker_missing(run.session_id):
            writes.append(storage.KVPut(order_prefix(run.session_id) + _INDEXED, b"", 0))
        if run.forked_from is not None:
            writes.append(
                storage.KVPut(
                    fork_marker_key(run.session_id, run.forked_from.run_id, run.id), b"", 0
                )
            )
        writes += [storage.KVPut(entry, b"", 0) for entry in _entries(run)]
        writes.append(storage.KVPut(key, data, 0))
        try:
            revisions = await kv.write_many(writes, **storage.fence_arg())
        except storage.ConflictError:
            return None
        except Exception as exc:
            exc.add_note("create run metadata")
            raise
        return dataclasses.replace(run, revision=revisions[-1])

    async def claim_fork(self, session_id: str, origin_run_id: str, fork_run_id: str) -> None:
        """Write the fork marker of ``fork_run_id`` under ``origin_run_id``, then make sure no
        prune is deleting the origin; otherwise take the marker back and raise
        `InvalidForkError` (``field`` ``revision``).

        With a prune, this is a handshake: a prune writes the origin's tombstone
        (`run.pruning_key`) and then lists its fork markers, a fork writes its marker and
        then reads the tombstone. Whichever goes second sees the other, so either the prune
        keeps the origin or the fork is refused; never a fork of a deleted run.
        """
        marker = fork_marker_key(session_id, origin_run_id, fork_run_id)
        await self._order_add(marker)
        try:
            await self._kv.get(pruning_key(session_id, origin_run_id))
            pruning = True
        except storage.KeyNotFoundError:
            pruning = False
        if not pruning:
            try:
                await self._kv.get(run_key(session_id, origin_run_id))
                return
            except storage.KeyNotFoundError:
                pass
        await self.release_fork(session_id, origin_run_id, fork_run_id)
        raise InvalidForkError("revision", f"run {origin_run_id} is being pruned")

    async def release_fork(self, session_id: str, origin_run_id: str, fork_run_id: str) -> None:
        """Take back a `claim_fork` marker of a fork that was refused before its record."""
        marker = fork_marker_key(session_id, origin_run_id, fork_run_id)
        await self._kv.delete(marker, **storage.fence_arg())

    async def get(self, session_id: str, run_id: str) -> Run:
        """The stored run with its revision.

        `ValueError` for a missing/malformed ID; `NotFoundError` (kind ``run``)
        if this session has no such run, so another session's run is not
        found; `CorruptRecordError` if the value fails its storage checksum or
        `decode_run`, or names another session or run than its key, and (with a
        witness) if it is not found although the run left its activity journal.
        """
        key = run_key(session_id, run_id)
        try:
            entry = await self._kv.get(key)
        except storage.KeyNotFoundError:
            entry = await self._after_miss(session_id, run_id, key)
        except storage.CorruptDataError as exc:
            raise CorruptRecordError(key, exc) from exc
        except Exception as exc:
            exc.add_note("read run metadata")
            raise
        run = decode_run(key, entry.value)
        if run.session_id != session_id or run.id != run_id:
            raise CorruptRecordError(key, "record identity does not match its key")
        return dataclasses.replace(run, revision=entry.revision)

    async def _after_miss(self, session_id: str, run_id: str, key: str) -> storage.Entry:
        """The run record was not found: `NotFoundError`, unless the run left a witness
        (`RunWitness`: its activity journal, written only after its record) and no prune
        is deleting it (its tombstone, read first: a prune deletes the record after writing
        the tombstone and the journal before removing it). Then the record was there and
        is lost, or a damaged index misses it: `CorruptRecordError`, as `list` says of
        a record whose key was damaged. A record that turns up on a second look (created
        meanwhile) is returned."""
        witness = self._witness
        if witness is None or await self._being_pruned(session_id, run_id):
            raise NotFoundError("run", session_id, run_id=run_id)
        if not await witness(session_id, run_id):
            raise NotFoundError("run", session_id, run_id=run_id)
        try:
            return await self._kv.get(key)
        except storage.KeyNotFoundError:
            raise CorruptRecordError(
                key, "the run record is not found, but the run's activity journal is"
            ) from None

    async def _being_pruned(self, session_id: str, run_id: str) -> bool:
        try:
            await self._kv.get(pruning_key(session_id, run_id))
        except storage.KeyNotFoundError:
            return False
        except storage.CorruptDataError:
            return True  # a tombstone is there, damaged or not
        return True

    async def compare_and_swap(self, expected_revision: int, next: Run) -> Run:
        """Replace the stored run at ``expected_revision`` with ``next``; return it re-revised.

        Checks, in order (workflows-spec §3.7): ``expected_revision`` must be
        nonzero (`ValueError`); ``next.revision`` must equal it ("record
        carries a different revision"); the current record is read (its
        errors propagate); its revision must equal it ("stale revision"); the
        immutable identity must be unchanged ("immutable run identity
        changed"); the status move must be legal ("illegal status transition
        <from> -> <to>"); checkpoint revision, activity cursor and
        ``updated_at`` must not decrease ("checkpoint revision moved
        backwards", "activity cursor moved backwards", "updated_at moved
        backwards"); ``next`` must be valid (`ValueError`); the KV CAS must win
        (a lost race is "stale revision"). Every refusal is a `ConflictError`
        (unless noted) and leaves the stored record unchanged.
        """
        if not isinstance(expected_revision, int) or isinstance(expected_revision, bool):
            raise TypeError("expected_revision must be an int")
        if expected_revision <= 0:
            raise ValueError("compare-and-swap requires a nonzero expected revision")
        if not isinstance(next, Run):
            raise TypeError(f"expected a Run, not {type(next).__name__}")

        def conflict(reason: str, actual: int) -> ConflictError:
            return ConflictError(
                next.session_id, next.id, reason, expected=expected_revision, actual=actual
            )

        if next.revision != expected_revision:
            raise conflict("record carries a different revision", next.revision)
        current = await self.get(next.session_id, next.id)
        actual = current.revision
        if actual != expected_revision:
            raise conflict("stale revision", actual)
        if _identity(next) != _identity(current):
            raise conflict("immutable run identity changed", actual)
        if not can_transition(current.status, next.status):
            raise conflict(f"illegal status transition {current.status} -> {next.status}", actual)
        if _before(next.checkpoint_revision, current.checkpoint_revision):
            raise conflict("checkpoint revision moved backwards", actual)
        if _before(next.activity_cursor, current.activity_cursor):
            raise conflict("activity cursor moved backwards", actual)
        if _before(next.updated_at, current.updated_at):
            raise conflict("updated_at moved backwards", actual)
        key = run_key(next.session_id, next.id)
        data = encode_run(next)
        moved = next.status is not current.status
        if moved:  # the new status entry first, so the run is always under its status
            await self._order_add(_entries(next)[1])
        try:
            revision = await self._kv.put(
                key, data, expected=expected_revision, **storage.fence_arg()
            )
        except storage.ConflictError as exc:
            raise conflict("stale revision", exc.actual) from exc
        except Exception as exc:
            exc.add_note("update run metadata")
            raise
        if moved:  # a leftover old entry is skipped by listing (it checks the record)
            try:
                await self._kv.delete(_entries(current)[1], **storage.fence_arg())
            except Exception as exc:
                log.warning(
                    "run %s is %s; unlisting its old status failed: %s", next.id, next.status, exc
                )
        if (
            self._index is not None
            and next.status.terminal
            and next.status is not RunStatus.FAILED
            and not current.status.terminal
        ):
            try:
                await self._index.remove(next.session_id, next.id)
            except Exception as exc:  # the transition stands; a worker removes the entry
                log.warning("run %s is %s; unindexing it failed: %s", next.id, next.status, exc)
        return dataclasses.replace(next, revision=revision)

    async def list(self, session_id: str, *, after: str = "", limit: int = 0) -> RunPage:
        """One page of this session's runs in ascending run-ID text order.

        ``limit`` 0 means `DEFAULT_RUN_PAGE_SIZE`; otherwise it must be in
        1..`MAX_RUN_PAGE_SIZE` (`ValueError`). ``after`` is ``""`` (from the
        start) or a run ID (`ValueError` "invalid run page cursor" otherwise);
        the page starts strictly after it, and that run need not exist. A key
        under the prefix that is not exactly a run ID (e.g. a nested key) is a
        `CorruptRecordError`, as is any record that fails to decode: either
        aborts the whole page. ``next`` is the last returned ID iff the page is
        non-empty and more keys follow it. On a `storage.PagedKV` only the page's
        keys are read (``keys_page``), so a page costs the same however many runs the
        session has, first page or last.
        """
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise TypeError("limit must be an int")
        if limit == 0:
            limit = DEFAULT_RUN_PAGE_SIZE
        if not 1 <= limit <= MAX_RUN_PAGE_SIZE:
            raise ValueError(f"run page limit {limit} is outside 1..{MAX_RUN_PAGE_SIZE}")
        if after != "" and not is_id(after):
            raise ValueError(f"invalid run page cursor {after!r}")
        prefix = runs_prefix(session_id)
        kv = self._kv
        try:
            if isinstance(kv, storage.PagedKV):  # only this page (and one key to know more)
                keys = await kv.keys_page(prefix, start=prefix + after, limit=limit + 1)
                start = 0
            else:
                keys = await kv.keys(prefix)
                start = bisect.bisect_right(keys, prefix + after)
        except Exception as exc:
            exc.add_note("list run metadata")
            raise
        runs: list[Run] = []
        index = start
        while index < len(keys) and len(runs) < limit:
            key = keys[index]
            index += 1
            run_id = key[len(prefix) :] if key.startswith(prefix) else ""
            if not is_id(run_id):
                raise CorruptRecordError(key, "run listing key is not a run ID under its prefix")
            runs.append(await self.get(session_id, run_id))
        more = index < len(keys)
        return RunPage(runs=runs, next=runs[-1].id if runs and more else "")

    async def _order_add(self, entry: str) -> None:
        try:
            await self._kv.put(entry, b"", expected=0, **storage.fence_arg())
        except storage.ConflictError:
            pass  # already there (a retried create, a backfill)
        except Exception as exc:
            exc.add_note("index run order")
            raise

    async def _mark_if_new(self, session_id: str) -> None:
        """A session's first run marks its index complete, so no reader has to backfill it
        (a read-only dashboard could not)."""
        if await self._marker_missing(session_id):
            await self._order_add(order_prefix(session_id) + _INDEXED)

    async def _marker_missing(self, session_id: str) -> bool:
        """Whether the session has neither its index marker nor any run yet (runs from
        before the index: the first listing backfills them and writes the marker)."""
        try:
            await self._kv.get(order_prefix(session_id) + _INDEXED)
            return False
        except storage.KeyNotFoundError:
            pass
        kv = self._kv
        if isinstance(kv, storage.PagedKV):
            return not await kv.keys_page(runs_prefix(session_id), limit=1)
        return not await kv.keys(runs_prefix(session_id))

    async def _backfill(self, session_id: str) -> None:
        """Give every run of the session its order entries, once (runs created before the
        index existed have none); afterwards every run gets them on create."""
        prefix = order_prefix(session_id)
        try:
            await self._kv.get(prefix + _INDEXED)
            return
        except storage.KeyNotFoundError:
            pass
        after = ""
        while True:
            page = await self.list(session_id, after=after, limit=MAX_RUN_PAGE_SIZE)
            for run in page.runs:
                for entry in _entries(run):
                    await self._order_add(entry)
            if not page.next:
                break
            after = page.next
        await self._order_add(prefix + _INDEXED)

    async def list_newest(
        self,
        session_id: str,
        *,
        status: str = "",
        definition: str = "",
        run_id_prefix: str = "",
        cursor: str = "",
        limit: int = 0,
    ) -> RunPage:
        """One page of this session's runs, newest (``created_at``) first, optionally only
        those with ``status`` and of ``definition``; with ``run_id_prefix``, the runs whose
        ID starts with it, in run-ID order.

        Reads one page off an index (`order_prefix`; `storage.PagedKV.keys_page`), never
        the whole session: a filter that matches few runs gives a short (even empty) page
        whose ``next`` continues the search, after at most ``4 * limit`` index entries.
        ``cursor`` is ``""`` or a previous page's ``next``. A store without ``keys_page``
        is listed whole, as `list` does.
        """
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise TypeError("limit must be an int")
        if limit == 0:
            limit = DEFAULT_RUN_PAGE_SIZE
        if not 1 <= limit <= MAX_RUN_PAGE_SIZE:
            raise ValueError(f"run page limit {limit} is outside 1..{MAX_RUN_PAGE_SIZE}")
        if run_id_prefix:
            if not run_id_prefix.isascii() or any(
                c not in "0123456789abcdef-" for c in run_id_prefix
            ):
                return RunPage(runs=[], next="")
            if cursor and not is_id(cursor):
                raise ValueError(f"invalid run page cursor {cursor!r}")
            base = runs_prefix(session_id)
            scan_prefix = base + run_id_prefix
            start = base + cursor if cursor else ""
            descending = False
        else:
            if cursor and not _is_cursor(cursor):
                raise ValueError(f"invalid run page cursor {cursor!r}")
            try:
                await self._backfill(session_id)
            except Exception:  # a read-only store of a session older than the index
                return await self._list_whole(
                    session_id, status, definition, run_id_prefix, cursor, limit
                )
            base = order_prefix(session_id)
            if status:
                base += _status_segment(status)
            elif definition:
                base += _definition_segment(definition)
            else:
                base += _ALL
            scan_prefix = base
            start = base + cursor if cursor else ""
            descending = True
        kv = self._kv
        if not isinstance(kv, storage.PagedKV):
            return await self._list_whole(
                session_id, status, definition, run_id_prefix, cursor, limit
            )
        runs: list[Run] = []
        budget = _SCAN_FACTOR * limit
        last = ""
        exhausted = False
        while len(runs) < limit and budget > 0:
            keys = await kv.keys_page(
                scan_prefix,
                start=start,
                limit=min(limit - len(runs) + 1, budget),
                descending=descending,
            )
            if not keys:
                exhausted = True
                break
            for key in keys:
                if len(runs) == limit:
                    break
                budget -= 1
                start = key
                last = key[len(base) :]
                run_id = last.partition("-")[2] if not run_id_prefix else last
                if not run_id_prefix and "/" in last:
                    continue  # the marker, or another family's entry
                run = await self._listed(session_id, run_id)
                if run is None:
                    continue
                if status and str(run.status) != status:
                    continue
                if definition and run.definition_name != definition:
                    continue
                runs.append(run)
        if not exhausted:
            more = await kv.keys_page(scan_prefix, start=start, limit=1, descending=descending)
            exhausted = not more
        return RunPage(runs=runs, next="" if exhausted else last)

    async def _listed(self, session_id: str, run_id: str) -> Run | None:
        if not is_id(run_id):
            return None
        try:
            return await self.get(session_id, run_id)
        except NotFoundError:
            return None  # an entry written before a record that never came

    async def _list_whole(
        self,
        session_id: str,
        status: str,
        definition: str,
        run_id_prefix: str,
        cursor: str,
        limit: int,
    ) -> RunPage:
        chosen: list[Run] = []
        after = ""
        while True:
            page = await self.list(session_id, after=after, limit=MAX_RUN_PAGE_SIZE)
            chosen.extend(
                run
                for run in page.runs
                if (not status or str(run.status) == status)
                and (not definition or run.definition_name == definition)
                and run.id.startswith(run_id_prefix)
            )
            if not page.next:
                break
            after = page.next
        if run_id_prefix:
            ordered = [(run.id, run) for run in chosen]
            ordered.sort(key=lambda item: item[0])
            rest = [item for item in ordered if item[0] > cursor]
        else:
            ordered = [(_rank(run), run) for run in chosen]
            ordered.sort(key=lambda item: item[0], reverse=True)
            rest = [item for item in ordered if not cursor or item[0] < cursor]
        shown = rest[:limit]
        more = len(rest) > limit
        return RunPage(runs=[run for _, run in shown], next=shown[-1][0] if shown and more else "")
