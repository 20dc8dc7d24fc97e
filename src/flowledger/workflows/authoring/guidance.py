"""Guidance: the next actions of a diagnostic, as concrete tool calls.

Every diagnostic a user sees (an artifact issue, a draft's diagnostic, a deployment's
readiness or unrunnable answer, a run's resume readiness) carries ``next_actions``: a list
of ``{"tool": NAME, "arguments": {...}}`` a model can call as they are. `next_actions`
answers them from the diagnostic's ``code`` and what is known where it was found
(``context``: the dependency, tool, registered source, deployment, run or draft it
concerns). An action is offered only when every argument it needs is known; the last
action is always ``explain {code}`` (which answers cause, fix and an example for every
code the server emits), followed for a draft's diagnostic by ``draft_get``.

The rules name tools of the MCP server (the ``workflow_*`` bundle, the deploy, draft and
capability tools). They are plain strings, so this module sits in the bridge layer where
the lowest diagnostic type (`readiness.Diagnostic`) can use it, and imports nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["CONTEXT_KEYS", "RULES", "next_actions"]

#: What a diagnostic may know of its place, each a string.
CONTEXT_KEYS: Final = frozenset(
    {"dependency", "tool", "source", "deployment", "run_id", "draft", "artifact", "version"}
)

# A rule: (tool, {argument: context key}). The action is offered when the context has
# every key it maps; its arguments hold only what the context supplied.
_Rule = tuple[str, Mapping[str, str]]


def _call(tool: str, /, **mapped: str) -> _Rule:
    return (tool, mapped)


_INSPECT: Final = _call("capability_inspect", source="source", tool="tool")
_FIND_TOOL: Final = _call("capability_list", query="tool")
_SOURCES: Final = _call("capability_list", source="source")
_ALL_CAPABILITIES: Final = _call("capability_list")
_PROBE: Final = _call("source_probe", source="source")
_SHOW_DEPLOYMENT: Final = _call("deployment_show", name="deployment")
_DEPLOYMENTS: Final = _call("deployment_list")
_CHECK: Final = _call("deployment_check", name="deployment")
_ARTIFACTS: Final = _call("artifact_list")
_SHOW_ARTIFACT: Final = _call("artifact_show", name="artifact", version="version")
_VALIDATE_RUN: Final = _call("validate_run", run_id="run_id")
_INSPECT_RUN: Final = _call("inspect_run", run_id="run_id")
_DEFINITIONS: Final = _call("workflow_definition_list")
_RUN: Final = _call("workflow_run_get", run_id="run_id")

#: code -> the actions that help with it, most useful first (``explain`` is added).
RULES: Final[Mapping[str, tuple[_Rule, ...]]] = {
    # -- the bridge's readiness --------------------------------------------------------
    "graph_changed": (_RUN, _DEFINITIONS),
    "definition_missing": (_RUN, _DEFINITIONS),
    # -- a deployment's environment ----------------------------------------------------
    "deployment_missing": (_DEPLOYMENTS,),
    "artifact_missing": (_ARTIFACTS, _SHOW_DEPLOYMENT),
    "child_missing": (_ARTIFACTS, _SHOW_DEPLOYMENT),
    "binding_missing": (_SHOW_DEPLOYMENT, _call("capability_list", query="dependency"), _CHECK),
    "credential_missing": (_INSPECT, _SHOW_DEPLOYMENT, _CHECK),
    "source_unreachable": (_PROBE, _INSPECT, _SOURCES, _VALIDATE_RUN, _CHECK),
    "tool_missing": (_FIND_TOOL, _SOURCES, _CHECK),
    "tool_not_allowed": (_SHOW_DEPLOYMENT, _INSPECT, _CHECK),
    "arguments_incompatible": (_INSPECT, _SHOW_ARTIFACT, _CHECK),
    "schema_drift": (_INSPECT, _VALIDATE_RUN, _INSPECT_RUN, _CHECK),
    "description_changed": (_INSPECT, _INSPECT_RUN),
    "server_changed": (_SOURCES, _INSPECT_RUN),
    "pin_missing": (_INSPECT_RUN, _DEPLOYMENTS),
    "source_missing": (_ALL_CAPABILITIES, _SHOW_DEPLOYMENT),
    "source_disabled": (_SOURCES, _ALL_CAPABILITIES),
    "inline_source_refused": (_ALL_CAPABILITIES, _SHOW_DEPLOYMENT),
    "checked_against_probe": (_SOURCES,),
    "not_revalidated": (_VALIDATE_RUN,),
    "retry_not_allowed": (_INSPECT, _SHOW_DEPLOYMENT),
    # -- an artifact's references ------------------------------------------------------
    "unknown_tool": (_FIND_TOOL,),
    "unused_tool": (_FIND_TOOL,),
    "unknown_dependency": (_ALL_CAPABILITIES,),
    "unknown_child": (_ARTIFACTS,),
    "child_cycle": (_ARTIFACTS,),
    "artifact_conflict": (_ARTIFACTS, _SHOW_ARTIFACT),
    "artifact_in_use": (_DEPLOYMENTS,),
    # -- a draft's bindings against the registry -----------------------------------------
    "probe_missing": (_PROBE, _SOURCES),
    "capability_missing": (_FIND_TOOL, _SOURCES, _ALL_CAPABILITIES),
    # -- a deployment document ---------------------------------------------------------
    "bad_binding": (_ALL_CAPABILITIES,),
    "bad_source": (_ALL_CAPABILITIES,),
    "duplicate_tool": (_SHOW_ARTIFACT,),
}


def next_actions(code: str, context: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The next actions for ``code`` where ``context`` (keys of `CONTEXT_KEYS`) is known:
    the code's rules whose arguments are all known, then ``explain {code}``, then
    ``draft_get`` when the diagnostic belongs to a draft (to read its current revision
    before patching). Each is a new ``{tool, arguments}``."""
    known = {k: v for k, v in (context or {}).items() if isinstance(v, str) and v}
    actions: list[dict[str, Any]] = []
    for tool, mapped in RULES.get(code, ()):
        if all(key in known for key in mapped.values()):
            arguments = {name: known[key] for name, key in mapped.items()}
            actions.append({"tool": tool, "arguments": arguments})
    actions.append({"tool": "explain", "arguments": {"code": code}})
    if "draft" in known:
        actions.append({"tool": "draft_get", "arguments": {"draft": known["draft"]}})
    return actions
