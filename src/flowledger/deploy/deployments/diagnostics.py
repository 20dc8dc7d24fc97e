"""The deploy layer's dependency diagnostics: stable codes with repair hints.

They are `flowledger.workflows.Diagnostic` values, so a pinned run's readiness and a
refused start speak the same language as the bridge's own ``graph_changed``. Errors
block (a start is ``unrunnable``, a resume ``blocked``); warnings are reported and do not.

* ``deployment_missing``: no such deployment (or revision);
* ``artifact_missing``, ``child_missing``: the artifact the deployment names, or a child
  of its closure, is not saved;
* ``binding_missing``: a dependency of the artifact has no source in the deployment;
* ``credential_missing``: a secret's environment variable is not set in this process;
* ``source_unreachable``: the source did not start, answer or list its tools;
* ``tool_missing``: the source does not list a tool the artifact calls;
* ``tool_not_allowed``: ``allow_tools`` leaves out a tool the artifact calls;
* ``arguments_incompatible``: a call site's literal arguments cannot validate against
  the tool's input schema;
* ``retry_not_allowed``: a tool node retries ``timeout``, ``invalid_result`` or
  ``outcome_unknown`` of a tool that is neither annotated read-only or idempotent nor
  declared ``idempotent`` by the deployment (the retry table, docs/deploy.md);
* ``schema_drift``: a pinned tool's contract changed (error or warning: the drift
  policy decides);
* ``description_changed`` (warning): only a pinned tool's descriptions or annotations
  changed;
* ``server_changed`` (warning): the server reports another name or version than at the
  pin;
* ``pin_missing``: the run has no pinned environment (not started by ``run_deployment``);
* ``source_missing``: a registered source the deployment or the pin names is not
  registered, or not visible to the session;
* ``source_disabled``: the operator disabled that source;
* ``inline_source_refused``: a tenant's deployment or pinned run names a command line or
  URL instead of a registered source;
* ``checked_against_probe`` (warning): a read-only server compared the pin with the
  registry's last probe instead of contacting the source;
* ``not_revalidated`` (warning): a read-only server could not check the source at all.

Each names its ``place`` (the dependency, or ``dependency.tool`` for a tool's problem)
and carries what is known of it (dependency, tool, registered source, deployment, run),
from which its JSON answers concrete ``next_actions`` (`guidance.next_actions`).
"""

from __future__ import annotations

from typing import Final

from ...workflows.authoring.readiness import Diagnostic

__all__ = [
    "ARGUMENTS_INCOMPATIBLE",
    "ARTIFACT_MISSING",
    "BINDING_MISSING",
    "CHECKED_AGAINST_PROBE",
    "CHILD_MISSING",
    "CREDENTIAL_MISSING",
    "DEPLOYMENT_MISSING",
    "DESCRIPTION_CHANGED",
    "INLINE_SOURCE_REFUSED",
    "NOT_REVALIDATED",
    "PIN_MISSING",
    "RETRY_NOT_ALLOWED",
    "SCHEMA_DRIFT",
    "SERVER_CHANGED",
    "SOURCE_DISABLED",
    "SOURCE_MISSING",
    "SOURCE_UNREACHABLE",
    "TOOL_MISSING",
    "TOOL_NOT_ALLOWED",
    "Diagnostic",
    "error",
    "warning",
]

DEPLOYMENT_MISSING: Final = "deployment_missing"
ARTIFACT_MISSING: Final = "artifact_missing"
CHILD_MISSING: Final = "child_missing"
BINDING_MISSING: Final = "binding_missing"
CREDENTIAL_MISSING: Final = "credential_missing"
SOURCE_UNREACHABLE: Final = "source_unreachable"
TOOL_MISSING: Final = "tool_missing"
TOOL_NOT_ALLOWED: Final = "tool_not_allowed"
ARGUMENTS_INCOMPATIBLE: Final = "arguments_incompatible"
SCHEMA_DRIFT: Final = "schema_drift"
DESCRIPTION_CHANGED: Final = "description_changed"
SERVER_CHANGED: Final = "server_changed"
PIN_MISSING: Final = "pin_missing"
RETRY_NOT_ALLOWED: Final = "retry_not_allowed"
SOURCE_MISSING: Final = "source_missing"
SOURCE_DISABLED: Final = "source_disabled"
INLINE_SOURCE_REFUSED: Final = "inline_source_refused"
CHECKED_AGAINST_PROBE: Final = "checked_against_probe"
NOT_REVALIDATED: Final = "not_revalidated"


def _context(known: dict[str, str | None]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((key, value) for key, value in known.items() if value))


def error(
    code: str, message: str, hint: str, *, place: str = "", **context: str | None
) -> Diagnostic:
    """An error about ``place`` (the dependency, or ``dependency.tool``); ``context``:
    what is known of it for its next actions (`guidance.CONTEXT_KEYS`)."""
    return Diagnostic(code, message, hint, "error", place, _context(context))


def warning(
    code: str, message: str, hint: str = "", *, place: str = "", **context: str | None
) -> Diagnostic:
    """A warning, like `error`."""
    return Diagnostic(code, message, hint, "warning", place, _context(context))
