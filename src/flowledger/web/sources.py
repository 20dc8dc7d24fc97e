"""What the Sources pages show: the operator's registered sources as one session sees
them (`SessionSources`: a source the session may not see is not found, exactly like an
unknown name).

Everything here is read from the database: the registry's documents, their last probe
(recorded by the operator), the session's deployments, runs and pins. Nothing starts a
process or opens a connection: the dashboard's users are tenants, and probing, enabling
and disabling a source are the operator's (the CLI's).

What a source shows of its spec is its `identity` (command, arguments, URL without
credentials; environment variable, header and secret *names*): never an environment or
header value, literal or secret, and never the other sessions it is visible to.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Final

from ..deploy.deployments.service import DeployService
from ..deploy.registry.errors import SourceNotRegisteredError
from ..deploy.registry.store import Probe, RegisteredSource
from ..deploy.sources.errors import clip
from ..deploy.sources.fingerprint import short
from ..flow.ids import VERTEX_ID
from ..workflows.errors import NotFoundError

__all__ = [
    "MAX_PINNED_CHECKED",
    "PROBE_ERROR_CHARS",
    "Binder",
    "LastProbe",
    "PinnedRun",
    "SourceDetail",
    "SourceRow",
    "ToolRow",
    "Transport",
    "source_detail",
    "source_rows",
]

PROBE_ERROR_CHARS: Final = 120  # the table's clip; the full (stored) text is its title
# A source's uses are recorded per pinned run and cleared only when the source is removed,
# so a long-lived source collects the uses of many finished runs: a detail page checks at
# most this many of the session's (one record read each) and says when it stopped.
MAX_PINNED_CHECKED: Final = 1000


@dataclass(frozen=True)
class Transport:
    """How the source is reached, as its identity says: ``kind`` (``stdio`` / ``http``),
    a one-line ``label`` (the command line, or the URL) and named ``details``."""

    kind: str
    label: str
    details: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class LastProbe:
    revision: int
    probed_at: str
    ok: bool
    error: str  # clipped to `PROBE_ERROR_CHARS`
    full_error: str
    tools: int
    stale: bool  # of an earlier revision than the current one


@dataclass(frozen=True)
class SourceRow:
    name: str
    description: str
    transport: Transport
    revision: int
    enabled: bool
    saved_at: str
    probe: LastProbe | None


@dataclass(frozen=True)
class ToolRow:
    name: str
    title: str
    read_only: bool
    idempotent: bool
    contract_fingerprint: str
    full_fingerprint: str
    bindable: bool  # within the source's ``allow_tools``

    @property
    def contract_short(self) -> str:
        """The first 12 hex digits, as the CLI's tables show them."""
        return short(self.contract_fingerprint)

    @property
    def full_short(self) -> str:
        return short(self.full_fingerprint)


@dataclass(frozen=True)
class Binder:
    """A deployment of the session whose live revision binds the source."""

    deployment: str
    live: int
    dependency: str
    revision: int | None  # the source revision the binding names; None: the current one
    allow_tools: tuple[str, ...]


@dataclass(frozen=True)
class PinnedRun:
    """An unfinished run of the session pinned to the source."""

    run_id: str
    status: str
    definition_name: str
    definition_version: str
    updated_at: str
    pinned: tuple[tuple[str, int], ...]  # (dependency, source revision) as the pin says


@dataclass(frozen=True)
class SourceDetail:
    row: SourceRow
    server: dict[str, Any] | None
    tools: list[ToolRow]
    allow_tools: tuple[str, ...] | None  # None: deployments may bind every tool
    call_tools: tuple[str, ...]
    deployments: list[Binder]
    runs: list[PinnedRun]
    uses_checked: int
    uses_total: int


def _transport(registered: RegisteredSource) -> Transport:
    identity = registered.source.identity()
    details: list[tuple[str, str]] = []
    if identity["transport"] == "stdio":
        label = clip(shlex.join([identity["command"], *identity["args"]]), 240)
        if identity.get("cwd"):
            details.append(("working directory", str(identity["cwd"])))
        details.append(("environment variables", ", ".join(identity["env"]) or "none"))
    elif identity["transport"] == "http":
        label = str(identity["url"])
        details.append(("headers", ", ".join(identity["headers"]) or "none"))
    elif identity["transport"] == "openapi":
        label = str(identity["base_url"])
        details.append(("document", str(identity["document"])))
        operations = identity.get("operations")
        details.append(("operations", ", ".join(operations) if operations else "all"))
        auth = identity.get("auth") or {}
        where = next((key for key in ("header", "query") if key in auth), None)
        credential = f"{auth[where]} ({where}), secret {auth['secret']}" if where else "none"
        details.append(("credential", credential))
        return Transport("openapi", clip(label, 240), tuple(details))
    else:  # python, builtin: functions called in the process, no secrets
        label = str(identity.get("module") or identity.get("library"))
        functions = identity.get("functions")
        details.append(("functions", ", ".join(functions) if functions else "all"))
        for hint in ("read_only", "idempotent"):
            if identity.get(hint):
                details.append((hint.replace("_", "-"), ", ".join(identity[hint])))
        return Transport(str(identity["transport"]), clip(label, 240), tuple(details))
    details.append(("secrets", ", ".join(identity["secrets"]) or "none"))
    return Transport(str(identity["transport"]), label, tuple(details))


def _last_probe(registered: RegisteredSource, probe: Probe | None) -> LastProbe | None:
    if probe is None:
        return None
    error = probe.error or ""
    return LastProbe(
        probe.revision,
        probe.probed_at,
        probe.ok,
        clip(error, PROBE_ERROR_CHARS),
        error,
        len(probe.tools),
        probe.revision != registered.revision,
    )


async def _row(
    service: DeployService, registered: RegisteredSource
) -> tuple[SourceRow, Probe | None]:
    # the registry's own read: `registered` came through the session's visibility check
    probe = await service.registry.last_probe(registered.name)
    row = SourceRow(
        registered.name,
        registered.source.document.description,
        _transport(registered),
        registered.revision,
        registered.enabled,
        registered.saved_at,
        _last_probe(registered, probe),
    )
    return row, probe


async def source_rows(service: DeployService) -> list[SourceRow]:
    """Every source the service's session may see, enabled or not, by name."""
    rows = []
    for registered in await service.sources.list(include_disabled=True):
        rows.append((await _row(service, registered))[0])
    return rows


async def source_detail(service: DeployService, name: str) -> SourceDetail:
    """One source the session may see, with its probed tools, the session's deployments
    that bind it and the session's unfinished runs pinned to it.
    `SourceNotRegisteredError` for a name the session may not see, an unknown one and one
    that is not a source name at all: a session cannot tell them apart."""
    if not VERTEX_ID.fullmatch(name):
        raise SourceNotRegisteredError(name)
    registered = await service.sources.get(name)
    row, probe = await _row(service, registered)
    validated = registered.source
    tools = [
        ToolRow(
            tool.name,
            tool.title or "",
            tool.read_only,
            tool.idempotent,
            tool.contract_fingerprint,
            tool.full_fingerprint,
            validated.allows(tool.name),
        )
        for tool in (probe.tools if probe is not None else ())
    ]
    allowed = validated.document.allow_tools
    runs, checked, total = await _pinned_runs(service, name)
    return SourceDetail(
        row,
        probe.server if probe is not None else None,
        tools,
        None if allowed is None else tuple(allowed),
        tuple(validated.document.call_tools),
        await _binders(service, name),
        runs,
        checked,
        total,
    )


async def _binders(service: DeployService, name: str) -> list[Binder]:
    session_id = service.session.session_id
    found = []
    for listed in await service.deployments.list(session_id):
        if listed["live"] is None:
            continue  # saved but never made live: nothing runs it
        live = await service.deployments.get(session_id, listed["name"])
        for dependency, binding in live.validated.bindings().items():
            if binding.registered == name:
                found.append(
                    Binder(
                        live.name,
                        live.revision,
                        dependency,
                        binding.binding.revision,
                        binding.allow_tools,
                    )
                )
    return found


async def _pinned_runs(service: DeployService, name: str) -> tuple[list[PinnedRun], int, int]:
    """The session's unfinished runs among the runs recorded as pinned to ``name``, the
    number of records checked and of records in all."""
    session_id = service.session.session_id
    mine = sorted(run for sid, run in await service.registry.uses(name) if sid == session_id)
    found = []
    for run_id in mine[:MAX_PINNED_CHECKED]:
        try:
            run = await service.session.registry.get(session_id, run_id)
        except NotFoundError:
            continue  # removed (pruned) since it was pinned
        if run.status.terminal:
            continue
        pin = await service.pins.read(run.graph_run_id)
        pinned = []
        for dependency, entry in (pin.sources if pin is not None else {}).items():
            identity = entry.get("identity") or {}
            if identity.get("source") == name:
                pinned.append((dependency, int(identity["revision"])))
        found.append(
            (
                run.updated_at,
                PinnedRun(
                    run.id,
                    str(run.status),
                    run.definition_name,
                    run.definition_version,
                    run.updated_at.isoformat(),
                    tuple(pinned),
                ),
            )
        )
    found.sort(key=lambda item: item[0], reverse=True)  # the latest change first
    return [run for _, run in found], min(len(mine), MAX_PINNED_CHECKED), len(mine)
