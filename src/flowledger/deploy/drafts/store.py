"""`DraftStore`: a session's drafts over `storage.KV`, revisioned under compare-and-swap.

Key: ``sessions/<sid>/deploy/drafts/<name>``, one JSON record per draft
(`flowledger.deploy.drafts.record`). The draft's own ``revision`` counts its edits
(1, 2, 3, ...) and is what callers name; the KV revision of the key fences the write, so
of two edits made at the same revision exactly one is applied and the other is
`DraftConflictError` with nothing written. Every edit stores the new document with its
diagnostics, valid or not. At most `MAX_DRAFTS` drafts per session. A delete (at a
given revision, or the current one) replaces the record by a tombstone under the same
compare-and-swap, so it is exactly ordered with edits, and a draft created again under
that name continues the key's KV revisions (no edit of the old draft can land on it).

What a stored revision's diagnostics are is the store's ``check``: by default the
artifact's own validation (`diagnose`); `DraftService` adds the checks against the
catalog (`flowledger.deploy.drafts.contracts`). The check runs between reading the draft
and the compare-and-swap, so what is stored is the check of exactly that document.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from flowledger import storage
from flowledger.workflows.authoring.metadata import NAME_PATTERN
from flowledger.workflows.records.run import is_id

from .diagnostics import Diagnosis, diagnose
from .errors import (
    DraftConflictError,
    DraftCorruptError,
    DraftExistsError,
    DraftLimitError,
    DraftNotFoundError,
)
from .patch import apply_patch, check_storable
from .record import Draft, decode_draft, encode_draft, encode_tombstone, timestamp

__all__ = ["MAX_DRAFTS", "Check", "DraftStore", "artifact_check"]

MAX_DRAFTS: Final = 256

#: ``(draft name, document, bindings, revision) -> its diagnosis``; ``revision`` is the
#: one the document is stored as (what a next action patches).
Check = Callable[[str, Any, Mapping[str, str], int], Awaitable[Diagnosis]]


async def artifact_check(
    name: str, document: Any, bindings: Mapping[str, str], revision: int
) -> Diagnosis:
    """The artifact's own validation only."""
    return diagnose(document, name, revision)


@dataclass(frozen=True, slots=True)
class _Entry:
    draft: Draft | None  # None: a tombstone
    kv_revision: int


class DraftStore:
    """Drafts per session (every method takes the session id, a canonical UUID, first)."""

    def __init__(self, kv: storage.KV, check: Check = artifact_check) -> None:
        if not isinstance(kv, storage.KV):
            raise TypeError("DraftStore requires a storage.KV")
        self._kv = kv
        self._check = check

    @classmethod
    def over(cls, store: storage.Store) -> DraftStore:
        return cls(store.kv)

    @staticmethod
    def _prefix(session_id: str) -> str:
        if not is_id(session_id) or set(session_id) <= {"0", "-"}:
            raise ValueError(f"session id must be a canonical lowercase UUID, not {session_id!r}")
        return f"sessions/{session_id}/deploy/drafts/"

    @staticmethod
    def check_name(name: Any) -> str:
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise ValueError(f"draft name {str(name)[:80]!r} must match ^{NAME_PATTERN.pattern}$")
        return name

    def _key(self, session_id: str, name: str) -> str:
        return storage.validate_name(self._prefix(session_id) + self.check_name(name))

    async def _entry(self, session_id: str, name: str) -> _Entry | None:
        key = self._key(session_id, name)
        try:
            entry = await self._kv.get(key)
        except storage.KeyNotFoundError:
            return None
        except storage.CorruptDataError as exc:
            raise DraftCorruptError(key, str(exc)) from exc
        return _Entry(decode_draft(key, entry.value, name), entry.revision)

    async def _live(self, session_id: str, name: str) -> tuple[Draft, int]:
        entry = await self._entry(session_id, name)
        if entry is None or entry.draft is None:
            raise DraftNotFoundError(name)
        return entry.draft, entry.kv_revision

    # -- reading ----------------------------------------------------------------------

    async def get(self, session_id: str, name: str) -> Draft:
        return (await self._live(session_id, name))[0]

    async def list(self, session_id: str) -> builtins.list[Draft]:
        """Every draft of the session, by name."""
        prefix = self._prefix(session_id)
        found: builtins.list[Draft] = []
        for key in sorted(await self._kv.keys(prefix)):
            entry = await self._entry(session_id, key[len(prefix) :])
            if entry is not None and entry.draft is not None:
                found.append(entry.draft)
        return found

    # -- writing ----------------------------------------------------------------------

    async def create(
        self,
        session_id: str,
        name: str,
        document: Any,
        *,
        bindings: Mapping[str, str] | None = None,
        origin: Mapping[str, Any] | None = None,
    ) -> Draft:
        """Revision 1 of a new draft; `DraftExistsError` if the name is taken."""
        key = self._key(session_id, name)
        check_storable(document)
        existing = await self._entry(session_id, name)
        if existing is not None and existing.draft is not None:
            raise DraftExistsError(name)
        if len(await self.list(session_id)) >= MAX_DRAFTS:
            raise DraftLimitError(MAX_DRAFTS)
        now = timestamp()
        diagnosis = await self._check(name, document, dict(bindings or {}), 1)
        draft = Draft(
            name,
            1,
            document,
            diagnosis.valid,
            diagnosis.digest,
            diagnosis.diagnostics,
            diagnosis.truncated,
            dict(bindings or {}),
            dict(origin or {}),
            diagnosis.capabilities,
            now,
            now,
        )
        try:
            await self._kv.put(
                key, encode_draft(draft), expected=0 if existing is None else existing.kv_revision
            )
        except storage.ConflictError:
            raise DraftExistsError(name) from None
        return draft

    async def edit(
        self,
        session_id: str,
        name: str,
        revision: int,
        change: Callable[[Draft], tuple[Any, Mapping[str, str]]],
    ) -> Draft:
        """Apply ``change`` (the draft -> its new document and bindings; it raises to
        refuse) to revision ``revision`` and store the result as ``revision + 1`` under
        compare-and-swap. A stale revision, or another edit winning the race, is
        `DraftConflictError`; nothing is written then, nor when ``change`` raises."""
        current, kv_revision = await self._live(session_id, name)
        if current.revision != revision:
            raise DraftConflictError(name, revision, current.revision)
        document, bindings = change(current)
        check_storable(document)
        diagnosis = await self._check(name, document, bindings, revision + 1)
        new = replace(
            current,
            revision=revision + 1,
            document=document,
            valid=diagnosis.valid,
            digest=diagnosis.digest,
            diagnostics=diagnosis.diagnostics,
            truncated=diagnosis.truncated,
            capabilities=diagnosis.capabilities,
            bindings=dict(bindings),
            updated_at=timestamp(),
        )
        try:
            await self._kv.put(self._key(session_id, name), encode_draft(new), expected=kv_revision)
        except (storage.ConflictError, storage.KeyNotFoundError):
            raise DraftConflictError(name, revision, None) from None
        return new

    async def patch(
        self, session_id: str, name: str, revision: int, operations: Sequence[Any]
    ) -> Draft:
        """Apply an RFC 6902 patch to revision ``revision`` (see `edit`)."""
        return await self.edit(
            session_id,
            name,
            revision,
            lambda draft: (apply_patch(draft.document, operations), draft.bindings),
        )

    async def delete(self, session_id: str, name: str, revision: int | None = None) -> int:
        """Delete a draft at ``revision`` (default: its current one; another is
        `DraftConflictError`, nothing written); the revision deleted."""
        current, kv_revision = await self._live(session_id, name)
        if revision is not None and current.revision != revision:
            raise DraftConflictError(name, revision, current.revision)
        try:
            await self._kv.put(
                self._key(session_id, name), encode_tombstone(name), expected=kv_revision
            )
        except (storage.ConflictError, storage.KeyNotFoundError):
            raise DraftConflictError(name, current.revision, None) from None
        return current.revision
