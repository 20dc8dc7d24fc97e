"""`RunRegistry`: run records in a KV store, changed only by checked compare-and-swap.

One key per run (`run_key`), holding `encode_run` bytes; the KV revision is
the run's `Run.revision`. Every write is either create-only or a CAS at the
revision the caller read, so two writers can never both win, and a rejected
write leaves the stored record unchanged. Records of another session are
invisible (not found, never listed). Storage errors other than the expected
conflict / not-found cases propagate unchanged (with a note naming the
operation), so callers can treat them as transient.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
from dataclasses import dataclass

from flowledger import storage

from .errors import ConflictError, CorruptRecordError, NotFoundError
from .run import (
    DEFAULT_RUN_PAGE_SIZE,
    MAX_RUN_PAGE_SIZE,
    Run,
    can_transition,
    decode_run,
    encode_run,
    is_id,
    run_key,
    runs_prefix,
)
from .unfinished import UnfinishedIndex

__all__ = ["RunPage", "RunRegistry"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunPage:
    """One page of a session's runs, ordered by run ID text.

    ``next`` is the cursor for the following page (the last run's ID), or
    ``""`` when this page is empty or nothing follows it.
    """

    runs: list[Run]
    next: str


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
    run's entry before the record, and a compare-and-swap that makes a run terminal
    deletes it afterwards (a failed delete is only logged; workers remove stale entries).
    """

    def __init__(self, kv: storage.KV, *, index: UnfinishedIndex | None = None) -> None:
        if not isinstance(kv, storage.KV):
            raise TypeError("RunRegistry requires a storage.KV")
        if index is not None and not isinstance(index, UnfinishedIndex):
            raise TypeError("RunRegistry index must be an UnfinishedIndex")
        self._kv = kv
        self._index = index

    @property
    def index(self) -> UnfinishedIndex | None:
        """The unfinished-run index this registry keeps, if any."""
        return self._index

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
        key = run_key(run.session_id, run.id)
        data = encode_run(run)
        if self._index is not None and not run.status.terminal:
            try:
                await self._index.add(run.session_id, run.id)
            except Exception as exc:
                exc.add_note("index unfinished run")
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

    async def get(self, session_id: str, run_id: str) -> Run:
        """The stored run with its revision.

        `ValueError` for a missing/malformed ID; `NotFoundError` (kind ``run``)
        if this session has no such run, so another session's run is not
        found; `CorruptRecordError` if the value fails its storage checksum or
        `decode_run`, or names another session or run than its key.
        """
        key = run_key(session_id, run_id)
        try:
            entry = await self._kv.get(key)
        except storage.KeyNotFoundError:
            raise NotFoundError("run", session_id, run_id=run_id) from None
        except storage.CorruptDataError as exc:
            raise CorruptRecordError(key, exc) from exc
        except Exception as exc:
            exc.add_note("read run metadata")
            raise
        run = decode_run(key, entry.value)
        if run.session_id != session_id or run.id != run_id:
            raise CorruptRecordError(key, "record identity does not match its key")
        return dataclasses.replace(run, revision=entry.revision)

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
        try:
            revision = await self._kv.put(
                key, data, expected=expected_revision, **storage.fence_arg()
            )
        except storage.ConflictError as exc:
            raise conflict("stale revision", exc.actual) from exc
        except Exception as exc:
            exc.add_note("update run metadata")
            raise
        if self._index is not None and next.status.terminal and not current.status.terminal:
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
        non-empty and more keys follow it.
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
        try:
            keys = await self._kv.keys(prefix)
        except Exception as exc:
            exc.add_note("list run metadata")
            raise
        start = bisect.bisect_right(keys, prefix + after)
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
