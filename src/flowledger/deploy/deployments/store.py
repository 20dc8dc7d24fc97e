"""`DeploymentStore`: a session's deployments, each a sequence of immutable revisions
with a ``live`` pointer.

Layout (under the session, beside the artifacts):

* ``sessions/<sid>/deploy/deployments/blobs/sha256/<digest>`` (Blobs): the canonical
  bytes of a deployment document (content-addressed, so two identical revisions share
  one blob);
* ``.../revisions/<name>/<n>`` (KV, created once with ``expected=0``, never rewritten):
  ``{"digest", "size", "saved_at"}`` of revision ``n`` (1, 2, 3, ...);
* ``.../live/<name>`` (KV): ``{"revision": n}``, moved by compare-and-swap.

`save` validates the document, checks that the artifact it names is saved, writes the
blob, takes the next revision number by create-only put (of two racing saves, each gets
its own number), adds a ``deployment`` reference to the artifact (so it cannot be
deleted while a revision names it) and moves ``live`` to the new revision. A crash
after the revision is written but before ``live`` moves leaves a revision that is not
live; `set_live` makes it so. `rollback` moves ``live`` back to an earlier revision;
revisions themselves never change.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import rfc8785

from flowledger import storage
from flowledger.workflows.authoring.metadata import NAME_PATTERN
from flowledger.workflows.records.run import is_id

from ..artifacts.records import Referrer
from ..artifacts.store import ArtifactStore
from .document import ValidatedDeployment, load_deployment, validate_deployment

__all__ = [
    "DeploymentConflictError",
    "DeploymentCorruptError",
    "DeploymentNotFoundError",
    "DeploymentRevision",
    "DeploymentStore",
]

_RETRIES: Final = 32


class DeploymentNotFoundError(LookupError):
    def __init__(self, name: str, revision: int | None = None) -> None:
        self.name = name
        self.revision = revision
        what = f"deployment {name!r}" + ("" if revision is None else f" revision {revision}")
        super().__init__(f"{what} does not exist")


class DeploymentConflictError(Exception):
    """``live`` moved since it was read (compare-and-swap lost)."""


class DeploymentCorruptError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class DeploymentRevision:
    """One saved revision: its number, bytes' digest, and the validated document."""

    name: str
    revision: int
    digest: str
    saved_at: str
    validated: ValidatedDeployment
    live: bool = False

    def to_json(self) -> dict[str, Any]:
        deployment = self.validated.deployment
        return {
            "name": self.name,
            "revision": self.revision,
            "live": self.live,
            "digest": self.digest,
            "saved_at": self.saved_at,
            "artifact": {"name": deployment.artifact.name, "version": deployment.artifact.version},
            "drift": deployment.drift,
            "document": json.loads(self.validated.canonical),
        }


def _now() -> str:
    moment = datetime.now(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}Z"


class DeploymentStore:
    """Deployments per session over `storage.KV` and `storage.Blobs`."""

    def __init__(self, kv: storage.KV, blobs: storage.Blobs, artifacts: ArtifactStore) -> None:
        self._kv = kv
        self._blobs = blobs
        self._artifacts = artifacts

    @classmethod
    def over(cls, store: storage.Store) -> DeploymentStore:
        return cls(store.kv, store.blobs, ArtifactStore.over(store))

    @staticmethod
    def _base(session_id: str) -> str:
        if not is_id(session_id):
            raise ValueError(f"session id must be a canonical lowercase UUID, not {session_id!r}")
        return f"sessions/{session_id}/deploy/deployments"

    @staticmethod
    def _check(name: str) -> None:
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise ValueError(f"deployment name {name!r} must match ^{NAME_PATTERN.pattern}$")

    def _revision_key(self, session_id: str, name: str, revision: int) -> str:
        self._check(name)
        return storage.validate_name(f"{self._base(session_id)}/revisions/{name}/{revision:010d}")

    def _live_key(self, session_id: str, name: str) -> str:
        self._check(name)
        return storage.validate_name(f"{self._base(session_id)}/live/{name}")

    def _blob_key(self, session_id: str, digest: str) -> str:
        return storage.validate_name(f"{self._base(session_id)}/blobs/sha256/{digest}")

    # -- reading ----------------------------------------------------------------------

    async def revisions(self, session_id: str, name: str) -> builtins.list[int]:
        prefix = self._revision_key(session_id, name, 0)[: -len("0000000000")]
        numbers = []
        for key in await self._kv.keys(prefix):
            tail = key[len(prefix) :]
            if not tail.isdigit():
                raise DeploymentCorruptError(f"{key}: not a revision key")
            numbers.append(int(tail))
        return sorted(numbers)

    async def live_revision(self, session_id: str, name: str) -> int | None:
        entry = await self._live_entry(session_id, name)
        return None if entry is None else entry[0]

    async def _live_entry(self, session_id: str, name: str) -> tuple[int, int] | None:
        key = self._live_key(session_id, name)
        try:
            entry = await self._kv.get(key)
        except storage.KeyNotFoundError:
            return None
        try:
            revision = json.loads(entry.value)["revision"]
        except (ValueError, KeyError, TypeError) as exc:
            raise DeploymentCorruptError(f"{key}: {exc}") from None
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
            raise DeploymentCorruptError(f"{key}: bad revision {revision!r}")
        return revision, entry.revision

    async def get(
        self, session_id: str, name: str, revision: int | None = None
    ) -> DeploymentRevision:
        """Revision ``revision`` of ``name``, or the live one (`DeploymentNotFoundError`)."""
        live = await self.live_revision(session_id, name)
        wanted = live if revision is None else revision
        if wanted is None:
            raise DeploymentNotFoundError(name)
        key = self._revision_key(session_id, name, wanted)
        try:
            entry = await self._kv.get(key)
        except storage.KeyNotFoundError:
            raise DeploymentNotFoundError(name, wanted) from None
        try:
            record = json.loads(entry.value)
            digest, size, saved_at = record["digest"], record["size"], record["saved_at"]
            data = await self._blobs.get(self._blob_key(session_id, digest))
        except (ValueError, KeyError, TypeError, storage.BlobNotFoundError) as exc:
            raise DeploymentCorruptError(f"{key}: {exc}") from None
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            raise DeploymentCorruptError(f"{key}: the stored bytes differ from their digest")
        validated = load_deployment(data)
        if validated.name != name:
            raise DeploymentCorruptError(f"{key}: the document names {validated.name!r}")
        return DeploymentRevision(name, wanted, digest, saved_at, validated, wanted == live)

    async def list(self, session_id: str) -> builtins.list[dict[str, Any]]:
        """Every deployment: name, live revision and the number of revisions, by name."""
        prefix = f"{self._base(session_id)}/revisions/"
        names = sorted({key[len(prefix) :].split("/", 1)[0] for key in await self._kv.keys(prefix)})
        found = []
        for name in names:
            found.append(
                {
                    "name": name,
                    "live": await self.live_revision(session_id, name),
                    "revisions": len(await self.revisions(session_id, name)),
                }
            )
        return found

    # -- writing ----------------------------------------------------------------------

    async def save(
        self, session_id: str, document: str | bytes | dict[str, Any]
    ) -> DeploymentRevision:
        """Save ``document`` (YAML/JSON text or JSON data) as the next revision and make
        it live. `DeploymentValidationError` or `ArtifactNotFoundError` before anything
        is written."""
        validated = (
            validate_deployment(document)
            if isinstance(document, dict)
            else load_deployment(document)
        )
        name = validated.name
        self._check(name)
        artifact = validated.deployment.artifact
        await self._artifacts.record(session_id, artifact.name, artifact.version)
        await self._blobs.put(self._blob_key(session_id, validated.digest), validated.canonical)
        saved_at = _now()
        value = rfc8785.dumps(
            {"digest": validated.digest, "size": len(validated.canonical), "saved_at": saved_at}
        )
        for _ in range(_RETRIES):
            existing = await self.revisions(session_id, name)
            number = (existing[-1] if existing else 0) + 1
            try:
                await self._kv.put(self._revision_key(session_id, name, number), value, expected=0)
                break
            except storage.ConflictError:
                continue
        else:
            raise DeploymentConflictError(f"deployment {name!r}: revisions kept being taken")
        await self._artifacts.add_reference(
            session_id, artifact.name, artifact.version, Referrer("deployment", name)
        )
        await self._move_live(session_id, name, number, forward=True)
        return await self.get(session_id, name, number)

    async def set_live(
        self, session_id: str, name: str, revision: int, *, expected: int | None = None
    ) -> DeploymentRevision:
        """Point ``live`` at ``revision`` (which must exist). With ``expected``, only if
        ``live`` is still that revision (`DeploymentConflictError` otherwise)."""
        await self.get(session_id, name, revision)
        await self._move_live(session_id, name, revision, expected=expected)
        return await self.get(session_id, name, revision)

    async def rollback(self, session_id: str, name: str) -> DeploymentRevision:
        """Move ``live`` to the highest revision below it."""
        live = await self.live_revision(session_id, name)
        if live is None:
            raise DeploymentNotFoundError(name)
        earlier = [n for n in await self.revisions(session_id, name) if n < live]
        if not earlier:
            raise DeploymentNotFoundError(name, live - 1)
        return await self.set_live(session_id, name, earlier[-1], expected=live)

    async def _move_live(
        self,
        session_id: str,
        name: str,
        revision: int,
        *,
        expected: int | None = None,
        forward: bool = False,
    ) -> None:
        key = self._live_key(session_id, name)
        value = rfc8785.dumps({"revision": revision})
        for _ in range(_RETRIES):
            current = await self._live_entry(session_id, name)
            if expected is not None and (current is None or current[0] != expected):
                raise DeploymentConflictError(
                    f"deployment {name!r}: live is revision "
                    f"{None if current is None else current[0]}, not {expected}"
                )
            if forward and current is not None and current[0] >= revision:
                return  # a racing save moved live past this one already
            try:
                await self._kv.put(key, value, expected=0 if current is None else current[1])
                return
            except storage.ConflictError:
                continue
        raise DeploymentConflictError(f"deployment {name!r}: live kept moving")
