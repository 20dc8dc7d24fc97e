"""`SourceEnvironment`: where one session's deployed runs get their sources, under the
door's `SourceAccess` (docs/sources.md, "Who may do what").

A binding becomes a `Prepared` source before anything is contacted:

* a **registered** binding (``source: NAME``) reads the registry as the session sees
  it: a source it may not see is ``source_missing``, a disabled one ``source_disabled``,
  a secret not granted to it or not set ``credential_missing``. The pin records
  ``{"source": NAME, "revision": N}`` beside the transport identity, and a resume
  revalidates that exact revision;
* an **inline** binding (``stdio`` / ``http``) is the operator's: refused for a tenant
  (``inline_source_refused``), its secrets read from this process's environment
  (``FLOWLEDGER_*`` never).

Where the door starts nothing (a read-only server), a registered source is compared
with the registry's last probe of the same revision (``checked_against_probe``, a
warning that says when that probe was), and an inline one is not checked
(``not_revalidated``); neither is contacted.

At run time (`sources_for`), a run's registered dependencies are resolved from its pin
when each segment starts, so a run always talks to the revision it was pinned to, with
the secrets its session is granted then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...clock import Clock
from ..registry.access import SessionSources
from ..registry.errors import RegistryError, SourceDisabledError, SourceNotRegisteredError
from ..registry.rates import GatedSource, RateLimits
from ..registry.spec import CredentialMissingError
from ..registry.store import Probe, RegisteredSource
from ..sources.spec import Source
from .diagnostics import (
    BINDING_MISSING,
    CHECKED_AGAINST_PROBE,
    CREDENTIAL_MISSING,
    INLINE_SOURCE_REFUSED,
    NOT_REVALIDATED,
    SOURCE_DISABLED,
    SOURCE_MISSING,
    Diagnostic,
    error,
    warning,
)
from .document import SourceBinding
from .revalidation import Revalidations

__all__ = ["Prepared", "SourceEnvironment"]

SourceRef = Source | Callable[[], Source]


@dataclass
class Prepared:
    """A dependency's source, ready to be contacted (``source``), compared with a
    recorded probe instead (``cached``), or neither (``diagnostics`` say why)."""

    dependency: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    source: Source | None = None
    identity: dict[str, Any] | None = None
    registered: RegisteredSource | None = None
    cached: Probe | None = None


def _raising(exc: Exception) -> Callable[[], Source]:
    def resolve() -> Source:
        raise exc

    return resolve


class SourceEnvironment:
    """The sources of ``sessions.session_id`` under ``sessions.access``."""

    def __init__(self, sessions: SessionSources, *, clock: Clock | None = None) -> None:
        self.sessions = sessions
        # calls to registered sources pass these; their windows are read on ``clock``
        self.rates = RateLimits(sessions.registry, clock)
        # the recent checks of runs' pinned sources through this door (readers reuse them)
        self.revalidations = Revalidations()

    @property
    def launches(self) -> bool:
        return self.sessions.access.launch

    async def prepare(self, binding: SourceBinding) -> Prepared:
        """Before a start: the binding as the deployment states it."""
        if binding.registered is not None:
            return await self._registered(
                binding.dependency, binding.registered, binding.binding.revision
            )
        return self._inline(binding.dependency, binding)

    async def prepare_pinned(
        self, dependency: str, pinned: Mapping[str, Any], binding: SourceBinding | None
    ) -> Prepared:
        """Before a resume: the source as the run's pin recorded it (``pinned``: the pin's
        entry for ``dependency``), ``binding`` being the pinned revision's."""
        identity = pinned.get("identity") or {}
        name = identity.get("source")
        if isinstance(name, str):
            return await self._registered(dependency, name, int(identity["revision"]))
        if binding is None:  # the pinned revision bound it when the run started
            return Prepared(
                dependency,
                [
                    error(
                        BINDING_MISSING,
                        f"the pinned revision has no source {dependency!r}",
                        "start a new run",
                        place=dependency,
                        dependency=dependency,
                    )
                ],
            )
        return self._inline(dependency, binding)

    async def _registered(self, dependency: str, name: str, revision: int | None) -> Prepared:
        prepared = Prepared(dependency)
        try:
            registered = await self.sessions.enabled(name, revision)
        except SourceDisabledError as exc:
            prepared.diagnostics.append(
                error(
                    SOURCE_DISABLED,
                    f"dependency {dependency!r}: {exc}",
                    f"ask the operator to enable it (flowledger source enable {name})",
                    place=dependency,
                    dependency=dependency,
                    source=name,
                )
            )
            return prepared
        except SourceNotRegisteredError as exc:
            prepared.diagnostics.append(
                error(
                    SOURCE_MISSING,
                    f"dependency {dependency!r}: {exc}",
                    "bind a source listed by capability_list, or ask the operator to "
                    "register it (flowledger source add)",
                    place=dependency,
                    dependency=dependency,
                )
            )
            return prepared
        prepared.registered = registered
        prepared.identity = {
            "source": name,
            "revision": registered.revision,
            **registered.source.identity(),
        }
        try:
            prepared.source = self.sessions.source(registered, dependency)
        except CredentialMissingError as exc:
            prepared.diagnostics.append(
                error(
                    CREDENTIAL_MISSING,
                    str(exc),
                    "ask the operator to set and grant the secret (the source's `secrets`)",
                    place=dependency,
                    dependency=dependency,
                    source=name,
                )
            )
            return prepared
        if not self.launches:
            prepared.source = None
            probe = await self.sessions.registry.last_probe(name)
            if probe is not None and probe.ok and probe.revision == registered.revision:
                prepared.cached = probe
                prepared.diagnostics.append(
                    warning(
                        CHECKED_AGAINST_PROBE,
                        f"dependency {dependency!r}: compared with the registry's probe of "
                        f"{probe.probed_at}; this server starts and contacts no source",
                        place=dependency,
                        dependency=dependency,
                        source=name,
                    )
                )
            else:
                prepared.diagnostics.append(_not_revalidated(dependency))
        return prepared

    def _inline(self, dependency: str, binding: SourceBinding) -> Prepared:
        prepared = Prepared(dependency)
        if not self.sessions.access.inline:
            prepared.diagnostics.append(
                error(
                    INLINE_SOURCE_REFUSED,
                    f"dependency {dependency!r} is bound to a command line or URL, which "
                    "only the operator may use",
                    "bind a registered source (sources.<dependency>.source: NAME); the "
                    "operator can move inline bindings into the registry with "
                    "`flowledger source migrate`",
                    place=dependency,
                    dependency=dependency,
                )
            )
            return prepared
        try:
            prepared.identity = binding.identity()
            prepared.source = binding.source(self.sessions.environ)
        except CredentialMissingError as exc:
            prepared.diagnostics.append(
                error(
                    CREDENTIAL_MISSING,
                    str(exc),
                    f"set {exc.variable} in the environment of the process that runs the "
                    "workflow (the CLI, MCP server or worker)",
                    place=dependency,
                    dependency=dependency,
                )
            )
            prepared.source = None
            return prepared
        if not self.launches:
            prepared.source = None
            prepared.diagnostics.append(_not_revalidated(dependency))
        return prepared

    async def sources_for(
        self, pin_sources: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, SourceRef]:
        """At run time: each registered dependency of a pin, resolved now (what resolves
        badly raises when a node uses it, so the run fails with nothing sent)."""
        resolved: dict[str, SourceRef] = {}
        for dependency, pinned in pin_sources.items():
            identity = pinned.get("identity") or {}
            name = identity.get("source")
            if not isinstance(name, str):
                continue
            try:
                registered = await self.sessions.enabled(name, int(identity["revision"]))
                source = self.sessions.source(registered, dependency)
                resolved[dependency] = GatedSource(source, name, self.rates)
            except (RegistryError, CredentialMissingError) as exc:
                resolved[dependency] = _raising(exc)
        return resolved


def _not_revalidated(dependency: str) -> Diagnostic:
    return warning(
        NOT_REVALIDATED,
        f"dependency {dependency!r} was not revalidated: this server starts and contacts no source",
        "the process that resumes the run revalidates it",
        place=dependency,
        dependency=dependency,
    )
