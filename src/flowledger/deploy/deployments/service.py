"""`DeployService`: the transport-neutral surface of deployed runs for one session.

* `run_deployment(deployment, input, wait_seconds)`: validates the live revision's
  environment (`check_start`); any error returns ``{"status": "unrunnable",
  "diagnostics": [...]}`` with nothing written. Otherwise the run's pin is written and
  bound to the new run (the `WorkflowTools` ``prepare_run`` hook writes it, keyed by
  the graph run id the record gets, before the record exists), the run starts through
  the session's supervisor, and the result describes the run once it stops (or when
  ``wait_seconds`` have passed).
* `deployment_check(deployment, revision)`: the same check, answered as
  ``runnable`` or ``unrunnable`` with the diagnostics; nothing is started or written.
* `resume_run(run_id, payload)`: resumes through the bridge: the payload and the graph
  are checked first, then the owner revalidates the *pinned* environment once, under
  the run's lock, and the resumed segment calls the servers that check connected to; a
  blocked resume returns the run, still ``interrupted``, with readiness ``blocked`` and
  the diagnostics (payload not consumed).
* `inspect_run(run_id, revalidate)`, `read_run_trace(run_id, start, limit)`;
  `validate_run(run_id)`: only the status and the revalidated resume readiness. A
  readiness that reuses the owner's check of the run's sources (one that found the run
  ready, made by a resume or an adoption of the same run and pin in this process,
  younger than `revalidation.REUSE_SECONDS`) says so: ``reused: true`` and ``validated_at`` (when
  that check was made); one checked now has neither.
* `artifact_save`, `artifact_list`, `artifact_show`, `deployment_save`,
  `deployment_list`, `deployment_show`. The lists take ``query`` (a substring of the
  name), ``limit`` and ``cursor`` (`flowledger.deploy.listing`) and answer ``next``.
* `artifact_delete`, `deployment_delete`, `deployment_rollback` (`Lifecycle`): refused
  while something still needs what is deleted, naming it; a rollback makes an earlier
  revision live again under compare-and-swap on the live one.
* `artifact_validate(document)`: every static problem with its place and hint (what
  ``flowledger artifact validate`` prints); nothing is saved.
* `source_probe(spec)`: a source given like a deployment binding (``stdio`` or
  ``http``, secrets as ``{secret: ENV_VAR}`` read from this process's environment),
  connected once: its tools with schemas and fingerprints. Output names variables and
  headers, never their values.

A run's description: ``run_id``, ``status``, ``resume_readiness`` (``{status,
diagnostics}``), ``outcome`` and ``output`` (of a completed run), ``interrupt`` (what a
paused run asks, and its resume schema), ``error``, ``trace_count``,
``latest_checkpoint`` (the checkpoint revision), ``deployment`` (name and revision) and
``pin`` (its digest).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from ... import storage
from ...tools import ToolError, WorkflowTools
from ...tools.bundle import DEFAULT_START_TIMEOUT, SupervisorPort
from ...workflows.authoring.readiness import ResumeReadiness
from ...workflows.errors import DuplicateDefinitionError, ResumeBlockedError
from ...workflows.records.run import Run, RunStatus
from ...workflows.runtime.session import WorkflowSession
from ..artifacts.errors import ArtifactNotFoundError, ArtifactValidationError
from ..artifacts.store import ArtifactRecord, ArtifactStore, StoredArtifact
from ..artifacts.validate import load_artifact, validate_artifact
from ..artifacts.validated import ValidatedArtifact
from ..listing import MAX_PAGE, page_limit, page_names
from ..registry.access import SessionSources, SourceAccess
from ..registry.errors import InlineSourceRefusedError, LaunchRefusedError
from ..registry.spec import identity_of, load_source_spec, source_of
from ..registry.store import SourceRegistry
from ..runs.compile import artifact_outcome
from ..sources.errors import SourceUnreachableError
from ..sources.session import probe
from . import revalidation
from .definition import (
    DeployedDefinition,
    deployed_definition,
    fresh_environment,
    revision_of,
    unchecked_environment,
    version_of,
)
from .diagnostics import ARTIFACT_MISSING, CHILD_MISSING, DEPLOYMENT_MISSING, Diagnostic, error
from .document import load_deployment, validate_deployment
from .environment import SourceEnvironment
from .lifecycle import Lifecycle
from .pin import PIN_FORMAT, Pin, PinStore
from .store import DeploymentNotFoundError, DeploymentRevision, DeploymentStore
from .validation import DEFAULT_CHECK_TIMEOUT, check_start

__all__ = ["DEFAULT_WAIT_SECONDS", "DeployService", "NotADeployedRunError"]

DEFAULT_WAIT_SECONDS: Final = 30.0
MAX_WAIT_SECONDS: Final = 600.0
_STOPPED: Final = frozenset(
    {RunStatus.INTERRUPTED, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED}
)


class NotADeployedRunError(LookupError):
    pass


@dataclass
class _PendingPin:
    """What `run_deployment` validated, waiting for the run's ids."""

    revision: DeploymentRevision
    closure: list[StoredArtifact]
    sources: dict[str, dict[str, Any]]


_PENDING: ContextVar[_PendingPin | None] = ContextVar("flowledger_deploy_pending_pin", default=None)


def _stamp(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}Z"


class DeployService:
    """Deployed runs of ``session`` (a `WorkflowSession` whose supervisor is active)."""

    def __init__(
        self,
        session: WorkflowSession,
        *,
        access: SourceAccess = SourceAccess.OPERATOR,
        check_timeout: float = DEFAULT_CHECK_TIMEOUT,
        supervisor: SupervisorPort | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        """``supervisor``: the session's own by default; a front door's (`FrontDoor`)
        starts and resumes through the workers that own the session. ``access``: what
        whoever uses this service may do with sources (`SourceAccess`: the operator by
        default; a tenant on an HTTP server)."""
        self.session = session
        self.artifacts = ArtifactStore.over(session.store)
        self.deployments = DeploymentStore(session.store.kv, session.store.blobs, self.artifacts)
        self.pins = PinStore(session.store.ledger)
        self.registry = SourceRegistry.over(session.store)
        self.sources = SessionSources(self.registry, session.session_id, access)
        self.environment = SourceEnvironment(self.sources, clock=session.clock)
        self.lifecycle = Lifecycle(
            session.session_id, self.artifacts, self.deployments, session.registry
        )
        self.check_timeout = check_timeout
        self.tools = WorkflowTools(
            session.session_id,
            catalog=session.catalog,
            registry=session.registry,
            inputs=session.inputs,
            supervisor=session.supervisor if supervisor is None else supervisor,
            start_timeout=start_timeout,
            pending=session.pending,
            prepare_run=self._bind_pin,
            now=session.clock.now,
        )

    @property
    def _sid(self) -> str:
        return self.session.session_id

    # -- deployments ------------------------------------------------------------------

    async def artifact_save(self, document: str | bytes | dict[str, Any]) -> dict[str, Any]:
        record = await self.artifacts.save(self._sid, document)
        return {
            "name": record.name,
            "version": record.version,
            "digest": record.digest,
            "closure_digest": record.closure_digest,
        }

    async def artifact_validate(self, document: str | bytes | dict[str, Any]) -> dict[str, Any]:
        return validation_report(document)

    async def artifact_list(
        self, *, query: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """A page of the saved artifacts by name (``query``: a substring of the name;
        ``cursor``: the previous page's ``next``): each with its versions (byte order)
        and their digests; ``next`` is None on the last page. Reads the names (keys
        only), then the records of the page's names (and of names whose versions are
        all deleted, which are passed over)."""
        wanted = page_limit(limit)
        shown: list[dict[str, Any]] = []
        after = cursor
        while True:
            candidates = page_names(
                await self.artifacts.names(self._sid), query=query, limit=MAX_PAGE, cursor=after
            )
            for name in candidates.names:
                records = await self.artifacts.list(self._sid, name)
                if not records:
                    continue  # every version deleted
                if len(shown) == wanted:  # one more name exists: the page is not the last
                    return {"artifacts": shown, "next": shown[-1]["name"]}
                shown.append({"name": name, "versions": [_version(r) for r in records]})
            if candidates.next is None:
                return {"artifacts": shown, "next": None}
            after = candidates.next

    async def artifact_delete(self, name: str, version: str) -> dict[str, Any]:
        """Delete a saved version unless a parent artifact or a deployment revision uses
        it (`ArtifactInUseError` naming them); see `Lifecycle`."""
        return await self.lifecycle.delete_artifact(name, version)

    async def artifact_show(self, name: str, version: str) -> dict[str, Any]:
        """One saved version: its record and its document (the canonical JSON)."""
        stored = await self.artifacts.get(self._sid, name, version)
        shown = stored.record.to_json()
        shown["document"] = json.loads(stored.canonical)
        return shown

    async def source_probe(
        self, spec: Mapping[str, Any], *, seconds: float = DEFAULT_CHECK_TIMEOUT
    ) -> dict[str, Any]:
        """Probe a registered source (``{"source": NAME}``: its probe is recorded in the
        registry) or, where inline specs are allowed, a ``stdio`` / ``http`` spec."""
        if "source" in spec:
            name = spec["source"]
            if not isinstance(name, str) or len(spec) != 1:
                raise ValueError("a registered source is probed as {source: NAME} alone")
            found = await self.sources.probe(name, seconds=seconds)
            registered = await self.sources.get(name)
            if not found.ok:
                raise SourceUnreachableError(name, found.error or "no answer")
            return {
                "source": {
                    "source": name,
                    "revision": found.revision,
                    **registered.source.identity(),
                },
                "server": found.server,
                "tools": [tool.to_json() for tool in found.tools],
                "probed_at": found.probed_at,
            }
        self.sources.check_inline("source_probe")
        if not self.sources.access.launch:
            raise LaunchRefusedError("source_probe")
        source_spec = load_source_spec(dict(spec))
        source = source_of("source", source_spec, os.environ)
        server, tools = await probe(source, seconds=seconds)
        return {
            "source": identity_of(source_spec),
            "server": server.to_json(),
            "tools": [tool.to_json() for tool in tools],
        }

    async def deployment_save(self, document: str | bytes | dict[str, Any]) -> dict[str, Any]:
        """Save a deployment; where inline specs are not allowed, every binding must
        name a registered source (`InlineSourceRefusedError` naming the first that
        does not, nothing written)."""
        if not self.sources.access.inline:
            validated = (
                load_deployment(document)
                if isinstance(document, str | bytes)
                else validate_deployment(document)
            )
            for dependency, binding in validated.bindings().items():
                if binding.registered is None:
                    raise InlineSourceRefusedError(f"sources.{dependency}")
            document = validated.deployment.model_dump(mode="json", exclude_defaults=True)
        return (await self.deployments.save(self._sid, document)).to_json()

    async def deployment_list(
        self, *, query: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """A page of the deployments by name (``query``, ``limit``, ``cursor`` as for
        `artifact_list`): each with its live revision and revision count, and ``next``."""
        page = page_names(
            await self.deployments.names(self._sid), query=query, limit=limit, cursor=cursor
        )
        return {
            "deployments": await self.deployments.list(self._sid, page.names),
            "next": page.next,
        }

    async def deployment_delete(self, name: str) -> dict[str, Any]:
        """Delete every revision of a deployment unless an unfinished run uses it
        (`DeploymentInUseError` naming the runs); see `Lifecycle`."""
        return await self.lifecycle.delete_deployment(name)

    async def deployment_rollback(
        self, name: str, live: int, revision: int | None = None
    ) -> dict[str, Any]:
        """Make ``revision`` (default: the one below ``live``) live again if ``live`` is
        still the live revision; revisions are immutable, so no revision is written."""
        return await self.lifecycle.rollback(name, live, revision)

    async def deployment_show(self, name: str, revision: int | None = None) -> dict[str, Any]:
        return (await self.deployments.get(self._sid, name, revision)).to_json()

    # -- definitions ------------------------------------------------------------------

    async def _closure(self, revision: DeploymentRevision) -> list[StoredArtifact]:
        ref = revision.validated.deployment.artifact
        found = await self.artifacts.closure(self._sid, ref.name, ref.version)
        root = found.pop(f"{ref.name}@{ref.version}")
        return [root, *(found[key] for key in sorted(found))]

    async def closure_of(self, revision: DeploymentRevision) -> list[StoredArtifact]:
        """The revision's artifact closure, root first (`ArtifactNotFoundError`)."""
        return await self._closure(revision)

    def _ensure(
        self, revision: DeploymentRevision, closure: list[StoredArtifact]
    ) -> DeployedDefinition:
        """The session catalog's definition of ``revision``, compiled and registered on
        first use (the catalog is in memory: each process registers what it serves)."""
        return self._ensure_validated(revision, [item.validated for item in closure])

    def definition_of_revision(
        self, revision: DeploymentRevision, closure: list[StoredArtifact]
    ) -> DeployedDefinition:
        """The definition ``revision`` runs as (compiled and registered on first use)."""
        return self._ensure(revision, closure)

    def _ensure_validated(
        self, revision: DeploymentRevision, validated: list[ValidatedArtifact]
    ) -> DeployedDefinition:
        key = (revision.name, version_of(revision.revision))
        if key not in self.session.catalog:
            compiled = deployed_definition(
                revision, validated, self.environment, timeout=self.check_timeout
            )
            # registered concurrently: the same revision compiles the same way
            with contextlib.suppress(DuplicateDefinitionError):
                self.session.catalog.register(
                    compiled.with_checkpoints(self.session.checkpoints, clock=self.session.clock)
                )
        definition = self.session.catalog.resolve(*key)
        assert isinstance(definition, DeployedDefinition)
        return definition

    async def _from_pin(self, run: Run, number: int) -> DeployedDefinition:
        """The definition of a run whose deployment was deleted (`deployment_delete`
        leaves finished runs), compiled from the snapshots its pin holds: the deployment
        revision and every artifact of the closure as they were when it started.
        `DeploymentNotFoundError` when the pin or a snapshot is gone too."""
        missing = DeploymentNotFoundError(run.definition_name, number)
        pin = await self.pins.read(run.graph_run_id)
        if pin is None or pin.deployment.get("revision") != number:
            raise missing
        digests = pin.snapshot_digests()
        try:
            found = await self.session.store.ledger.attachments(digests)
        except storage.AttachmentNotFoundError:
            raise missing from None
        deployment = load_deployment(found[digests[0]])
        if deployment.name != run.definition_name:
            raise missing
        revision = DeploymentRevision(
            run.definition_name,
            number,
            digests[0],
            str(pin.document.get("pinned_at", "")),
            deployment,
        )
        closure = [load_artifact(found[digest], format="json") for digest in digests[1:]]
        return self._ensure_validated(revision, closure)

    async def register_all(self) -> int:
        """Register the definition of every saved revision of every deployment (so a
        supervisor activated afterwards can adopt their unfinished runs); the count."""
        count = 0
        for listed in await self.deployments.list(self._sid):
            for number in await self.deployments.revisions(self._sid, listed["name"]):
                revision = await self.deployments.get(self._sid, listed["name"], number)
                self._ensure(revision, await self._closure(revision))
                count += 1
        return count

    async def serve_deployments(self) -> int:
        """Before the session's supervisor activates: `register_all`, and make `load`
        its definition loader, so runs of revisions saved later by another process (a
        front door) are started, resumed and adopted too; the count registered now.
        The session's schedules start deployments' runs through this service."""
        from .scheduling import ScheduledStarts

        count = await self.register_all()
        self.session.supervisor.definition_loader = self.load
        self.session.deployment_starter = ScheduledStarts(self)
        return count

    async def load(self, name: str, version: str) -> None:
        """Register ``name@version`` if it names a saved deployment revision of the
        session; anything else stays unknown to the catalog."""
        number = revision_of(version)
        if number is None:
            return
        try:
            revision = await self.deployments.get(self._sid, name, number)
            closure = await self._closure(revision)
        except (DeploymentNotFoundError, ArtifactNotFoundError):
            return
        self._ensure(revision, closure)

    async def _definition_of(self, run: Run) -> DeployedDefinition:
        number = revision_of(run.definition_version)
        if number is None:
            raise NotADeployedRunError(f"run {run.id} is not a deployed run")
        try:
            revision = await self.deployments.get(self._sid, run.definition_name, number)
        except DeploymentNotFoundError:
            return await self._from_pin(run, number)
        return self._ensure(revision, await self._closure(revision))

    # -- starting ---------------------------------------------------------------------

    async def run_deployment(
        self,
        deployment: str,
        input: Mapping[str, Any],
        *,
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
        revision: int | None = None,
    ) -> dict[str, Any]:
        """Start a run of ``deployment``'s live revision (or ``revision``); see the module."""
        wait = _wait(wait_seconds)
        checked = await self.check_before_start(deployment, revision)
        if isinstance(checked, list):
            return _unrunnable(checked)
        chosen, closure, diagnostics, sources = checked
        self._ensure(chosen, closure)
        pending = _PendingPin(chosen, closure, sources)
        token = _PENDING.set(pending)
        try:
            started = await self.tools.start_run(
                chosen.name, version_of(chosen.revision), dict(input)
            )
        finally:
            _PENDING.reset(token)
        run_id = started.id
        await self._until_stopped(run_id, wait)
        described = await self.inspect_run(run_id)
        if diagnostics:
            described["start_diagnostics"] = [item.to_json() for item in diagnostics]
        return described

    async def check_before_start(
        self, deployment: str, revision: int | None
    ) -> (
        list[Diagnostic]
        | tuple[DeploymentRevision, list[StoredArtifact], list[Diagnostic], dict[str, Any]]
    ):
        """The before-start check: the errors (a list) or what a start needs."""
        try:
            chosen = await self.deployments.get(self._sid, deployment, revision)
        except DeploymentNotFoundError as exc:
            return [
                error(
                    DEPLOYMENT_MISSING,
                    str(exc),
                    "save the deployment (deployment_save)",
                    place=deployment,
                    deployment=deployment,
                )
            ]
        ref = chosen.validated.deployment.artifact
        try:
            closure = await self._closure(chosen)
        except ArtifactNotFoundError as exc:
            root = (exc.name, exc.version) == (ref.name, ref.version)
            return [
                error(
                    ARTIFACT_MISSING if root else CHILD_MISSING,
                    f"deployment {deployment} revision {chosen.revision}: {exc}",
                    "save the artifact version (and its children) it names",
                    place=f"{exc.name}@{exc.version}",
                    deployment=deployment,
                    artifact=exc.name,
                    version=exc.version,
                )
            ]
        diagnostics, sources = await check_start(
            [item.validated for item in closure],
            chosen.validated.bindings(),
            self.environment,
            seconds=self.check_timeout,
        )
        diagnostics = [
            item.with_context(deployment=deployment, artifact=ref.name, version=ref.version)
            for item in diagnostics
        ]
        if any(item.severity == "error" for item in diagnostics):
            return diagnostics
        return chosen, closure, diagnostics, sources

    async def deployment_check(
        self, deployment: str, revision: int | None = None
    ) -> dict[str, Any]:
        """What `run_deployment` checks before a start, without starting (or writing):
        ``{deployment, revision, status: runnable|unrunnable, diagnostics}``."""
        checked = await self.check_before_start(deployment, revision)
        if isinstance(checked, list):
            number = revision
            with contextlib.suppress(DeploymentNotFoundError):
                number = (await self.deployments.get(self._sid, deployment, revision)).revision
            diagnostics, status = checked, "unrunnable"
        else:
            number, diagnostics, status = checked[0].revision, checked[2], "runnable"
        return {
            "deployment": deployment,
            "revision": number,
            "status": status,
            "diagnostics": [item.to_json() for item in diagnostics],
        }

    async def _bind_pin(self, record: Run) -> Run:
        """`WorkflowTools`' ``prepare_run``: write the validated pin of this new run."""
        pending = _PENDING.get()
        if pending is None:
            return record
        await self.pin_run(record, pending.revision, pending.closure, pending.sources)
        return record

    async def pin_run(
        self,
        record: Run,
        revision: DeploymentRevision,
        closure: list[StoredArtifact],
        sources: dict[str, Any],
    ) -> None:
        """Write the pin of the new run ``record`` (before the record exists): what
        `check_before_start` found for ``revision``."""
        # deleted since it was checked: the start fails rather than pinning a revision
        # nobody can compile again (DeploymentNotFoundError)
        await self.deployments.get(self._sid, revision.name, revision.revision)
        root = closure[0]
        document = {
            "format": PIN_FORMAT,
            "run_id": record.id,
            "graph_run_id": record.graph_run_id,
            "pinned_at": _stamp(self.session.clock.now()),  # a record of the run
            "deployment": {
                "name": revision.name,
                "revision": revision.revision,
                "digest": revision.digest,
            },
            "artifact": {
                "name": root.record.name,
                "version": root.record.version,
                "digest": root.record.digest,
                "closure_digest": root.record.closure_digest,
            },
            "children": [
                {"name": c.record.name, "version": c.record.version, "digest": c.record.digest}
                for c in closure[1:]
            ],
            "drift": revision.validated.deployment.drift,
            "sources": sources,
        }
        pin = Pin(document)
        snapshots = {revision.digest: revision.validated.canonical}
        snapshots.update({item.record.digest: item.canonical for item in closure})
        await self.record_uses(pin, record.id)
        await self.pins.write(pin, snapshots)

    async def record_uses(self, pin: Pin, run_id: str) -> None:
        """Tell the registry that ``run_id`` is pinned to each registered source of
        ``pin`` (before the pin exists, so a source is never removed under a run)."""
        for found in pin.sources.values():
            identity = found.get("identity") or {}
            if isinstance(identity.get("source"), str):
                await self.registry.add_use(
                    identity["source"], self._sid, run_id, int(identity["revision"])
                )

    async def _until_stopped(self, run_id: str, wait: float) -> Run:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            run = await self.session.registry.get(self._sid, run_id)
            if run.status in _STOPPED or loop.time() >= deadline:
                return run
            await asyncio.sleep(0.05)

    # -- resuming ---------------------------------------------------------------------

    async def resume_run(
        self,
        run_id: str,
        payload: Mapping[str, Any] | None,
        *,
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
    ) -> dict[str, Any]:
        """Resume an interrupted deployed run; a blocked one is returned as it is, with
        its readiness and diagnostics."""
        wait = _wait(wait_seconds)
        run = await self.session.registry.get(self._sid, run_id)
        await self._definition_of(run)
        try:
            await self.tools.resume_run(run_id, None if payload is None else dict(payload))
        except ToolError as exc:
            blocked = exc.cause
            if isinstance(blocked, ResumeBlockedError) and isinstance(
                blocked.readiness, ResumeReadiness
            ):
                described = await self._describe(
                    await self.session.registry.get(self._sid, run_id),
                    readiness=blocked.readiness.to_json(),
                )
                described["resumed"] = False
                return described
            raise
        await self._until_stopped(run_id, wait)
        described = await self.inspect_run(run_id, revalidate=False)
        described["resumed"] = True
        return described

    # -- reading ----------------------------------------------------------------------

    async def inspect_run(self, run_id: str, *, revalidate: bool = True) -> dict[str, Any]:
        """The run's description; ``revalidate=False`` does not connect to its sources
        (readiness then covers the graph only, and says ``revalidated: false``)."""
        run = await self.session.registry.get(self._sid, run_id)
        await self._definition_of(run)
        if revalidate:
            return await self._describe(run)
        with unchecked_environment():
            described = await self._describe(run)
        described["resume_readiness"]["revalidated"] = False
        return described

    async def validate_run(self, run_id: str) -> dict[str, Any]:
        """Whether the run could resume now: `inspect_run` revalidating its pinned
        environment now (reusing no earlier check), answered as ``{run_id, status,
        resume_readiness}``."""
        with fresh_environment():  # now: never an earlier check
            described = await self.inspect_run(run_id, revalidate=True)
        return {key: described[key] for key in ("run_id", "status", "resume_readiness")}

    async def _describe(
        self, run: Run, *, readiness: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        definition = await self._definition_of(run)
        with contextlib.ExitStack() as scope:
            checks = scope.enter_context(revalidation.observing())
            if readiness is not None:  # given (a blocked resume's): the sources not again
                scope.enter_context(unchecked_environment())
            got = await self.tools.describe_run(run.id)
        if readiness is None and checks and checks[-1].reused:
            # an earlier check stands in for one now: say so, and when it was made
            got["resume_readiness"].update(checks[-1].to_json())
        described: dict[str, Any] = {
            "run_id": run.id,
            "status": got["run_status"],
            "deployment": {
                "name": run.definition_name,
                "revision": revision_of(run.definition_version),
            },
            "resume_readiness": readiness or got["resume_readiness"],
            "latest_checkpoint": got["checkpoint_revision"],
        }
        pin = await definition.pins.read(run.graph_run_id)
        if pin is not None:
            described["pin"] = pin.digest
        if "pending" in got:
            pending = got["pending"]
            described["interrupt"] = {
                key: pending[key]
                for key in ("vertex_id", "vertex_label", "info", "resume_schema")
                if key in pending
            }
        if "error" in got:
            described["error"] = got["error"]
            described["errors"] = got["errors"]
        if run.status is RunStatus.COMPLETED:
            state = (await definition.get(run.graph_run_id)).state
            described["outcome"], described["output"] = artifact_outcome(state)
        try:
            described["trace_count"] = (
                await definition.trace.read(run.graph_run_id, limit=1)
            ).total
        except storage.StorageError:
            described["trace_count"] = None
        return described

    async def read_run_trace(
        self, run_id: str, *, start: int = 0, limit: int = 50
    ) -> dict[str, Any]:
        run = await self.session.registry.get(self._sid, run_id)
        definition = await self._definition_of(run)
        page = await definition.trace.read(run.graph_run_id, start=start, limit=limit)
        result = page.to_json()
        result["run_id"] = run_id
        return result

    async def pin_of(self, run_id: str) -> Pin | None:
        run = await self.session.registry.get(self._sid, run_id)
        return await self.pins.read(run.graph_run_id)


def _version(record: ArtifactRecord) -> dict[str, Any]:
    return {
        "version": record.version,
        "digest": record.digest,
        "closure_digest": record.closure_digest,
        "saved_at": record.to_json()["saved_at"],
    }


def validation_report(document: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
    """``{"valid": true, name, version, digest}``, or ``{"valid": false, "issues":
    [{place, code, message, hint}], "truncated"}``: an artifact's static validation."""
    try:
        if isinstance(document, str | bytes):
            validated = load_artifact(document)
        else:
            validated = validate_artifact(dict(document))
    except ArtifactValidationError as exc:
        return {"valid": False, "issues": exc.to_json(), "truncated": exc.truncated}
    return {
        "valid": True,
        "name": validated.name,
        "version": validated.version,
        "digest": validated.digest,
    }


def _wait(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ValueError("wait_seconds must be a number")
    if not 0 <= seconds <= MAX_WAIT_SECONDS:
        raise ValueError(f"wait_seconds must be in 0..{MAX_WAIT_SECONDS:g}")
    return float(seconds)


def _unrunnable(diagnostics: list[Diagnostic]) -> dict[str, Any]:
    return {"status": "unrunnable", "diagnostics": [item.to_json() for item in diagnostics]}
