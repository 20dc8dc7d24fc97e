"""`DeployTools`: the deployed-run tools of one session, transport neutral (JSON
arguments in, a JSON result out, `flowledger.tools.ToolError` on any failure), like the
``workflow_*`` bundle; `combined` serves both through one bundle (the MCP server).

| tool | mutating | arguments |
| --- | --- | --- |
| ``run_deployment`` | yes | ``deployment``, ``input``, ``wait_seconds?``, ``revision?`` |
| ``resume_run`` | yes | ``run_id``, ``payload?``, ``wait_seconds?`` |
| ``inspect_run`` | no | ``run_id``, ``revalidate?`` (default true) |
| ``validate_run`` | no | ``run_id`` |
| ``read_run_trace`` | no | ``run_id``, ``start?``, ``limit?`` |
| ``artifact_save`` | yes | ``document`` (an artifact: an object, or YAML/JSON text) |
| ``artifact_validate`` | no | ``document`` (an object, or YAML/JSON text) |
| ``artifact_list`` | no | ``query?``, ``limit?``, ``cursor?`` |
| ``artifact_show`` | no | ``name``, ``version`` |
| ``artifact_delete`` | yes | ``name``, ``version`` |
| ``source_probe`` | yes (below) | ``source`` (registered), or ``stdio``/``http``; ``timeout?`` |
| ``deployment_save`` | yes | ``document`` (an object, or YAML/JSON text) |
| ``deployment_list`` | no | ``query?``, ``limit?``, ``cursor?`` |
| ``deployment_show`` | no | ``name``, ``revision?`` |
| ``deployment_check`` | no | ``name``, ``revision?`` |
| ``deployment_rollback`` | yes | ``name``, ``live``, ``revision?`` |
| ``deployment_delete`` | yes | ``name`` |

``source_probe`` starts (or contacts) a source and records its probe in the registry:
it counts as mutating, and a read-only server hides it. Inline specs (``stdio``,
``http``) are the operator's: a tenant's are refused (`InlineSourceRefusedError`).

``deployment_check`` connects to the deployment's sources as ``run_deployment`` would
(on a read-only server it answers from the registry's last probes) and writes nothing,
so it is a reading tool. Deleting and rolling back are mutating: a read-only server
hides them. A failure with a code reads ``<tool>: [<code>] <message>``.

Results are `DeployService`'s. Arguments are checked against each tool's JSON Schema
first (unknown fields refused), naming the field.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from ...tools import ToolError, ToolInfo
from ...tools.table import TableTools
from ...workflows.errors import NotFoundError
from ..artifacts.errors import ArtifactError, ArtifactValidationError
from ..artifacts.schema import artifact_json_schema, document_input_schema
from ..listing import MAX_CURSOR, MAX_PAGE, MAX_QUERY
from ..runs.trace import MAX_TRACE_PAGE
from ..sources.errors import SourceError
from .document import CredentialMissingError
from .lifecycle import DeploymentInUseError
from .schema import deployment_json_schema
from .service import MAX_WAIT_SECONDS, DeployService, NotADeployedRunError
from .store import (
    DeploymentConflictError,
    DeploymentCorruptError,
    DeploymentNotFoundError,
)

__all__ = ["DEPLOY_TOOL_NAMES", "PAGING", "Bundle", "DeployTools", "combined"]

_RUN_ID: Final = {"type": "string", "description": "A run id (UUID)."}
_WAIT: Final = {
    "type": "number",
    "minimum": 0,
    "maximum": MAX_WAIT_SECONDS,
    "description": "How long to wait for the run to stop (default 30 s).",
}


#: the ``query``, ``limit`` and ``cursor`` arguments of every list tool
PAGING: Final = {
    "query": {
        "type": "string",
        "maxLength": MAX_QUERY,
        "description": "Only names containing this text (a prefix works too).",
    },
    "limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_PAGE,
        "description": "At most this many per page (default 50).",
    },
    "cursor": {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_CURSOR,
        "description": "The `next` of the previous page (names in byte order).",
    },
}
_NAME: Final = {"type": "string", "description": "A deployment's name."}


def _schema(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


# The documents' own schemas, typed for a model (see `document_input_schema`).
_ARTIFACT_DOCUMENT: Final = document_input_schema(
    artifact_json_schema(), "flowledger://schemas/artifact"
)

_TOOLS: Final[dict[str, tuple[str, dict[str, Any], bool]]] = {
    "run_deployment": (
        "Validate a deployment's environment (sources, secrets, tools), pin it and start "
        "a run. Answers status unrunnable with diagnostics (nothing written) or the run.",
        _schema(
            {
                "deployment": {"type": "string"},
                "input": {"type": "object"},
                "wait_seconds": _WAIT,
                "revision": {"type": "integer", "minimum": 1},
            },
            ["deployment", "input"],
        ),
        True,
    ),
    "resume_run": (
        "Resume an interrupted deployed run after revalidating its pinned environment; "
        "a blocked run is answered as it is (resumed: false) with the diagnostics.",
        _schema(
            {"run_id": _RUN_ID, "payload": {"type": "object"}, "wait_seconds": _WAIT}, ["run_id"]
        ),
        True,
    ),
    "inspect_run": (
        "A deployed run: status, resume readiness (revalidated unless revalidate is "
        "false), outcome and output, interrupt, error, trace count.",
        _schema({"run_id": _RUN_ID, "revalidate": {"type": "boolean"}}, ["run_id"]),
        False,
    ),
    "validate_run": (
        "Revalidate a deployed run's pinned environment now (sources, secrets, tool "
        "contracts): its status and resume readiness with the diagnostics.",
        _schema({"run_id": _RUN_ID}, ["run_id"]),
        False,
    ),
    "read_run_trace": (
        "A range of a deployed run's trace: what each node did. Answers {run_id, start, "
        "total, entries}; an entry's seq is its position from 0 (like start), so the next "
        "range starts at the last seq + 1.",
        _schema(
            {
                "run_id": _RUN_ID,
                "start": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_TRACE_PAGE},
            },
            ["run_id"],
        ),
        False,
    ),
    "artifact_save": (
        "Save a flowledger.artifact/v1 document (its children must be saved first). "
        "Artifacts are immutable: the same bytes again is a no-op, others a conflict.",
        _ARTIFACT_DOCUMENT,
        True,
    ),
    "artifact_validate": (
        "Validate a flowledger.artifact/v1 document without saving it: valid with its "
        "digest, or every problem with its place, code, message and repair hint.",
        _ARTIFACT_DOCUMENT,
        False,
    ),
    "artifact_list": (
        "The session's saved artifacts, a page at a time by name: each name with its "
        "versions and digests; `next` continues (null on the last page).",
        _schema(dict(PAGING)),
        False,
    ),
    "artifact_show": (
        "One saved artifact version: its document (canonical JSON), digest, closure "
        "digest and children.",
        _schema({"name": {"type": "string"}, "version": {"type": "string"}}, ["name", "version"]),
        False,
    ),
    "artifact_delete": (
        "Delete a saved artifact version. Refused (artifact_in_use, naming them) while a "
        "parent artifact pins it as a child or any revision of a deployment runs it; a "
        "deleted version is never reused.",
        _schema({"name": {"type": "string"}, "version": {"type": "string"}}, ["name", "version"]),
        True,
    ),
    "source_probe": (
        "Connect once to a registered MCP source ({source: NAME}; the probe is recorded "
        "in the registry) and list its tools with input schemas, annotations and "
        "fingerprints (for an artifact's dependencies). Where the operator allows inline "
        "sources, a stdio (command, args, env, cwd) or http (url, headers) spec instead. "
        "Shows variable and header names, never values.",
        _schema(
            {
                "source": {"type": "string"},
                "stdio": {"type": "object"},
                "http": {"type": "object"},
                "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 120},
            }
        ),
        True,
    ),
    "deployment_save": (
        "Save a flowledger.deployment/v1 document as the deployment's next revision and "
        "make it live.",
        document_input_schema(deployment_json_schema(), "flowledger://schemas/deployment"),
        True,
    ),
    "deployment_list": (
        "The deployments, a page at a time by name: each with its live revision and "
        "revision count; `next` continues (null on the last page).",
        _schema(dict(PAGING)),
        False,
    ),
    "deployment_show": (
        "One revision of a deployment (default: the live one).",
        _schema(
            {"name": {"type": "string"}, "revision": {"type": "integer", "minimum": 1}}, ["name"]
        ),
        False,
    ),
}
_TOOLS.update(
    {
        "deployment_check": (
            "Check a deployment's live revision (or `revision`) as run_deployment would "
            "before a start (artifact and children saved, sources reachable, tools "
            "present and allowed, secrets set): runnable or unrunnable with diagnostics. "
            "Starts no run and writes nothing.",
            _schema({"name": _NAME, "revision": {"type": "integer", "minimum": 1}}, ["name"]),
            False,
        ),
        "deployment_rollback": (
            "Make an earlier revision live again (default: the one below the live one). "
            "`live` is the revision you saw live: if another is live now, nothing moves "
            "(deployment_conflict). No revision is written; the next save numbers after "
            "the highest.",
            _schema(
                {
                    "name": _NAME,
                    "live": {"type": "integer", "minimum": 1},
                    "revision": {"type": "integer", "minimum": 1},
                },
                ["name", "live"],
            ),
            True,
        ),
        "deployment_delete": (
            "Delete a deployment and every revision. Refused (deployment_in_use, naming "
            "the runs) while an unfinished run (pending, running, interrupted) uses it.",
            _schema({"name": _NAME}, ["name"]),
            True,
        ),
    }
)
DEPLOY_TOOL_NAMES: Final = tuple(_TOOLS)

_EXPECTED: Final = (
    ArtifactError,
    CredentialMissingError,
    SourceError,
    DeploymentConflictError,
    DeploymentCorruptError,
    DeploymentNotFoundError,
    DeploymentInUseError,
    NotADeployedRunError,
    NotFoundError,
    ValueError,
)


class Bundle(Protocol):
    def infos(self) -> builtins.list[ToolInfo]: ...

    async def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]: ...


class DeployTools(TableTools):
    """The tools of one `DeployService`."""

    table = _TOOLS
    expected = _EXPECTED

    def __init__(self, service: DeployService) -> None:
        self.service = service
        self.handlers = {
            "run_deployment": lambda a: service.run_deployment(
                a["deployment"],
                a["input"],
                wait_seconds=a.get("wait_seconds", 30.0),
                revision=a.get("revision"),
            ),
            "resume_run": lambda a: service.resume_run(
                a["run_id"], a.get("payload"), wait_seconds=a.get("wait_seconds", 30.0)
            ),
            "inspect_run": lambda a: service.inspect_run(
                a["run_id"], revalidate=a.get("revalidate", True)
            ),
            "validate_run": lambda a: service.validate_run(a["run_id"]),
            "read_run_trace": lambda a: service.read_run_trace(
                a["run_id"], start=a.get("start", 0), limit=a.get("limit", 50)
            ),
            "artifact_save": lambda a: service.artifact_save(a["document"]),
            "artifact_validate": lambda a: service.artifact_validate(a["document"]),
            "artifact_list": lambda a: service.artifact_list(
                query=a.get("query"), limit=a.get("limit"), cursor=a.get("cursor")
            ),
            "artifact_delete": lambda a: service.artifact_delete(a["name"], a["version"]),
            "artifact_show": lambda a: service.artifact_show(a["name"], a["version"]),
            "source_probe": lambda a: service.source_probe(
                {k: a[k] for k in ("source", "stdio", "http") if k in a},
                seconds=a.get("timeout", 10.0),
            ),
            "deployment_save": lambda a: service.deployment_save(a["document"]),
            "deployment_list": lambda a: service.deployment_list(
                query=a.get("query"), limit=a.get("limit"), cursor=a.get("cursor")
            ),
            "deployment_show": lambda a: service.deployment_show(a["name"], a.get("revision")),
            "deployment_check": lambda a: service.deployment_check(a["name"], a.get("revision")),
            "deployment_rollback": lambda a: service.deployment_rollback(
                a["name"], a["live"], a.get("revision")
            ),
            "deployment_delete": lambda a: service.deployment_delete(a["name"]),
        }

    def failure(self, name: str, exc: Exception) -> ToolError:
        if isinstance(exc, ArtifactValidationError):
            # The text for people, then every issue with its next actions for programs.
            issues = "; ".join(str(issue) for issue in exc.issues[:10])
            diagnostics = json.dumps(exc.to_json(), ensure_ascii=False, separators=(",", ":"))
            return ToolError(
                f"{name}: {exc.args[0].split(':', 1)[0]}: {issues}\ndiagnostics: {diagnostics}",
                cause=exc,
            )
        if isinstance(
            exc,
            DeploymentInUseError
            | DeploymentConflictError
            | DeploymentNotFoundError
            | DeploymentCorruptError
            | ArtifactError,
        ):
            return super().failure(name, exc)  # "[code] ...": a model can explain it
        return ToolError(f"{name}: {exc}", cause=exc)


class _Combined:
    def __init__(self, bundles: Sequence[Bundle]) -> None:
        self._bundles = list(bundles)

    def infos(self) -> builtins.list[ToolInfo]:
        return [info for bundle in self._bundles for info in bundle.infos()]

    async def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None
    ) -> dict[str, Any]:
        for bundle in self._bundles:
            if any(info.name == name for info in bundle.infos()):
                return await bundle.call(name, arguments)
        raise ToolError(f"unknown tool {name[:64]!r}")


def combined(*bundles: Bundle) -> Bundle:
    """One bundle serving the tools of ``bundles`` (names must not repeat)."""
    names = [info.name for bundle in bundles for info in bundle.infos()]
    if len(names) != len(set(names)):
        raise ValueError("combined tool bundles repeat a tool name")
    return _Combined(bundles)
