"""`DeploymentStore`: a session's deployments, each a sequence of immutable revisions
with a ``live`` pointer.

Layout (under the session, beside the artifacts):

* ``sessions/<sid>/deploy/deployments/blobs/sha256/<digest>`` (Blobs): the canonical
  bytes of a deployment document (content-addressed, so two identical revisions share
  one blob);
* ``.../revisions/<name>/<n>`` (KV, created once with ``expected=0``, never rewritten):
  ``{"digest", "size", "saved_at"}`` of revision ``n`` (1, 2, 3, ...);
* ``.../live/<name>`` (KV): ``{"revision": n}``, moved by compare-and-swap;
* ``.../retired/<name>`` (KV): ``{"last": n}``, written when a deployment is deleted, so
  a new deployment of the same name numbers its revisions after the deleted ones (a
  run's definition version ``r<n>`` always denotes one revision).

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
from collections.abc import Sequence
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
    code = "deployment_missing"

    def __init__(self, name: str, revision: int | None = None) -> None:
        self.name = name
        self.revision = revision
        what = f"deployment {name!r}" + ("" if revision is None else f" revision {revision}")
        super().__init__(f"{what} does not exist")


class DeploymentConflictError(Exception):
    """``live`` moved since it was read (compare-and-swap lost)."""

    code = "deployment_conflict"


class DeploymentCorruptError(Exception):
    code = "deployment_corrupt"


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

    def _retired_key(self, session_id: str, name: str) -> str:
        self._check(name)
        return storage.validate_name(f"{self._base(session_id)}/retired/{name}")

    async def _retired(self, session_id: str, name: str) -> int:
        """The highest revision number a deleted deployment of this name had (0: none)."""
        key = self._retired_key(session_id, name)
        try:
            value = json.loads((await self._kv.get(key)).value)["last"]
        except storage.KeyNotFoundError:
            return 0
        except (ValueError, KeyError, TypeError) as exc:
            raise DeploymentCorruptError(f"{key}: {exc}") from None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DeploymentCorruptError(f"{key}: bad revision {value!r}")
        return value

    async def _retire(self, session_id: str, name: str, last: int) -> None:
        key = self._retired_key(session_id, name)
        for _ in range(_RETRIES):
            try:
                entry = await self._kv.get(key)
                expected = entry.revision
            except storage.KeyNotFoundError:
                expected = 0
            value = rfc8785.dumps({"last": max(last, await self._retired(session_id, name))})
            try:
                await self._kv.put(key, value, expected=expected)
                return
            except storage.ConflictError:
                continue
        raise DeploymentConflictError(f"deployment {name!r}: kept being deleted")

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

    async def names(self, session_id: str) -> builtins.list[str]:
        """The names of the session's deployments (those with a revision), sorted."""
        prefix = f"{self._base(session_id)}/revisions/"
        return sorted({key[len(prefix) :].split("/", 1)[0] for key in await self._kv.keys(prefix)})

    async def list(
        self, session_id: str, names: Sequence[str] | None = None
    ) -> builtins.list[dict[str, Any]]:
        """Every deployment (or those of ``names``): name, live revision and the number
        of revisions, by name."""
        found = []
        for name in await self.names(session_id) if names is None else names:
            found.append(
                {
                    "name": name,
                    "live": await self.live_revision(session_id, name),
                    "revisions": len(await self.revisions(session_id, name)),
                }
            )
        return found

    async def artifacts_named(
        self, session_id: str, name: str
    ) -> builtins.dict[tuple[str, str], builtins.list[int]]:
        """``(artifact, version) -> [revision, ...]``: what each revision of ``name``
        runs (an empty dict for a deployment without revisions)."""
        named: dict[tuple[str, str], builtins.list[int]] = {}
        for number in await self.revisions(session_id, name):
            artifact = (await self.get(session_id, name, number)).validated.deployment.artifact
            named.setdefault((artifact.name, artifact.version), []).append(number)
        return named

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
        retired = await self._retired(session_id, name)
        for _ in range(_RETRIES):
            existing = await self.revisions(session_id, name)
            number = max(existing[-1] if existing else 0, retired) + 1
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

    async def rollback(
        self,
        session_id: str,
        name: str,
        *,
        expected: int | None = None,
        to: int | None = None,
    ) -> DeploymentRevision:
        """Make an earlier revision live again: ``to`` (below the live one), by default
        the highest revision below it. With ``expected``, only if ``live`` is still that
        revision (`DeploymentConflictError` otherwise, nothing moved). No revision is
        written: revisions are immutable, so the old one itself is live again (and a
        later `save` takes the number after the highest)."""
        live = await self.live_revision(session_id, name)
        if live is None:
            raise DeploymentNotFoundError(name)
        if expected is not None and live != expected:
            raise DeploymentConflictError(
                f"deployment {name!r}: live is revision {live}, not {expected}"
            )
        earlier = [n for n in await self.revisions(session_id, name) if n < live]
        if to is not None:
            if to >= live:
                raise ValueError(
                    f"deployment {name!r}: rollback goes to a revision below the live "
                    f"one ({live}), not {to}"
                )
            if to not in earlier:
                raise DeploymentNotFoundError(name, to)
        elif not earlier:
            raise DeploymentNotFoundError(name, live - 1)
        return await self.set_live(
            session_id, name, earlier[-1] if to is None else to, expected=live
        )

    async def delete(self, session_id: str, name: str) -> builtins.list[int]:
        """Delete every revision of ``name`` and its ``live`` pointer; the revision
        numbers deleted (`DeploymentNotFoundError` when there is nothing to delete).

        Whether anything still needs the deployment (an unfinished run) is the caller's
        check (`DeployService.deployment_delete`). The order keeps a crash harmless:
        ``live`` goes first (the deployment can no longer be run), then the revision
        records, then the blobs, then the deployment's references to its artifacts. A
        crash part-way leaves either revisions without ``live`` (deleting again
        finishes), orphan blobs nobody names, or references that name a deployment
        with no revision using the artifact (stale: deleting the artifact clears them).
        A save racing the delete keeps what it wrote: blobs and references still named
        by a revision that exists afterwards are left alone."""
        numbers = await self.revisions(session_id, name)
        live = await self._live_entry(session_id, name)
        if not numbers and live is None:
            raise DeploymentNotFoundError(name)
        named: set[tuple[str, str]] = set()
        digests: set[str] = set()
        for number in numbers:
            key = self._revision_key(session_id, name, number)
            try:
                record = json.loads((await self._kv.get(key)).value)
                digests.add(record["digest"])
                revision = await self.get(session_id, name, number)
            except storage.KeyNotFoundError:
                continue  # deleted by a racing delete
            except (ValueError, KeyError, TypeError, DeploymentCorruptError):
                continue  # a damaged revision is deleted all the same
            artifact = revision.validated.deployment.artifact
            named.add((artifact.name, artifact.version))
        if numbers:  # numbers are never reused: old runs' versions name old revisions
            await self._retire(session_id, name, numbers[-1])
        if live is not None:
            await self._kv.delete(self._live_key(session_id, name))
        for number in numbers:
            await self._kv.delete(self._revision_key(session_id, name, number))
        remaining = await self.revisions(session_id, name)  # a racing save's
        kept: set[str] = set()
        still: set[tuple[str, str]] = set()
        for number in remaining:
            revision = await self.get(session_id, name, number)
            kept.add(revision.digest)
            artifact = revision.validated.deployment.artifact
            still.add((artifact.name, artifact.version))
        for digest in sorted(digests - kept):
            await self._blobs.delete(self._blob_key(session_id, digest))
        for artifact_name, version in sorted(set(named) - still):
            await self._artifacts.remove_reference(
                session_id, artifact_name, version, Referrer("deployment", name)
            )
        return numbers

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
