"""`ArtifactStore`: a session's saved artifacts, immutable and content-addressed.

Layout (every key under the session, like the run registry's):

* ``sessions/<sid>/deploy/artifacts/blobs/sha256/<digest>`` (Blobs): the canonical
  bytes (RFC 8785 JSON of the artifact with defaults left out); ``digest`` is their
  SHA-256. Name and version are part of the bytes, so one blob belongs to one version.
* ``sessions/<sid>/deploy/artifacts/versions/<name>/<version>`` (KV): the version
  record: digest, size, the children resolved to their digests at save time (like a
  lockfile), the closure digest, the height of the child tree, and a state (``saved``
  or ``deleted``).
* ``sessions/<sid>/deploy/artifacts/refs/<name>/<version>/<kind>/<id>`` (KV): one key
  per referrer (a parent artifact, a deployment, a run). A referenced artifact cannot
  be deleted.

Rules: saving identical bytes under an existing version is a no-op; other bytes raise
`ArtifactConflictError`. A deleted version keeps its record as a tombstone and is never
reused, so ``name@version`` always denotes one content. Saving validates everything
first (the artifact, its children exist, no cycle, depth at most `MAX_CHILD_DEPTH`, at
most `MAX_CLOSURE_ARTIFACTS` artifacts in the closure, the child contracts) and writes
nothing when anything is wrong.

Deleting and referencing are fenced by compare-and-swap on the version record:
`add_reference` writes its key and then rewrites the record at the revision it read;
`delete` checks for references and then turns the record into a tombstone at the
revision it read. Exactly one of two racing calls wins, so a reference is never left
on a deleted artifact. A crash can leave a reference behind (after `add_reference`
wrote its key, or in the middle of a save); that keeps the artifact, never loses it,
and `remove_reference` clears it.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import rfc8785

from flowledger import storage
from flowledger.workflows.authoring.metadata import NAME_PATTERN, VERSION_PATTERN
from flowledger.workflows.records.run import is_id

from .errors import (
    ArtifactConflictError,
    ArtifactCorruptError,
    ArtifactInUseError,
    ArtifactIssue,
    ArtifactNotFoundError,
    ArtifactValidationError,
    place_of,
)
from .limits import MAX_CHILD_DEPTH, MAX_CLOSURE_ARTIFACTS
from .model import Artifact, ForeachNode, ForeachWorkflowBody, InterruptNode, WaitNode
from .records import (
    ArtifactRecord,
    ChildPin,
    Referrer,
    ReferrerKind,
    closure_digest,
    decode_record,
    encode_record,
)
from .validate import ValidatedArtifact, check_child_contracts, load_artifact, validate_artifact

__all__ = [
    "MAX_LISTED_REFERRERS",
    "ArtifactRecord",
    "ArtifactStore",
    "ChildPin",
    "Referrer",
    "ReferrerKind",
    "StoredArtifact",
]

MAX_LISTED_REFERRERS: Final = 10
_RETRIES: Final = 32  # compare-and-swap rounds before giving up on a contended record


@dataclass(frozen=True, slots=True)
class StoredArtifact:
    """A saved artifact read back: its record, and the artifact validated again."""

    record: ArtifactRecord
    validated: ValidatedArtifact

    @property
    def artifact(self) -> Artifact:
        return self.validated.artifact

    @property
    def canonical(self) -> bytes:
        return self.validated.canonical


@dataclass(frozen=True, slots=True)
class _Entry:
    record: ArtifactRecord
    deleted: bool
    revision: int
    raw: bytes


class ArtifactStore:
    """Saved artifacts per session over `storage.KV` and `storage.Blobs`. Every method
    takes the session id (a canonical lowercase UUID) first; sessions never see each
    other's artifacts."""

    def __init__(self, kv: storage.KV, blobs: storage.Blobs) -> None:
        if not isinstance(kv, storage.KV) or not isinstance(blobs, storage.Blobs):
            raise TypeError("ArtifactStore requires a storage.KV and a storage.Blobs")
        self._kv = kv
        self._blobs = blobs

    @classmethod
    def over(cls, store: storage.Store) -> ArtifactStore:
        return cls(store.kv, store.blobs)

    # -- keys -------------------------------------------------------------------------

    @staticmethod
    def _base(session_id: str) -> str:
        if not is_id(session_id) or set(session_id) <= {"0", "-"}:
            raise ValueError(f"session id must be a canonical lowercase UUID, not {session_id!r}")
        return f"sessions/{session_id}/deploy/artifacts"

    @staticmethod
    def _check(name: str, version: str) -> None:
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise ValueError(f"artifact name {name!r} must match ^{NAME_PATTERN.pattern}$")
        if not isinstance(version, str) or not VERSION_PATTERN.fullmatch(version):
            raise ValueError(f"artifact version {version!r} must match ^{VERSION_PATTERN.pattern}$")

    def _record_key(self, session_id: str, name: str, version: str) -> str:
        self._check(name, version)
        return storage.validate_name(f"{self._base(session_id)}/versions/{name}/{version}")

    def _blob_key(self, session_id: str, digest: str) -> str:
        return storage.validate_name(f"{self._base(session_id)}/blobs/sha256/{digest}")

    def _refs_prefix(self, session_id: str, name: str, version: str) -> str:
        self._check(name, version)
        return f"{self._base(session_id)}/refs/{name}/{version}/"

    def _ref_key(self, session_id: str, name: str, version: str, referrer: Referrer) -> str:
        prefix = self._refs_prefix(session_id, name, version)
        return storage.validate_name(f"{prefix}{referrer.kind}/{referrer.id}")

    # -- records ----------------------------------------------------------------------

    async def _entry(self, session_id: str, name: str, version: str) -> _Entry | None:
        key = self._record_key(session_id, name, version)
        try:
            entry = await self._kv.get(key)
        except storage.KeyNotFoundError:
            return None
        except storage.CorruptDataError as exc:
            raise ArtifactCorruptError(key, str(exc)) from exc
        record, deleted = decode_record(key, entry.value, name, version)
        return _Entry(record, deleted, entry.revision, entry.value)

    async def _saved(self, session_id: str, name: str, version: str, place: str) -> _Entry:
        entry = await self._entry(session_id, name, version)
        if entry is None or entry.deleted:
            raise ArtifactNotFoundError(name, version, place)
        return entry

    # -- the public operations --------------------------------------------------------

    async def save(
        self,
        session_id: str,
        artifact: ValidatedArtifact | Artifact | Mapping[str, Any] | str | bytes,
    ) -> ArtifactRecord:
        """Validate and save ``artifact`` (a validated artifact, a model, JSON data, or
        YAML/JSON text); return its record.

        Identical content under an existing version returns the existing record and
        writes nothing. `ArtifactValidationError` (every issue, with places; children
        missing, cyclic, too deep or not matching their use are issues at
        ``children.<name>`` or at the node), `ArtifactConflictError` (other content
        under this version, or a deleted version); nothing is written in either case."""
        validated = _validated(artifact)
        name, version = validated.name, validated.version
        existing = await self._entry(session_id, name, version)
        if existing is not None:
            if existing.record.digest == validated.digest and not existing.deleted:
                return existing.record
            raise ArtifactConflictError(
                name, version, existing.record.digest, validated.digest, deleted=existing.deleted
            )
        pins, height = await self._resolve_children(session_id, validated)
        record = ArtifactRecord(
            name,
            version,
            validated.digest,
            len(validated.canonical),
            closure_digest(validated.digest, pins),
            height,
            pins,
            datetime.now(UTC),
        )
        blob_key = self._blob_key(session_id, validated.digest)
        try:
            await self._blobs.put(blob_key, validated.canonical)
        except storage.BlobConflictError as exc:
            raise ArtifactCorruptError(blob_key, "the stored blob differs from its digest") from exc
        referrer = Referrer.artifact(name, version, validated.digest)
        added: list[ChildPin] = []
        try:
            for pin in pins:
                await self._add_reference(session_id, pin.name, pin.version, referrer, pin.digest)
                added.append(pin)
            await self._kv.put(
                self._record_key(session_id, name, version), encode_record(record), expected=0
            )
        except Exception as exc:
            winner = None
            if isinstance(exc, storage.ConflictError):
                winner = await self._entry(session_id, name, version)
                if (
                    winner is not None
                    and winner.record.digest == record.digest
                    and not (winner.deleted)
                ):
                    # The same content won: our references and blob are the winner's too.
                    return winner.record
            await self._undo_save(session_id, record, added, referrer)
            if isinstance(exc, storage.ConflictError):
                raise ArtifactConflictError(
                    name,
                    version,
                    winner.record.digest if winner is not None else record.digest,
                    record.digest,
                    deleted=winner is not None and winner.deleted,
                ) from None
            if isinstance(exc, ArtifactNotFoundError):
                raise ArtifactValidationError(
                    [
                        ArtifactIssue(
                            place_of("children", exc.name),
                            "child_missing",
                            f"child {exc.name}@{exc.version} was deleted while saving",
                        )
                    ]
                ) from None
            raise
        return record

    async def _undo_save(
        self,
        session_id: str,
        record: ArtifactRecord,
        added: list[ChildPin],
        referrer: Referrer,
    ) -> None:
        """Take back a save that did not happen: our references (their keys name our
        digest, so they are no one else's), and our blob unless a record now names it."""
        for pin in added:
            await self._kv.delete(self._ref_key(session_id, pin.name, pin.version, referrer))
        current = await self._entry(session_id, record.name, record.version)
        if current is None or current.record.digest != record.digest:
            await self._blobs.delete(self._blob_key(session_id, record.digest))

    async def _resolve_children(
        self, session_id: str, validated: ValidatedArtifact
    ) -> tuple[tuple[ChildPin, ...], int]:
        artifact = validated.artifact
        issues: list[ArtifactIssue] = []
        pins: list[ChildPin] = []
        height = 0
        closure: set[tuple[str, str]] = {(artifact.name, artifact.version)}
        contracts: dict[str, ValidatedArtifact] = {}
        for child_name, child_version in artifact.children.items():
            place = place_of("children", child_name)
            if (child_name, child_version) == (artifact.name, artifact.version):
                issues.append(ArtifactIssue(place, "child_cycle", "an artifact cannot run itself"))
                continue
            try:
                child = await self.get(session_id, child_name, child_version)
            except ArtifactNotFoundError:
                issues.append(
                    ArtifactIssue(
                        place,
                        "child_missing",
                        f"no saved artifact {child_name}@{child_version}",
                        "save the child first",
                    )
                )
                continue
            problem = await self._walk(session_id, child.record, closure, artifact)
            if problem:
                issues.append(ArtifactIssue(place, problem[0], problem[1]))
                continue
            if child.record.height + 1 > MAX_CHILD_DEPTH:
                issues.append(
                    ArtifactIssue(
                        place,
                        "child_too_deep",
                        f"children would nest {child.record.height + 1} levels; the limit is "
                        f"{MAX_CHILD_DEPTH}",
                    )
                )
                continue
            height = max(height, child.record.height + 1)
            contracts[child_name] = child.validated
            pins.append(
                ChildPin(
                    child_name, child_version, child.record.digest, child.record.closure_digest
                )
            )
        if len(closure) > MAX_CLOSURE_ARTIFACTS:
            issues.append(
                ArtifactIssue(
                    "children",
                    "closure_too_large",
                    f"{len(closure)} artifacts with every child's children; the limit is "
                    f"{MAX_CLOSURE_ARTIFACTS}",
                )
            )
        issues.extend(check_child_contracts(validated, contracts))
        issues.extend(await self._foreach_bodies(session_id, validated, contracts))
        if issues:
            raise ArtifactValidationError(issues)
        return tuple(pins), height

    async def _foreach_bodies(
        self,
        session_id: str,
        validated: ValidatedArtifact,
        children: Mapping[str, ValidatedArtifact],
    ) -> list[ArtifactIssue]:
        """A child run per foreach item may not pause: an interrupt node anywhere in the
        closure of a foreach body's child is refused (a paused item would hold the
        foreach's batch, and its siblings', open across a resume)."""
        issues: list[ArtifactIssue] = []
        for node_id, node in validated.artifact.nodes.items():
            if not isinstance(node, ForeachNode) or not isinstance(node.body, ForeachWorkflowBody):
                continue
            child = children.get(node.body.workflow)
            if child is None:
                continue
            closure = await self.closure(session_id, child.name, child.version)
            for key, stored in sorted(closure.items()):
                pausing = sorted(
                    (inner, candidate.kind)
                    for inner, candidate in stored.validated.artifact.nodes.items()
                    if isinstance(candidate, InterruptNode | WaitNode)
                )
                if pausing:
                    inner, kind = pausing[0]
                    issues.append(
                        ArtifactIssue(
                            place_of("nodes", node_id, "body", "workflow"),
                            "foreach_child_interrupt",
                            f"child {child.name}@{child.version} can pause: {key} has "
                            f"{kind} node {inner!r}; a foreach item cannot pause",
                            "run a child without interrupt or wait nodes, or use a workflow "
                            "node (which can pause) outside the foreach",
                        )
                    )
                    break
        return issues

    async def _walk(
        self,
        session_id: str,
        child: ArtifactRecord,
        closure: set[tuple[str, str]],
        root: Artifact,
    ) -> tuple[str, str] | None:
        """Add ``child``'s tree to ``closure``; a cycle back to ``root`` (or anywhere: only
        damaged records can hold one) or a closure over the bound is a problem."""
        pending: list[tuple[ArtifactRecord, tuple[tuple[str, str], ...]]] = [(child, ())]
        while pending:
            record, above = pending.pop()
            here = (record.name, record.version)
            if here == (root.name, root.version) or here in above:
                return "child_cycle", f"{record.name}@{record.version} runs itself through children"
            closure.add(here)
            if len(closure) > MAX_CLOSURE_ARTIFACTS:
                return "closure_too_large", (
                    f"more than {MAX_CLOSURE_ARTIFACTS} artifacts with every child's children"
                )
            for pin in record.children:
                entry = await self._entry(session_id, pin.name, pin.version)
                if entry is None or entry.deleted or entry.record.digest != pin.digest:
                    return "child_missing", (
                        f"{record.name}@{record.version} pins {pin.name}@{pin.version}, which is "
                        "no longer saved with that content"
                    )
                pending.append((entry.record, (*above, here)))
        return None

    async def get(self, session_id: str, name: str, version: str) -> StoredArtifact:
        """The saved artifact, verified (size, SHA-256, and validation again);
        `ArtifactNotFoundError` if absent or deleted, `ArtifactCorruptError` if the
        stored data fails verification."""
        entry = await self._saved(session_id, name, version, "$")
        record = entry.record
        key = self._blob_key(session_id, record.digest)
        try:
            data = await self._blobs.get(key)
        except storage.BlobNotFoundError:
            raise ArtifactCorruptError(key, "the artifact's blob is missing") from None
        except storage.CorruptDataError as exc:
            raise ArtifactCorruptError(key, str(exc)) from exc
        if len(data) != record.size or hashlib.sha256(data).hexdigest() != record.digest:
            raise ArtifactCorruptError(key, "the blob does not match its record's size and digest")
        try:
            validated = load_artifact(data, format="json")
        except ArtifactValidationError as exc:
            raise ArtifactCorruptError(
                key, f"the stored artifact no longer validates: {exc}"
            ) from exc
        if validated.digest != record.digest or (validated.name, validated.version) != (
            name,
            version,
        ):
            raise ArtifactCorruptError(key, "the stored artifact is not the one its record names")
        return StoredArtifact(record, validated)

    async def record(self, session_id: str, name: str, version: str) -> ArtifactRecord:
        """The version record alone (no blob read); `ArtifactNotFoundError` if absent."""
        return (await self._saved(session_id, name, version, "$")).record

    async def closure(self, session_id: str, name: str, version: str) -> dict[str, StoredArtifact]:
        """The artifact and every child, transitively, keyed ``name@version``; each child
        verified against the digest its parent pinned (`ArtifactCorruptError` if not)."""
        root = await self.get(session_id, name, version)
        found = {f"{name}@{version}": root}
        pending = [root]
        while pending:
            parent = pending.pop()
            for pin in parent.record.children:
                key = f"{pin.name}@{pin.version}"
                if key in found:
                    continue
                child = await self.get(session_id, pin.name, pin.version)
                if child.record.digest != pin.digest:
                    raise ArtifactCorruptError(key, "the child's digest differs from its pin")
                found[key] = child
                pending.append(child)
        return found

    async def list(self, session_id: str, name: str | None = None) -> list[ArtifactRecord]:
        """Saved (not deleted) versions, sorted by name then version (byte order); only
        those of ``name`` if given."""
        prefix = f"{self._base(session_id)}/versions/"
        if name is not None:
            self._check(name, "0")
            prefix += f"{name}/"
        records: list[ArtifactRecord] = []
        for key in await self._kv.keys(prefix):
            parts = key[len(f"{self._base(session_id)}/versions/") :].split("/")
            if len(parts) != 2:
                raise ArtifactCorruptError(key, "an unexpected key among artifact versions")
            entry = await self._entry(session_id, parts[0], parts[1])
            if entry is not None and not entry.deleted:
                records.append(entry.record)
        return records

    async def names(self, session_id: str) -> builtins.list[str]:
        """The names with a version record (saved or deleted), sorted; reads keys only."""
        prefix = f"{self._base(session_id)}/versions/"
        return sorted({key[len(prefix) :].split("/", 1)[0] for key in await self._kv.keys(prefix)})

    async def references(self, session_id: str, name: str, version: str) -> builtins.list[Referrer]:
        """Everything that refers to ``name@version``, sorted."""
        prefix = self._refs_prefix(session_id, name, version)
        found: builtins.list[Referrer] = []
        for key in await self._kv.keys(prefix):
            kind, _, ident = key[len(prefix) :].partition("/")
            try:
                found.append(Referrer(kind, ident))  # type: ignore[arg-type]
            except ValueError as exc:
                raise ArtifactCorruptError(key, f"a malformed reference key: {exc}") from None
        return found

    async def add_reference(
        self, session_id: str, name: str, version: str, referrer: Referrer
    ) -> None:
        """Record that ``referrer`` uses ``name@version``, which must be saved
        (`ArtifactNotFoundError` otherwise). Idempotent. While any reference exists the
        artifact cannot be deleted."""
        await self._add_reference(session_id, name, version, referrer, None)

    async def _add_reference(
        self, session_id: str, name: str, version: str, referrer: Referrer, digest: str | None
    ) -> None:
        if not isinstance(referrer, Referrer):
            raise TypeError(f"expected a Referrer, not {type(referrer).__name__}")
        key = self._ref_key(session_id, name, version, referrer)
        record_key = self._record_key(session_id, name, version)
        value = rfc8785.dumps({"kind": referrer.kind, "id": referrer.id})
        created = False  # whether this call wrote the key (so may take it back)
        for _ in range(_RETRIES):
            entry = await self._saved(session_id, name, version, "$")
            if digest is not None and entry.record.digest != digest:
                raise ArtifactNotFoundError(name, version)
            with contextlib.suppress(storage.ConflictError):  # already there: idempotent
                await self._kv.put(key, value, expected=0)
                created = True
            try:
                # Rewrite the record at the revision read: a delete that checked for
                # references before our key existed must lose this race or we must.
                await self._kv.put(record_key, entry.raw, expected=entry.revision)
                return
            except storage.ConflictError:
                current = await self._entry(session_id, name, version)
                if current is None or current.deleted:
                    await self._kv.delete(key)
                    raise ArtifactNotFoundError(name, version) from None
        if created:
            await self._kv.delete(key)
        raise ArtifactConflictError.contended(name, version)

    async def remove_reference(
        self, session_id: str, name: str, version: str, referrer: Referrer
    ) -> None:
        """Drop ``referrer``'s reference to ``name@version``. Idempotent."""
        await self._kv.delete(self._ref_key(session_id, name, version, referrer))

    async def delete(self, session_id: str, name: str, version: str) -> None:
        """Delete a saved version: `ArtifactInUseError` while anything refers to it,
        `ArtifactNotFoundError` if it was never saved. The record stays as a tombstone
        (the version is never reused); the blob and the version's own references to its
        children go. Deleting a deleted version finishes an interrupted delete."""
        record_key = self._record_key(session_id, name, version)
        prefix = self._refs_prefix(session_id, name, version)
        for _ in range(_RETRIES):
            entry = await self._entry(session_id, name, version)
            if entry is None:
                raise ArtifactNotFoundError(name, version)
            if not entry.deleted:
                referrers = await self._kv.keys(prefix)
                if referrers:
                    shown = [key[len(prefix) :].replace("/", " ", 1) for key in referrers]
                    raise ArtifactInUseError(
                        name,
                        version,
                        shown[:MAX_LISTED_REFERRERS],
                        len(shown) > MAX_LISTED_REFERRERS,
                    )
                try:
                    await self._kv.put(
                        record_key,
                        encode_record(entry.record, deleted=True),
                        expected=entry.revision,
                    )
                except storage.ConflictError:
                    continue  # a reference arrived (or another delete won): look again
            referrer = Referrer.artifact(name, version, entry.record.digest)
            for pin in entry.record.children:
                await self._kv.delete(self._ref_key(session_id, pin.name, pin.version, referrer))
            await self._blobs.delete(self._blob_key(session_id, entry.record.digest))
            return
        raise ArtifactConflictError.contended(name, version)


def _validated(artifact: Any) -> ValidatedArtifact:
    if isinstance(artifact, ValidatedArtifact):
        return artifact
    if isinstance(artifact, str | bytes | bytearray | memoryview):
        return load_artifact(bytes(artifact) if not isinstance(artifact, str) else artifact)
    return validate_artifact(artifact)
