"""Checking a deployed run's environment: before it starts, and before it resumes.

`check_start` validates a deployment revision against its artifact closure in this
process, as things are now: every dependency bound (a registered source visible to the
session and enabled, or an inline one where the door allows it: `SourceEnvironment`),
every secret set and granted, every tool the closure calls allowed (by the deployment
and by the registered source), each source reachable (all sources probed in parallel, each
bounded by the timeout), each tool listed, and every call site's literal arguments
valid for the tool's input schema, and every tool node's ``retry.on`` allowed by the
retry table for its tool (``retry_not_allowed``: ``timeout``, ``invalid_result`` and
``outcome_unknown`` only for a tool annotated read-only or idempotent, or declared
``idempotent`` by the binding). It returns the diagnostics and what it observed (the
pin's source part); it writes nothing.

`check_pinned` revalidates a run's *pin*: the sources of the pinned revision (never the
deployment's current revision), their secrets, and each pinned tool's fingerprints
under the pinned drift policy. A changed contract is ``schema_drift``: an error under
``block``; under ``compatible`` an error only when a call site's literal arguments no
longer validate; under ``warn`` a warning. A changed full fingerprint alone is a
``description_changed`` warning, another server name or version (or, for an OpenAPI
source, another document digest) ``server_changed``.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import jsonschema.validators  # type: ignore[import-untyped, unused-ignore]

from ..artifacts.failures import NEEDS_REPEATABLE
from ..artifacts.model import ForeachNode, ForeachToolBody, ToolNode
from ..artifacts.validated import ValidatedArtifact
from ..registry.store import RegisteredSource
from ..sources.connect import session_for
from ..sources.errors import SourceError
from ..sources.openapi_tools import META_KEY as OPENAPI_META_KEY
from ..sources.pool import SourcePool
from ..sources.python_tools import META_KEY
from ..sources.tool_info import ToolInfo
from .diagnostics import (
    ARGUMENTS_INCOMPATIBLE,
    BINDING_MISSING,
    DESCRIPTION_CHANGED,
    RETRY_NOT_ALLOWED,
    SCHEMA_DRIFT,
    SERVER_CHANGED,
    SOURCE_UNREACHABLE,
    TOOL_MISSING,
    TOOL_NOT_ALLOWED,
    Diagnostic,
    error,
    warning,
)
from .document import SourceBinding
from .environment import Prepared, SourceEnvironment

__all__ = [
    "CallSite",
    "call_sites",
    "check_pinned",
    "check_start",
    "incompatible_calls",
    "retry_table_diagnostics",
]

DEFAULT_CHECK_TIMEOUT = 10.0


@dataclass(frozen=True)
class CallSite:
    """One tool node of the closure: where, which tool, and its argument template."""

    place: str
    dependency: str
    tool: str
    arguments: Any
    retry_on: tuple[str, ...] = ()


def call_sites(closure: Sequence[ValidatedArtifact]) -> list[CallSite]:
    """Every tool call of the closure: tool nodes, and foreach nodes whose body calls a
    tool (per item; a body has no retry), also inside foreach sequence bodies (at any
    depth, placed ``<artifact>.nodes.<foreach>.body.nodes.<node>``)."""
    sites: list[CallSite] = []

    def walk(validated: ValidatedArtifact, prefix: str) -> None:
        for node_id, node in validated.artifact.nodes.items():
            place = f"{prefix}.nodes.{node_id}"
            if isinstance(node, ToolNode):
                retried = tuple(node.retry.on) if node.retry is not None else ()
                sites.append(CallSite(place, node.dependency, node.tool, node.arguments, retried))
            elif isinstance(node, ForeachNode) and isinstance(node.body, ForeachToolBody):
                body = node.body
                sites.append(
                    CallSite(f"{place}.body", body.dependency, body.tool, body.arguments, ())
                )
            elif node_id in validated.sequences:
                walk(validated.sequences[node_id], f"{place}.body")

    for validated in closure:
        walk(validated, validated.name)
    return sites


def _is_expression(value: Any) -> bool:
    return isinstance(value, str) and value.strip().startswith("${")


def incompatible_calls(sites: Sequence[CallSite], tool: ToolInfo) -> list[str]:
    """Why call sites of ``tool`` cannot validate against its input schema, statically:
    literal members are validated, members that are expressions only count as present
    (their values are known at run time). An argument template that is one expression
    is not checked."""
    problems = []
    schema = dict(tool.input_schema)
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = cls(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return [f"the input schema of {tool.name} is invalid: {exc.message}"]
    for site in sites:
        if site.tool != tool.name or not isinstance(site.arguments, dict):
            continue
        dynamic = {k for k, v in site.arguments.items() if _is_expression(v)}
        literal = {k: v for k, v in site.arguments.items() if k not in dynamic}
        for found in validator.iter_errors(literal):
            if found.validator == "required" and not found.absolute_path:
                missing = {m for m in found.validator_value if m not in literal}
                if missing <= dynamic:
                    continue
            if found.absolute_path and found.absolute_path[0] in dynamic:
                continue
            problems.append(f"{site.place}: {found.json_path}: {found.message}")
    return problems


@dataclass
class _Probe:
    dependency: str
    diagnostics: list[Diagnostic]
    registered: RegisteredSource | None = None
    identity: dict[str, Any] | None = None
    server: dict[str, Any] | None = None
    tools: dict[str, ToolInfo] | None = None


async def _observe(prepared: Prepared, seconds: float, pool: SourcePool | None = None) -> _Probe:
    """Contact a prepared source (or read its recorded probe): its server and tools.
    With ``pool``, the session is the pool's and stays open (for the segment the check
    admits); otherwise it is closed again."""
    probe = _Probe(
        prepared.dependency, list(prepared.diagnostics), prepared.registered, prepared.identity
    )
    if prepared.cached is not None:
        probe.server = prepared.cached.server
        probe.tools = {tool.name: tool for tool in prepared.cached.tools}
        return probe
    if prepared.source is None:
        return probe
    try:
        if pool is not None:
            kept = await pool.session(prepared.source)
            probe.server = kept.server_info.to_json()
            probe.tools = {tool.name: tool for tool in await kept.list_tools(timeout=seconds)}
        else:
            async with session_for(
                prepared.source,
                connect_timeout=seconds,
                call_timeout=seconds,
                errlog=io.StringIO(),
            ) as session:
                probe.server = session.server_info.to_json()
                probe.tools = {tool.name: tool for tool in await session.list_tools()}
    except SourceError as exc:
        probe.diagnostics.append(
            error(
                SOURCE_UNREACHABLE,
                f"dependency {prepared.dependency!r}: {exc}",
                "start the server or repair its command, URL or credentials (a Python "
                "source: make its module importable; an OpenAPI source: its document and "
                "base URL), then check again",
                place=prepared.dependency,
                dependency=prepared.dependency,
                source=_registered_name(prepared.registered),
            )
        )
    return probe


def _used_tools(sites: Sequence[CallSite]) -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}
    for site in sites:
        tools = used.setdefault(site.dependency, [])
        if site.tool not in tools:
            tools.append(site.tool)
    return used


async def check_start(
    closure: Sequence[ValidatedArtifact],
    bindings: Mapping[str, SourceBinding],
    environment: SourceEnvironment,
    *,
    seconds: float = DEFAULT_CHECK_TIMEOUT,
) -> tuple[list[Diagnostic], dict[str, dict[str, Any]]]:
    """The diagnostics of starting ``closure`` (root first) with ``bindings`` now, and
    per dependency what the pin records (identity, server, tool fingerprints)."""
    sites = call_sites(closure)
    used = _used_tools(sites)
    diagnostics: list[Diagnostic] = []
    to_probe: list[SourceBinding] = []
    for dependency, tools in sorted(used.items()):
        binding = bindings.get(dependency)
        if binding is None:
            diagnostics.append(
                error(
                    BINDING_MISSING,
                    f"dependency {dependency!r} is not bound to a source",
                    f"add sources.{dependency} (stdio or http, allow_tools) to the deployment",
                    place=dependency,
                    dependency=dependency,
                )
            )
            continue
        for tool in tools:
            if tool not in binding.allow_tools:
                diagnostics.append(
                    error(
                        TOOL_NOT_ALLOWED,
                        f"the artifact calls {dependency}.{tool}, which the deployment does "
                        "not allow",
                        f"add {tool} to sources.{dependency}.allow_tools",
                        place=f"{dependency}.{tool}",
                        dependency=dependency,
                        tool=tool,
                        source=binding.registered,
                    )
                )
        to_probe.append(binding)
    prepared = await asyncio.gather(*(environment.prepare(b) for b in to_probe))
    probes = await asyncio.gather(*(_observe(p, seconds) for p in prepared))
    observed: dict[str, dict[str, Any]] = {}
    for probe in probes:
        diagnostics += probe.diagnostics
        if probe.registered is not None:
            for tool in used[probe.dependency]:
                if not probe.registered.source.allows(tool):
                    diagnostics.append(
                        error(
                            TOOL_NOT_ALLOWED,
                            f"the artifact calls {probe.dependency}.{tool}, which source "
                            f"{probe.registered.name!r} does not allow deployments to bind",
                            "ask the operator to add it to the source's allow_tools",
                            place=f"{probe.dependency}.{tool}",
                            dependency=probe.dependency,
                            tool=tool,
                            source=probe.registered.name,
                        )
                    )
        if probe.tools is None or probe.identity is None:
            continue
        pinned_tools = {}
        for tool in used[probe.dependency]:
            info = probe.tools.get(tool)
            if info is None:
                diagnostics.append(_tool_missing(probe, tool))
                continue
            for problem in incompatible_calls(sites, info):
                diagnostics.append(
                    error(
                        ARGUMENTS_INCOMPATIBLE,
                        f"{probe.dependency}.{tool}: {problem}",
                        "change the call's arguments in a new artifact version, or bind a "
                        "source whose tool accepts them",
                        place=f"{probe.dependency}.{tool}",
                        dependency=probe.dependency,
                        tool=tool,
                        source=_registered_name(probe.registered),
                    )
                )
            binding = bindings[probe.dependency]
            declared = binding.declared_idempotent(tool)
            diagnostics += retry_table_diagnostics(sites, probe.dependency, info, declared)
            pinned_tools[tool] = {
                "contract": info.contract_fingerprint,
                "full": info.full_fingerprint,
                "read_only": info.read_only,
                "idempotent": info.idempotent,
            }
            if declared:
                pinned_tools[tool]["declared_idempotent"] = True
            python = (info.entry.get("_meta") or {}).get(META_KEY)
            if isinstance(python, Mapping):  # module, qualified name, distribution, version
                pinned_tools[tool]["python"] = dict(python)
            operation = (info.entry.get("_meta") or {}).get(OPENAPI_META_KEY)
            if isinstance(operation, Mapping):  # the operation's method and path template
                pinned_tools[tool]["openapi"] = dict(operation)
        observed[probe.dependency] = {
            "identity": probe.identity,
            "server": probe.server,
            "tools": pinned_tools,
        }
    return diagnostics, observed


def _registered_name(registered: RegisteredSource | None) -> str | None:
    return None if registered is None else registered.name


def retry_table_diagnostics(
    sites: Sequence[CallSite], dependency: str, info: ToolInfo, declared: bool
) -> list[Diagnostic]:
    """A ``retry.on`` kind the retry table refuses for this tool, placed at its node."""
    if info.repeatable or declared:
        return []
    return [
        error(
            RETRY_NOT_ALLOWED,
            f"{site.place}.retry.on: {kind} is retried only for a tool annotated read-only "
            f"or idempotent, and {dependency}.{info.name} is neither",
            f"remove {kind} from retry.on (route it with on_error instead), or, if calling "
            f"the tool twice is harmless, declare it: sources.{dependency}.idempotent: "
            f"[{info.name}]",
            place=f"{dependency}.{info.name}",
            dependency=dependency,
            tool=info.name,
        )
        for site in sites
        if site.dependency == dependency and site.tool == info.name
        for kind in site.retry_on
        if kind in NEEDS_REPEATABLE
    ]


def _tool_missing(probe: _Probe, tool: str) -> Diagnostic:
    names = ", ".join(sorted(probe.tools or {})[:20]) or "none"
    return error(
        TOOL_MISSING,
        f"the source of {probe.dependency!r} does not list tool {tool!r} (it lists: {names})",
        "bind a source that has the tool, or bring the tool back",
        place=f"{probe.dependency}.{tool}",
        dependency=probe.dependency,
        tool=tool,
        source=_registered_name(probe.registered),
    )


async def check_pinned(
    pin_sources: Mapping[str, Mapping[str, Any]],
    bindings: Mapping[str, SourceBinding],
    drift: str,
    sites: Sequence[CallSite],
    environment: SourceEnvironment,
    *,
    seconds: float = DEFAULT_CHECK_TIMEOUT,
    pool: SourcePool | None = None,
) -> list[Diagnostic]:
    """Revalidate a pin's sources: ``bindings`` are the *pinned* revision's. With
    ``pool`` (the resumed segment's), the sessions it opens stay open in it, so the
    segment's tool calls reach the very servers that were checked."""
    diagnostics: list[Diagnostic] = []
    prepared = await asyncio.gather(
        *(
            environment.prepare_pinned(
                dependency, pin_sources[dependency], bindings.get(dependency)
            )
            for dependency in sorted(pin_sources)
        )
    )
    probes = await asyncio.gather(*(_observe(p, seconds, pool) for p in prepared))
    for probe in probes:
        diagnostics += probe.diagnostics
        if probe.tools is None:
            continue
        pinned = pin_sources[probe.dependency]
        server = pinned.get("server") or {}
        now = probe.server or {}
        if (server.get("name"), server.get("version")) != (now.get("name"), now.get("version")):
            diagnostics.append(
                warning(
                    SERVER_CHANGED,
                    f"the source of {probe.dependency!r} was {server.get('name')} "
                    f"{server.get('version')} when the run started; now it is "
                    f"{now.get('name')} {now.get('version')}",
                    place=probe.dependency,
                    dependency=probe.dependency,
                    source=_registered_name(probe.registered),
                )
            )
        elif server.get("document") != now.get("document"):
            diagnostics.append(
                warning(
                    SERVER_CHANGED,
                    f"the document of {probe.dependency!r} changed since the run started "
                    f"({server.get('document')} then, {now.get('document')} now); each tool "
                    "the run calls is checked below",
                )
            )
        for tool, prints in sorted(pinned["tools"].items()):
            info = probe.tools.get(tool)
            if info is None:
                diagnostics.append(_tool_missing(probe, tool))
            elif info.contract_fingerprint != prints["contract"]:
                diagnostics.append(_drift(probe, info, drift, sites))
            elif info.full_fingerprint != prints["full"]:
                diagnostics.append(
                    warning(
                        DESCRIPTION_CHANGED,
                        f"{probe.dependency}.{tool}: its descriptions or annotations changed "
                        "since the run started (its contract did not)",
                        place=f"{probe.dependency}.{tool}",
                        dependency=probe.dependency,
                        tool=tool,
                        source=_registered_name(probe.registered),
                    )
                )
    return diagnostics


def _drift(probe: _Probe, info: ToolInfo, policy: str, sites: Sequence[CallSite]) -> Diagnostic:
    dependency = probe.dependency
    place = f"{dependency}.{info.name}"
    where: dict[str, str | None] = {
        "dependency": dependency,
        "tool": info.name,
        "source": _registered_name(probe.registered),
    }
    what = (
        f"{dependency}.{info.name}: its contract (input or output schema) changed since "
        "the run started"
    )
    if policy == "warn":
        return warning(SCHEMA_DRIFT, what + " (drift policy warn)", "", place=place, **where)
    if policy == "compatible":
        problems = incompatible_calls(sites, info)
        if not problems:
            return warning(
                SCHEMA_DRIFT,
                what + "; every call site's arguments still validate (compatible)",
                "",
                place=place,
                **where,
            )
        return error(
            SCHEMA_DRIFT,
            what + "; a call site no longer validates: " + "; ".join(problems[:3]),
            "restore the tool's previous contract, or start a new run of a fixed artifact",
            place=place,
            **where,
        )
    return error(
        SCHEMA_DRIFT,
        what + " (drift policy block)",
        "restore the tool's previous contract, or start a new run; a deployment with "
        "drift: compatible accepts changes its call sites still validate against",
        place=place,
        **where,
    )
