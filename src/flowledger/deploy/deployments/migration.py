"""Moving deployments' inline bindings into the source registry: ``flowledger source
migrate`` (docs/sources.md, "Migrating inline deployments").

For every deployment (of the sessions asked, default every session of the database)
whose *live* revision binds a dependency inline (``stdio`` / ``http``):

* each distinct inline spec becomes one registered source. Identical specs (the same
  command, arguments, environment and working directory, or the same URL and headers,
  literal values and secret references alike) share one source, whichever deployments
  and sessions use them. It is named ``<deployment>_<dependency>`` after its first use
  (sessions, deployments and dependencies in sorted order), cut to 64 characters, with
  ``_2``, ``_3``, ... when that name is registered with another transport; a source of
  that name with the same transport is reused, its visibility widened to the sessions
  that now use it. It is visible to the sessions that used the spec (``sessions``), and
  each inline ``{secret: VAR}`` becomes a declared secret ``{VAR: {env: VAR, sessions:
  [those sessions]}}``, so the same variable of the serving process is read as before;
* the deployment gets a new revision (`DeploymentStore.save`, made live) equal to the
  live one but with each inline binding replaced by ``{source: NAME, allow_tools}``.
  Bindings that already name a registered source stay as they are.

Only live revisions are migrated: earlier revisions keep their inline bindings (a
rollback to one binds inline again, and a later migration rebinds it). Runs already
started keep their pins (a pin is immutable): an unfinished run resumes
against the inline source it was pinned to, which only the operator's doors may use;
the report lists them per deployment. Sources are written before any deployment names
them. Running it again changes nothing: no live revision binds inline any more. A
deployment whose live revision moves while it is migrated is skipped and reported (run
it again). With ``dry_run`` the same plan is computed and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import rfc8785

from ... import storage
from ...workflows.errors import NotFoundError
from ...workflows.records.registry import RunRegistry
from ...workflows.records.run import is_id
from ...workflows.records.unfinished import UnfinishedIndex
from ..registry.document import SOURCE_FORMAT, ValidatedSource, validate_source
from ..registry.errors import SourceNotRegisteredError
from ..registry.spec import load_source_spec, secret_names
from ..registry.store import RegisteredSource, SourceRegistry
from .definition import revision_of
from .document import SourceBinding
from .store import DeploymentStore

__all__ = [
    "MigratedDeployment",
    "MigratedSource",
    "MigrationReport",
    "migrate_inline_sources",
    "session_ids",
]

_SESSIONS: Final = "sessions/"
_MAX_NAME: Final = 64

Action = Literal["added", "changed", "unchanged"]


@dataclass(frozen=True)
class _Use:
    session_id: str
    deployment: str
    dependency: str

    def to_json(self) -> dict[str, str]:
        return {
            "session_id": self.session_id,
            "deployment": self.deployment,
            "dependency": self.dependency,
        }


@dataclass
class MigratedSource:
    """A registered source the migration adds, widens or finds as it is."""

    name: str
    action: Action
    revision: int | None  # after the migration (None: a dry run's new source)
    sessions: list[str]
    uses: list[_Use]
    document: dict[str, Any]
    enabled: bool = True  # a reused source may have been disabled by the operator

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "revision": self.revision,
            "enabled": self.enabled,
            "sessions": self.sessions,
            "uses": [use.to_json() for use in self.uses],
            "document": self.document,
        }


@dataclass
class MigratedDeployment:
    """A deployment whose live revision bound inline sources."""

    session_id: str
    name: str
    from_revision: int
    to_revision: int | None  # None: a dry run, or skipped
    bindings: dict[str, str]  # dependency -> registered source name
    unfinished_runs: list[str]  # runs that keep their pinned (inline) sources
    skipped: str | None = None  # why it was not migrated

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "name": self.name,
            "from_revision": self.from_revision,
            "to_revision": self.to_revision,
            "bindings": self.bindings,
            "unfinished_runs": self.unfinished_runs,
            "skipped": self.skipped,
        }


@dataclass
class MigrationReport:
    dry_run: bool
    sessions: int  # sessions looked at
    sources: list[MigratedSource] = field(default_factory=list)
    deployments: list[MigratedDeployment] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether anything was (or, in a dry run, would be) written."""
        return bool(self.deployments) or any(s.action != "unchanged" for s in self.sources)

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "sessions": self.sessions,
            "sources": [item.to_json() for item in self.sources],
            "deployments": [item.to_json() for item in self.deployments],
        }


async def session_ids(kv: storage.KV) -> list[str]:
    """Every session with a key under ``sessions/``, in order. On a store that reads
    keys by page, one page of one key per session (it skips over each session's keys);
    otherwise one listing of every key."""
    if not isinstance(kv, storage.PagedKV):
        heads = {key[len(_SESSIONS) :].split("/", 1)[0] for key in await kv.keys(_SESSIONS)}
        return sorted(head for head in heads if is_id(head))
    found: list[str] = []
    start = ""
    while page := await kv.keys_page(_SESSIONS, start=start, limit=1):
        head = page[0][len(_SESSIONS) :].split("/", 1)[0]
        if is_id(head):
            found.append(head)
        # '0' follows '/' in byte order: past every "sessions/<head>/..." key, and before
        # any other session's.
        start = f"{_SESSIONS}{head}0"
    return found


def _spec_of(binding: SourceBinding) -> dict[str, Any]:
    """The transport part of an inline binding, as a source document writes it."""
    return binding.binding.model_dump(mode="json", exclude_defaults=True, include={"stdio", "http"})


def _spec_key(spec: dict[str, Any]) -> bytes:
    return rfc8785.dumps(spec)


def _registered_spec(registered: RegisteredSource) -> dict[str, Any]:
    document = registered.source.document
    return document.model_dump(mode="json", exclude_defaults=True, include={"stdio", "http"})


def _candidate(base: str, attempt: int) -> str:
    """Name ``attempt`` (1, 2, ...) for a source first used as ``base`` (a deployment
    and dependency joined), at most 64 characters."""
    if len(base) > _MAX_NAME:
        digest = hashlib.sha256(base.encode()).hexdigest()[:8]
        base = f"{base[: _MAX_NAME - 9]}_{digest}"
    suffix = "" if attempt == 1 else f"_{attempt}"
    return base[: _MAX_NAME - len(suffix)] + suffix


def _union(first: list[str] | None, second: list[str]) -> list[str] | None:
    return None if first is None else sorted({*first, *second})


def _widened(registered: RegisteredSource, spec: dict[str, Any], sessions: list[str]) -> Any:
    """``registered``'s document, visible to ``sessions`` too, and each secret ``spec``
    reads declared (and granted to them)."""
    document = json.loads(registered.source.canonical)
    document["sessions"] = _union(document.get("sessions"), sessions)
    if document["sessions"] is None:
        del document["sessions"]
    secrets = document.setdefault("secrets", {})
    for name in _secrets(spec):
        declared = secrets.setdefault(name, {"env": name, "sessions": sessions})
        if "sessions" in declared:
            declared["sessions"] = _union(declared["sessions"], sessions)
    if not secrets:
        del document["secrets"]
    return document


def _secrets(spec: dict[str, Any]) -> tuple[str, ...]:
    """The secret references of an inline spec."""
    return secret_names(load_source_spec(spec))


def _document(name: str, first: _Use, spec: dict[str, Any], sessions: list[str]) -> Any:
    variables = _secrets(spec)
    document: dict[str, Any] = {
        "format": SOURCE_FORMAT,
        "name": name,
        "description": (
            f"Migrated from deployment {first.deployment}, dependency {first.dependency} "
            "(flowledger source migrate)."
        ),
        **spec,
        "sessions": sessions,
    }
    if variables:
        document["secrets"] = {v: {"env": v, "sessions": sessions} for v in variables}
    return document


async def _current(registry: SourceRegistry, name: str) -> RegisteredSource | None:
    try:
        return await registry.get(name)
    except SourceNotRegisteredError:
        return None


async def _plan_source(
    registry: SourceRegistry,
    spec: dict[str, Any],
    uses: list[_Use],
    taken: set[str],
) -> tuple[MigratedSource, ValidatedSource, int | None]:
    """The source ``uses`` will bind: its name, and the document to write (with the
    revision to compare-and-swap on, ``None`` for a new source)."""
    sessions = sorted({use.session_id for use in uses})
    first = uses[0]
    base = f"{first.deployment}_{first.dependency}"
    attempt = 0
    while True:
        attempt += 1
        name = _candidate(base, attempt)
        if name in taken:
            continue
        existing = await _current(registry, name)
        if existing is None:
            validated = validate_source(_document(name, first, spec, sessions))
            planned = MigratedSource(
                name, "added", None, sessions, uses, json.loads(validated.canonical)
            )
            taken.add(name)
            return planned, validated, None
        if _registered_spec(existing) != spec:
            continue  # the name belongs to another source
        validated = validate_source(_widened(existing, spec, sessions))
        action: Action = "unchanged" if validated.digest == existing.source.digest else "changed"
        planned = MigratedSource(
            name,
            action,
            existing.revision,
            sessions,
            uses,
            json.loads(validated.canonical),
            existing.enabled,
        )
        taken.add(name)
        return planned, validated, existing.revision


async def _unfinished_runs(store: storage.Store, session_id: str) -> dict[str, list[str]]:
    """The session's unfinished deployed runs (as the unfinished-run index lists them),
    by deployment name."""
    registry = RunRegistry(store.kv)
    found: dict[str, list[str]] = {}
    for run_id in await UnfinishedIndex(store.kv).runs(session_id):
        try:
            run = await registry.get(session_id, run_id)
        except NotFoundError:
            continue
        if revision_of(run.definition_version) is not None and not run.status.terminal:
            found.setdefault(run.definition_name, []).append(run_id)
    return found


async def migrate_inline_sources(
    store: storage.Store,
    sessions: Sequence[str] | None = None,
    *,
    dry_run: bool = False,
) -> MigrationReport:
    """Register the inline sources of the live deployments of ``sessions`` (default:
    every session) and rebind those deployments to them (see the module). With
    ``dry_run`` nothing is written (``store`` may be read-only)."""
    deployments = DeploymentStore.over(store)
    registry = SourceRegistry.over(store)
    chosen = list(sessions) if sessions is not None else await session_ids(store.kv)
    for session_id in chosen:
        if not is_id(session_id):
            raise ValueError(f"session {session_id!r} is not a lowercase UUID")
    report = MigrationReport(dry_run, len(set(chosen)))

    # What binds inline: (session, deployment) -> (live revision, inline bindings).
    inline: dict[tuple[str, str], tuple[int, dict[str, SourceBinding]]] = {}
    by_spec: dict[bytes, tuple[dict[str, Any], list[_Use]]] = {}
    for session_id in sorted(set(chosen)):
        for listed in await deployments.list(session_id):
            if listed["live"] is None:
                continue
            live = await deployments.get(session_id, listed["name"])
            bindings = {
                dependency: binding
                for dependency, binding in sorted(live.validated.bindings().items())
                if binding.registered is None
            }
            if not bindings:
                continue
            inline[(session_id, live.name)] = (live.revision, bindings)
            for dependency, binding in bindings.items():
                spec = _spec_of(binding)
                entry = by_spec.setdefault(_spec_key(spec), (spec, []))
                entry[1].append(_Use(session_id, live.name, dependency))

    # One source per distinct spec.
    taken: set[str] = set()
    names: dict[tuple[str, str, str], str] = {}
    writes: list[tuple[MigratedSource, ValidatedSource, int | None]] = []
    for spec, uses in sorted(by_spec.values(), key=lambda item: _order(item[1][0])):
        write = await _plan_source(registry, spec, uses, taken)
        writes.append(write)
        report.sources.append(write[0])
        for use in uses:
            names[(use.session_id, use.deployment, use.dependency)] = write[0].name

    if not dry_run:
        for source, validated, revision in writes:
            if source.action == "added":
                source.revision = (await registry.add(validated)).revision
            elif source.action == "changed":
                source.revision = (await registry.set(validated, expected=revision)).revision

    unfinished: dict[str, dict[str, list[str]]] = {}
    for (session_id, name), (revision, bindings) in sorted(inline.items()):
        if session_id not in unfinished:
            unfinished[session_id] = await _unfinished_runs(store, session_id)
        rebound = {dep: names[(session_id, name, dep)] for dep in bindings}
        migrated = MigratedDeployment(
            session_id, name, revision, None, rebound, unfinished[session_id].get(name, [])
        )
        report.deployments.append(migrated)
        if dry_run:
            continue
        live = await deployments.get(session_id, name)
        if live.revision != revision:
            migrated.skipped = (
                f"its live revision moved to {live.revision} meanwhile; run the migration again"
            )
            continue
        document = json.loads(live.validated.canonical)
        for dependency, bound in rebound.items():
            allow = document["sources"][dependency]["allow_tools"]
            document["sources"][dependency] = {"source": bound, "allow_tools": allow}
        migrated.to_revision = (await deployments.save(session_id, document)).revision
    return report


def _order(use: _Use) -> tuple[str, str, str]:
    return (use.session_id, use.deployment, use.dependency)
