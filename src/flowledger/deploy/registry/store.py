"""`SourceRegistry`: the operator's sources, by name, in the database (every backend).

Layout (KV, outside every session: the registry belongs to the operator):

* ``deploy/registry/heads/<name>``: ``{"revision", "enabled", "removed", "changed_at"}``,
  changed by compare-and-swap;
* ``deploy/registry/revisions/<name>/<n>``: ``{"document", "digest", "saved_at"}``, the
  canonical document of revision ``n`` (1, 2, 3, ...), created once, never rewritten;
* ``deploy/registry/probes/<name>``: the last probe (`Probe`): when, of which revision,
  whether it answered, the server and every tool with its schemas and fingerprints;
* ``deploy/registry/uses/<name>/<session>/<run>``: a run pinned to the source (written
  with the run's pin), so removal can name the unfinished runs that need it.

`add` registers revision 1 (`SourceExistsError` if the name is registered), `set` the
next revision (of a registered name; ``expected`` makes it a compare-and-swap on the
revision), `put` either, and nothing when the document is unchanged. `disable` and
`enable` flip the head; `remove` refuses while an unfinished run is pinned to the source
(`SourceInUseError`), and otherwise tombstones the head. Revisions are never deleted, so
``(name, revision)`` names one content forever, even across a removal and a new `add`.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from ... import storage
from ..sources.connect import session_for
from ..sources.errors import SourceError, clip
from ..sources.tool_info import ToolInfo
from .document import ValidatedSource, load_source, validate_source
from .errors import (
    RegistryConflictError,
    RegistryCorruptError,
    SourceDisabledError,
    SourceExistsError,
    SourceInUseError,
    SourceNotRegisteredError,
)
from .spec import RESERVED_PREFIX, CredentialMissingError

__all__ = ["Probe", "RegisteredSource", "SourceRegistry", "UnfinishedRuns"]

_PREFIX: Final = "deploy/registry"
_RETRIES: Final = 32

#: ``(session_id, run_id) -> whether that run is unfinished`` (a removed run is not).
UnfinishedRuns = Callable[[str, str], Awaitable[bool]]


def _now() -> str:
    moment = datetime.now(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}Z"


def _encode(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()


@dataclass(frozen=True)
class RegisteredSource:
    """One revision of a registered source, with its head's state."""

    source: ValidatedSource
    revision: int
    latest: int
    enabled: bool
    saved_at: str

    @property
    def name(self) -> str:
        return self.source.name

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "revision": self.revision,
            "latest": self.latest,
            "enabled": self.enabled,
            "digest": self.source.digest,
            "saved_at": self.saved_at,
            "document": json.loads(self.source.canonical),
        }


@dataclass(frozen=True)
class Probe:
    """The last probe of a source: revision probed, when, and what it answered."""

    revision: int
    probed_at: str
    ok: bool
    error: str | None
    server: dict[str, Any] | None
    tools: tuple[ToolInfo, ...]

    def to_json(self) -> dict[str, Any]:
        """What readers are shown: per tool its schemas, hints and both fingerprints."""
        return {
            "revision": self.revision,
            "probed_at": self.probed_at,
            "ok": self.ok,
            "error": self.error,
            "server": self.server,
            "tools": [tool.to_json() for tool in self.tools],
        }

    def record(self) -> dict[str, Any]:
        """What is stored: the tools' listing entries (fingerprints are recomputed)."""
        stored = self.to_json()
        stored["tools"] = [dict(tool.entry) for tool in self.tools]
        return stored

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Probe:
        return cls(
            int(data["revision"]),
            str(data["probed_at"]),
            bool(data["ok"]),
            data.get("error"),
            data.get("server"),
            tuple(ToolInfo.from_entry(entry) for entry in data.get("tools", [])),
        )

    def age_seconds(self, now: datetime | None = None) -> float:
        # fromisoformat reads the trailing Z as UTC, ten times faster than strptime
        moment = datetime.fromisoformat(self.probed_at)
        return ((now or datetime.now(UTC)) - moment).total_seconds()


class SourceRegistry:
    """The registered sources of one database (see the module)."""

    def __init__(self, kv: storage.KV) -> None:
        self._kv = kv
        # Decoded records by key, with the KV revision they were read at: a key's
        # revision changes with every write, so a record read again at the same revision
        # is the same bytes and need not be decoded (validated, fingerprinted) again.
        self._decoded: dict[str, tuple[int, Any]] = {}

    @classmethod
    def over(cls, store: storage.Store) -> SourceRegistry:
        return cls(store.kv)

    @property
    def kv(self) -> storage.KV:
        """The store the records live in (call rate limits keep theirs there too)."""
        return self._kv

    # -- keys ---------------------------------------------------------------------------

    @staticmethod
    def _head_key(name: str) -> str:
        return storage.validate_name(f"{_PREFIX}/heads/{name}")

    @staticmethod
    def _revision_key(name: str, revision: int) -> str:
        return storage.validate_name(f"{_PREFIX}/revisions/{name}/{revision}")

    @staticmethod
    def _probe_key(name: str) -> str:
        return storage.validate_name(f"{_PREFIX}/probes/{name}")

    @staticmethod
    def _use_key(name: str, session_id: str, run_id: str) -> str:
        return storage.validate_name(f"{_PREFIX}/uses/{name}/{session_id}/{run_id}")

    # -- reading ------------------------------------------------------------------------

    async def _head(self, name: str) -> tuple[dict[str, Any], int] | None:
        key = self._head_key(name)
        try:
            entry = await self._kv.get(key)
        except storage.KeyNotFoundError:
            return None
        try:
            head = json.loads(entry.value)
            int(head["revision"]), bool(head["enabled"])
        except (ValueError, KeyError, TypeError) as exc:
            raise RegistryCorruptError(key, str(exc)) from None
        return head, entry.revision

    async def _revision(self, name: str, revision: int) -> tuple[ValidatedSource, str]:
        key = self._revision_key(name, revision)
        try:
            entry = await self._kv.get(key)
        except storage.KeyNotFoundError:
            raise SourceNotRegisteredError(name, revision) from None
        known = self._decoded.get(key)
        if known is not None and known[0] == entry.revision:
            decoded: tuple[ValidatedSource, str] = known[1]
            return decoded
        try:
            record = json.loads(entry.value)
            validated = validate_source(record["document"])
        except Exception as exc:  # any damage: undecodable, or no longer a valid document
            raise RegistryCorruptError(key, type(exc).__name__) from None
        if validated.digest != record.get("digest") or validated.name != name:
            raise RegistryCorruptError(key, "its digest or name does not match")
        decoded = validated, str(record.get("saved_at", ""))
        self._decoded[key] = entry.revision, decoded
        return decoded

    async def get(self, name: str, revision: int | None = None) -> RegisteredSource:
        """Revision ``revision`` of ``name`` (default: the current one), with its head's
        state. `SourceNotRegisteredError` for an unknown (or removed) name or revision."""
        found = await self._head(name)
        if found is None or found[0].get("removed"):
            raise SourceNotRegisteredError(name)
        head = found[0]
        latest = int(head["revision"])
        number = latest if revision is None else revision
        if not 1 <= number <= latest:
            raise SourceNotRegisteredError(name, revision)
        validated, saved_at = await self._revision(name, number)
        return RegisteredSource(validated, number, latest, bool(head["enabled"]), saved_at)

    async def enabled(self, name: str, revision: int | None = None) -> RegisteredSource:
        """`get`, and `SourceDisabledError` when the source is disabled."""
        registered = await self.get(name, revision)
        if not registered.enabled:
            raise SourceDisabledError(name)
        return registered

    async def names(self) -> builtins.list[str]:
        prefix = f"{_PREFIX}/heads/"
        return [key[len(prefix) :] for key in await self._kv.keys(prefix)]

    async def list(self) -> builtins.list[RegisteredSource]:
        """Every registered source at its current revision, by name."""
        found = []
        for name in await self.names():
            try:
                found.append(await self.get(name))
            except SourceNotRegisteredError:
                continue  # removed
        return found

    # -- writing ------------------------------------------------------------------------

    async def add(self, document: Any) -> RegisteredSource:
        """Register a new source (`SourceExistsError` if the name is registered)."""
        validated = _validated(document)
        found = await self._head(validated.name)
        if found is not None and not found[0].get("removed"):
            raise SourceExistsError(validated.name)
        return await self._write(validated, found, enabled=True)

    async def set(self, document: Any, *, expected: int | None = None) -> RegisteredSource:
        """Save ``document`` as the next revision of its (registered) source; with
        ``expected``, only if the current revision is that one. Unchanged content
        writes nothing and returns the current revision."""
        validated = _validated(document)
        found = await self._head(validated.name)
        if found is None or found[0].get("removed"):
            raise SourceNotRegisteredError(validated.name)
        current = int(found[0]["revision"])
        if expected is not None and expected != current:
            raise RegistryConflictError(
                validated.name, f"expected revision {expected}, the current one is {current}"
            )
        existing, _ = await self._revision(validated.name, current)
        if existing.digest == validated.digest:
            return await self.get(validated.name)
        return await self._write(validated, found, enabled=bool(found[0]["enabled"]))

    async def put(self, document: Any) -> RegisteredSource:
        """`add` or `set`, whichever applies (what reconciling a sources file does)."""
        validated = _validated(document)
        found = await self._head(validated.name)
        if found is None or found[0].get("removed"):
            return await self.add(validated)
        return await self.set(validated)

    async def _write(
        self,
        validated: ValidatedSource,
        found: tuple[dict[str, Any], int] | None,
        *,
        enabled: bool,
    ) -> RegisteredSource:
        name = validated.name
        number = 1 if found is None else int(found[0]["revision"]) + 1
        saved_at = _now()
        record = {
            "document": json.loads(validated.canonical),
            "digest": validated.digest,
            "saved_at": saved_at,
        }
        try:
            await self._kv.put(self._revision_key(name, number), _encode(record), expected=0)
        except storage.ConflictError:
            raise RegistryConflictError(name, f"revision {number} was written by another") from None
        head = {"revision": number, "enabled": enabled, "removed": False, "changed_at": saved_at}
        try:
            await self._kv.put(
                self._head_key(name), _encode(head), expected=0 if found is None else found[1]
            )
        except storage.ConflictError:
            raise RegistryConflictError(name, "the source changed meanwhile") from None
        return RegisteredSource(validated, number, number, enabled, saved_at)

    async def _update_head(self, name: str, change: dict[str, Any]) -> dict[str, Any]:
        for _ in range(_RETRIES):
            found = await self._head(name)
            if found is None or found[0].get("removed"):
                raise SourceNotRegisteredError(name)
            head = {**found[0], **change, "changed_at": _now()}
            try:
                await self._kv.put(self._head_key(name), _encode(head), expected=found[1])
            except storage.ConflictError:
                continue
            return head
        raise RegistryConflictError(name, "the source kept changing")

    async def enable(self, name: str) -> None:
        await self._update_head(name, {"enabled": True})

    async def disable(self, name: str) -> None:
        """Disabled, a source is not started or contacted for anyone: starts are
        unrunnable and pinned runs' resumes blocked (``source_disabled``) until enabled."""
        await self._update_head(name, {"enabled": False})

    async def remove(self, name: str, unfinished: UnfinishedRuns) -> None:
        """Unregister ``name``: `SourceInUseError` naming the runs while an unfinished run
        is pinned to it. Uses of finished runs are cleared on the way."""
        busy = []
        prefix = f"{_PREFIX}/uses/{name}/"
        for key in await self._kv.keys(prefix):
            session_id, _, run_id = key[len(prefix) :].partition("/")
            if await unfinished(session_id, run_id):
                busy.append(run_id)
            else:
                await self._kv.delete(key)
        if busy:
            raise SourceInUseError(name, busy)
        await self._update_head(name, {"removed": True, "enabled": False})

    # -- uses and probes ----------------------------------------------------------------

    async def add_use(self, name: str, session_id: str, run_id: str, revision: int) -> None:
        """Record that ``run_id`` of ``session_id`` is pinned to ``name`` (idempotent)."""
        key = self._use_key(name, session_id, run_id)
        with contextlib.suppress(storage.ConflictError):
            await self._kv.put(key, _encode({"revision": revision}), expected=0)

    async def uses(self, name: str) -> builtins.list[tuple[str, str]]:
        """``(session_id, run_id)`` of every run recorded as pinned to ``name``."""
        prefix = f"{_PREFIX}/uses/{name}/"
        return [
            tuple(key[len(prefix) :].split("/", 1))  # type: ignore[misc]
            for key in await self._kv.keys(prefix)
        ]

    async def probe(
        self,
        name: str,
        environ: Mapping[str, str],
        *,
        seconds: float = 10.0,
        keep_good: bool = False,
    ) -> Probe:
        """Connect to the current revision of ``name`` now (with every declared secret
        set in ``environ``, whichever sessions it is granted to: the listing is the same
        for all), list its tools, and record the result as its last probe; the probe,
        whether the source answered or not. A disabled source is not contacted
        (`SourceDisabledError`). The server's stderr is discarded. With ``keep_good``
        (the capability catalog's refreshes), a failed probe is returned but not
        recorded over a last probe of the same revision that answered."""
        registered = await self.enabled(name)
        validated = registered.source
        secrets = {
            secret: environ[declared.env or secret]
            for secret, declared in validated.document.secrets.items()
            if (declared.env or secret) in environ
            and not (declared.env or secret).startswith(RESERVED_PREFIX)
        }
        result: Probe
        try:
            source = validated.concrete(secrets)
            async with session_for(
                source, connect_timeout=seconds, call_timeout=seconds, errlog=io.StringIO()
            ) as session:
                server, tools = session.server_info, await session.list_tools()
            result = Probe(registered.revision, _now(), True, None, server.to_json(), tuple(tools))
        except (SourceError, CredentialMissingError) as exc:
            result = Probe(registered.revision, _now(), False, clip(str(exc)), None, ())
        if keep_good and not result.ok:
            last = await self.last_probe(name)
            if last is not None and last.ok and last.revision == result.revision:
                return result
        await self.record_probe(name, result)
        return result

    async def record_probe(self, name: str, probe: Probe) -> None:
        key = self._probe_key(name)
        data = _encode(probe.record())
        for _ in range(_RETRIES):
            try:
                entry = await self._kv.get(key)
                await self._kv.put(key, data, expected=entry.revision)
                return
            except storage.KeyNotFoundError:
                try:
                    await self._kv.put(key, data, expected=0)
                    return
                except storage.ConflictError:
                    continue
            except storage.ConflictError:
                continue
        raise RegistryConflictError(name, "its probe record kept changing")

    async def last_probe(self, name: str) -> Probe | None:
        key = self._probe_key(name)
        try:
            entry = await self._kv.get(key)
        except storage.KeyNotFoundError:
            return None
        known = self._decoded.get(key)
        if known is not None and known[0] == entry.revision:
            decoded: Probe = known[1]
            return decoded
        try:
            probe = Probe.from_record(json.loads(entry.value))
        except Exception as exc:
            raise RegistryCorruptError(key, type(exc).__name__) from None
        self._decoded[key] = entry.revision, probe
        return probe


def _validated(document: Any) -> ValidatedSource:
    if isinstance(document, ValidatedSource):
        return document
    if isinstance(document, str | bytes):
        return load_source(document)
    return validate_source(document)
