"""The operator's concurrency limits: ``max_running`` per definition name, per deployment
and per session.

A limit is a JSON record ``{"max_running": n}`` under ``admission/limits/definition/<name>``,
``admission/limits/deployment/<session id>/<deployment name>`` or
``admission/limits/session/<session id>``; every process reads the same records, so a
limit holds across workers. No record means no limit. A limit applies to runs *started*
after it is read (runs already holding slots keep them; lowering a limit drains).

A deployment belongs to one session, so its scope names both. Its runs are the runs of
the definition named after the deployment whose version is a deployment revision
(``r<N>``, `is_deployed_version`): one limit covers every revision, and a Python
definition that happens to share the name is not counted.
"""

from __future__ import annotations

import json
import re
from typing import Final, Literal

from flowledger import storage

__all__ = [
    "LIMITS_PREFIX",
    "MAX_LIMIT",
    "SCOPE_KINDS",
    "InvalidLimitError",
    "Limits",
    "ScopeKind",
    "deployment_scope_name",
    "is_deployed_version",
    "validate_limit",
]

LIMITS_PREFIX: Final = "admission/limits/"
MAX_LIMIT: Final = 10_000  # slot records are probed one by one: keep the scan bounded

ScopeKind = Literal["definition", "deployment", "session"]
SCOPE_KINDS: Final[tuple[ScopeKind, ...]] = ("definition", "deployment", "session")

# The deploy layer (L3, `flowledger.deploy.deployments.definition.version_of`) runs
# revision N of a deployment as the definition version ``r<N>``. Admission sits below
# it and must not import it, so the form is repeated here; a test holds the two equal.
_DEPLOYED_VERSION: Final = re.compile(r"r[1-9][0-9]{0,9}")


def is_deployed_version(version: str) -> bool:
    """Whether ``version`` is a deployment revision's definition version (``r<N>``)."""
    return _DEPLOYED_VERSION.fullmatch(version) is not None


def deployment_scope_name(session_id: str, deployment: str) -> str:
    """The scope name of deployment ``deployment`` of session ``session_id``."""
    return f"{session_id}/{deployment}"


class InvalidLimitError(ValueError):
    """A limit that is not an integer in 1..`MAX_LIMIT`; ``field`` names where it was given."""

    def __init__(self, field: str, value: object) -> None:
        self.field = field
        self.value = value
        super().__init__(f"{field} must be an integer in 1..{MAX_LIMIT}, not {value!r}")


def validate_limit(value: object, field: str = "max_running") -> int:
    """``value`` as a limit, or `InvalidLimitError` naming ``field`` (bools are refused)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_LIMIT:
        raise InvalidLimitError(field, value)
    return value


def _key(kind: ScopeKind, name: str) -> str:
    if kind not in SCOPE_KINDS:
        raise ValueError(f"limit scope must be one of {', '.join(SCOPE_KINDS)}, not {kind!r}")
    key = f"{LIMITS_PREFIX}{kind}/{name}"
    storage.validate_name(key)
    return key


class Limits:
    """Read and write the ``max_running`` records in ``kv``."""

    def __init__(self, kv: storage.KV) -> None:
        self._kv = kv

    async def get(self, kind: ScopeKind, name: str) -> int | None:
        """The limit of ``kind``/``name``, or None when it has none."""
        try:
            entry = await self._kv.get(_key(kind, name))
        except storage.KeyNotFoundError:
            return None
        try:
            return validate_limit(json.loads(entry.value)["max_running"])
        except (ValueError, KeyError, TypeError) as exc:
            raise storage.CorruptDataError(f"limit record {kind}/{name}", str(exc)) from exc

    async def set(self, kind: ScopeKind, name: str, max_running: object) -> int:
        """Set the limit (validated before anything is written); returns it."""
        limit = validate_limit(max_running)
        data = json.dumps({"max_running": limit}, separators=(",", ":")).encode()
        await storage.overwrite(self._kv, _key(kind, name), data)
        return limit

    async def clear(self, kind: ScopeKind, name: str) -> bool:
        """Remove the limit; True if there was one."""
        key = _key(kind, name)
        try:
            await self._kv.get(key)
        except storage.KeyNotFoundError:
            return False
        await self._kv.delete(key)
        return True

    async def all(self) -> list[tuple[ScopeKind, str, int]]:
        """Every limit, sorted by key."""
        found: list[tuple[ScopeKind, str, int]] = []
        for key in sorted(await self._kv.keys(LIMITS_PREFIX)):
            kind, _, name = key[len(LIMITS_PREFIX) :].partition("/")
            if kind in SCOPE_KINDS:
                limit = await self.get(kind, name)
                if limit is not None:
                    found.append((kind, name, limit))
        return found
