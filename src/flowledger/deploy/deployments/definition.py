"""`DeployedDefinition`: the workflow definition of one deployment revision.

A deployment revision runs as the definition ``<deployment name>`` version
``r<revision>``: its artifact closure compiled with the revision's bindings (secrets
resolved from this process's environment when a tool node connects). Because the
revision is immutable, the definition is too, so a run's definition never changes under
it; a later revision is another definition version, and a run of an earlier one keeps
its sources.

Two hooks make a run's pin the authority:

* a graph run without a pin fails at its first node (`PinMissingError`):
  only `run_deployment`, which validates the environment first and writes the pin,
  starts deployed runs;
* under ``drift: block``, a tool whose contract differs from the pinned one when a node
  calls it is not called: the run fails (`ToolContractChangedError`);
* `check_resume` (called before every resume, on every path, and by readers of a run's
  readiness) adds the revalidation of the run's *pinned* environment to the bridge's own
  graph check (`flowledger.deploy.deployments.validation.check_pinned`): once per resume,
  by the owner under the run's lock (the callers that hand a resume on check only the
  graph and the payload); its source sessions stay open for the resumed segment, so a
  resume starts each stdio server once. A reader may reuse the owner's check that
  found the same run and pin ready, younger than `revalidation.REUSE_SECONDS`, and is
  told so.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

from ... import flow
from ...observability import metrics
from ...workflows.authoring.readiness import environment_is_deferred
from ...workflows.errors import InvalidForkError
from ..artifacts.validated import ValidatedArtifact
from ..registry.errors import SourceNotRegisteredError
from ..runs.compile import ArtifactDefinition, SourceRef, compile_artifact
from ..sources.spec import Source
from . import revalidation
from .diagnostics import PIN_MISSING, Diagnostic, error
from .document import SourceBinding
from .environment import SourceEnvironment
from .pin import Pin, PinStore
from .store import DeploymentRevision
from .validation import DEFAULT_CHECK_TIMEOUT, CallSite, call_sites, check_pinned

__all__ = [
    "DeployedDefinition",
    "DeploymentContext",
    "PinMissingError",
    "deployed_definition",
    "fresh_environment",
    "revision_of",
    "unchecked_environment",
    "version_of",
]

_VERSION: Final = re.compile(r"r([1-9][0-9]{0,9})")
_UNCHECKED: ContextVar[bool] = ContextVar("flowledger_deploy_unchecked", default=False)
_FRESH: ContextVar[bool] = ContextVar("flowledger_deploy_fresh", default=False)


def version_of(revision: int) -> str:
    """The definition version of deployment revision ``revision``."""
    return f"r{revision}"


def revision_of(version: str) -> int | None:
    """The deployment revision of a definition version, or ``None`` for another version."""
    match = _VERSION.fullmatch(version)
    return None if match is None else int(match.group(1))


@contextmanager
def unchecked_environment() -> Iterator[None]:
    """Within, `check_resume` checks only the graph, not the pinned sources (for a
    reader that asked not to connect to them)."""
    token = _UNCHECKED.set(True)
    try:
        yield
    finally:
        _UNCHECKED.reset(token)


@contextmanager
def fresh_environment() -> Iterator[None]:
    """Within, a reader's `check_resume` checks the pinned sources now, reusing no
    earlier check (``validate_run``: could the run resume *now*)."""
    token = _FRESH.set(True)
    try:
        yield
    finally:
        _FRESH.reset(token)


class PinMissingError(RuntimeError):
    pass


@dataclass(frozen=True)
class DeploymentContext:
    name: str
    revision: int
    digest: str
    drift: str
    bindings: Mapping[str, SourceBinding]
    sites: tuple[CallSite, ...]
    timeout: float
    environment: SourceEnvironment


class DeployedDefinition(ArtifactDefinition):
    """An `ArtifactDefinition` bound to a deployment revision (see the module)."""

    context: DeploymentContext

    def trace_attributes(self) -> dict[str, str | int | bool]:
        """What a segment span of this definition's runs names besides the definition."""
        return {
            "flowledger.deployment.name": self.context.name,
            "flowledger.deployment.revision": self.context.revision,
        }

    @property
    def pins(self) -> PinStore:
        """The pins of this definition's runs (in the database it is bound to)."""
        return PinStore(self.runtime.ledger)

    async def check_resume(self, graph_run_id: str) -> tuple[Diagnostic, ...]:
        """The graph check, then the pinned environment's: inside `resuming` (the owner's
        check under the run's lock) always checked now, its sessions kept for the
        segment, and the result kept if ready; for a reader, the owner's ready check of
        the same run and pin younger than `revalidation.REUSE_SECONDS` is reused; not at all inside
        `unchecked_environment` or `environment_deferred` (a caller that hands the
        resume to the owner)."""
        found = list(await super().check_resume(graph_run_id))
        if _UNCHECKED.get() or environment_is_deferred():
            return tuple(found)
        pin = await self.pins.read(graph_run_id)
        if pin is None:
            found.append(_pin_missing(graph_run_id))
            return tuple(item.with_context(deployment=self.context.name) for item in found)
        checks = self.context.environment.revalidations
        pool = self.held_pool(graph_run_id)
        reuse = pool is None and not _FRESH.get()
        recent = checks.recent(graph_run_id, pin.digest) if reuse else None
        if recent is None:
            diagnostics = await check_pinned(
                pin.sources,
                self.context.bindings,
                pin.drift,
                self.context.sites,
                self.context.environment,
                seconds=self.context.timeout,
                pool=pool,
            )
            # only the owner's check that found the run ready is kept for readers: a
            # reader's own check, or a blocked one (its cause is likely being repaired),
            # never hides from a later reader what changed in between
            ready = not any(item.severity == "error" for item in diagnostics)
            metrics.revalidated("ready" if ready else "blocked")
            recent = (
                checks.record(graph_run_id, pin.digest, diagnostics)
                if pool is not None and ready
                else checks.made(diagnostics)
            )
        revalidation.note(recent)
        found += recent.diagnostics
        return tuple(item.with_context(deployment=self.context.name) for item in found)

    async def pinned_sources(self, graph_run_id: str) -> Mapping[str, SourceRef] | None:
        """A run's registered sources are the revisions its pin names, resolved (with
        the secrets its session is granted) when each segment starts."""
        pin = await self.pins.read(graph_run_id)
        if pin is None:
            return None
        return await self.context.environment.sources_for(pin.sources)

    async def fork(
        self, graph_run_id: str, revision: int, patch: Any, *, run_id: str
    ) -> flow.ForkOrigin:
        """The fork executes under its origin's pin: the same deployment revision, sources,
        tools and drift policy, copied to the fork's graph run (its snapshots are shared,
        not copied) after the fork's revision 0 is written. An origin without a pin is
        refused before anything is written. Like any deployed run, the fork's pinned
        sources are revalidated before it resumes."""
        pin = await self.pins.read(graph_run_id)
        if pin is None:
            raise InvalidForkError("definition", _pin_missing(graph_run_id).message)
        made = await super().fork(graph_run_id, revision, patch, run_id=run_id)
        snapshots = await self.runtime.ledger.attachments(pin.snapshot_digests())
        copy = Pin({**pin.document, "graph_run_id": run_id})
        registry = self.context.environment.sessions.registry
        session_id = self.context.environment.sessions.session_id
        for found in copy.sources.values():
            identity = found.get("identity") or {}
            if isinstance(identity.get("source"), str):
                await registry.add_use(
                    identity["source"], session_id, run_id, int(identity["revision"])
                )
        await self.pins.write(copy, snapshots)
        return made

    async def refusal(self, graph_run_id: str) -> Exception | None:
        if await self.pins.read(graph_run_id) is None:
            return PinMissingError(_pin_missing(graph_run_id).message)
        return None

    async def pinned_contracts(self, graph_run_id: str) -> Mapping[str, Mapping[str, str]] | None:
        """Under ``drift: block`` every call must meet the pinned contract (a contract
        that changes while the run executes fails it); the other policies rely on the
        arguments validating against the tool's schema at the call."""
        pin = await self.pins.read(graph_run_id)
        if pin is None or pin.drift != "block":
            return None
        return {
            dependency: {tool: str(prints["contract"]) for tool, prints in found["tools"].items()}
            for dependency, found in pin.sources.items()
        }

    async def pinned_repeatable(self, graph_run_id: str) -> Mapping[str, Mapping[str, bool]] | None:
        """A pinned run's tools are read-only or idempotent as the pin recorded them (the
        annotations when the run started, or the deployment's ``idempotent``), so a
        listing that changes its hints mid-run cannot widen what is retried."""
        pin = await self.pins.read(graph_run_id)
        if pin is None:
            return None
        return {
            dependency: {
                tool: bool(
                    prints.get("read_only")
                    or prints.get("idempotent")
                    or prints.get("declared_idempotent")
                )
                for tool, prints in found["tools"].items()
            }
            for dependency, found in pin.sources.items()
        }


def _pin_missing(graph_run_id: str) -> Diagnostic:
    return error(
        PIN_MISSING,
        f"graph run {graph_run_id} has no pinned environment",
        "start deployed runs with run_deployment, which validates and pins the environment",
    )


def deployed_definition(
    revision: DeploymentRevision,
    closure: Sequence[ValidatedArtifact],
    environment: SourceEnvironment,
    *,
    timeout: float = DEFAULT_CHECK_TIMEOUT,
) -> DeployedDefinition:
    """Compile ``closure`` (the root artifact first, then its children) for ``revision``,
    its sources found in ``environment``."""
    root, children = closure[0], {item.name: item for item in closure[1:]}
    bindings = revision.validated.bindings()
    sources: dict[str, SourceRef] = {
        dep: (
            _registered_outside_a_pin(dep, b.registered)
            if b.registered is not None
            else functools.partial(b.source, environment.sessions.environ)
        )
        for dep, b in bindings.items()
    }
    definition = compile_artifact(
        root,
        children=children,
        sources=sources,
        connect_timeout=timeout,
        name=revision.name,
        version=version_of(revision.revision),
        definition_type=DeployedDefinition,
    )
    assert isinstance(definition, DeployedDefinition)
    definition.context = DeploymentContext(
        revision.name,
        revision.revision,
        revision.digest,
        revision.validated.deployment.drift,
        bindings,
        tuple(call_sites(closure)),
        timeout,
        environment,
    )
    return definition


def _registered_outside_a_pin(dependency: str, name: str) -> SourceRef:
    """What a registered dependency resolves to without a pin: nothing (a deployed run
    without a pin is refused before its first node; this keeps it so)."""

    def refuse() -> Source:
        raise SourceNotRegisteredError(name)

    del dependency
    return refuse
