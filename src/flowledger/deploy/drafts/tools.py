"""`DraftTools`: the draft tools of one session, transport neutral (JSON arguments in, a
JSON result out, `flowledger.tools.ToolError` on any failure), like `DeployTools`.

| tool | mutating | arguments |
| --- | --- | --- |
| ``draft_create`` | yes | ``name``, ``from?`` (``{source, tool}`` or ``{artifact, version}``) |
| ``draft_get`` | no | ``draft`` |
| ``draft_list`` | no | ``query?``, ``limit?``, ``cursor?`` |
| ``draft_delete`` | yes | ``draft``, ``revision?`` |
| ``draft_patch`` | yes | ``draft``, ``revision``, ``operations`` (RFC 6902) |
| ``draft_add_tool`` | yes | ``draft``, ``revision``, ``source``, ``tool``, ``node?``, |
| | | ``dependency?``, ``after?``, ``next?``, ``assign?`` |
| ``draft_connect`` | yes | ``draft``, ``revision``, ``from``, ``to``, ``when?`` |
| ``draft_set_output`` | yes | ``draft``, ``revision``, ``output``, ``node?``, ``outcome?``, |
| | | ``output_schema?`` |
| ``draft_validate`` | no | ``draft``, ``bindings?`` |
| ``draft_publish`` | yes | ``draft``, ``revision``, ``version``, ``deploy?``, |
| | | ``deployment?``, ``bindings?`` |
| ``explain`` | no | ``code`` |

Every edit answers the draft (revision, document, valid, diagnostics, ...) and the focused
edits also the patch they applied (``applied``). An edit that leaves the document invalid
is kept, with its diagnostics. A failure is a `ToolError` whose message starts with the
error's code in brackets (``[revision_conflict] ...``), so a model can ``explain`` it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...tools.table import TableTools
from ...workflows.authoring.metadata import VERSION_PATTERN
from ..artifacts.errors import ArtifactError
from ..deployments.tools import PAGING as _PAGING
from ..sources.errors import SourceError
from .errors import DraftError
from .explain import explain
from .service import DraftService

__all__ = ["DRAFT_TOOL_NAMES", "DraftTools"]

_DRAFT: Final = {"type": "string", "description": "The draft's name (^[a-z][a-z0-9_]{2,63}$)."}
_REVISION: Final = {
    "type": "integer",
    "minimum": 1,
    "description": "The draft's current revision (from the last answer); a stale one is "
    "refused with revision_conflict and nothing applied.",
}
_ID: Final = {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,63}$"}
_BINDINGS: Final = {
    "type": "object",
    "additionalProperties": {"type": "string"},
    "description": "dependency -> registered source name (adds to or overrides the draft's).",
}


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_TOOLS: Final[dict[str, tuple[str, dict[str, Any], bool]]] = {
    "draft_create": (
        "Create a draft artifact in this session: from nothing (a minimal valid workflow), "
        "from a capability {source, tool} (a one-node workflow calling it, its input "
        "schema as the workflow's input), or from a saved artifact {artifact, version}.",
        _schema(
            {
                "name": _DRAFT,
                "from": {
                    "oneOf": [
                        _schema(
                            {"source": {"type": "string"}, "tool": {"type": "string"}},
                            ("source", "tool"),
                        ),
                        _schema(
                            {"artifact": {"type": "string"}, "version": {"type": "string"}},
                            ("artifact", "version"),
                        ),
                    ]
                },
            },
            ("name",),
        ),
        True,
    ),
    "draft_get": (
        "A draft: revision, document, valid, diagnostics (each with place, JSON pointer, "
        "code, message, hint and next actions), bindings.",
        _schema({"draft": _DRAFT}, ("draft",)),
        False,
    ),
    "draft_list": (
        "The session's drafts, a page at a time by name: name, revision, valid, issues; "
        "`next` continues (null on the last page).",
        _schema(dict(_PAGING)),
        False,
    ),
    "draft_delete": (
        "Delete a draft (at revision, when given).",
        _schema({"draft": _DRAFT, "revision": _REVISION}, ("draft",)),
        True,
    ),
    "draft_patch": (
        "Apply an RFC 6902 JSON Patch to the draft's document at its current revision, "
        "all or nothing. The result may be invalid: it is kept with its diagnostics.",
        _schema(
            {
                "draft": _DRAFT,
                "revision": _REVISION,
                "operations": {
                    "type": "array",
                    "items": {"type": "object"},
                    "description": "RFC 6902 operations: {op, path, value?, from?}.",
                },
            },
            ("draft", "revision", "operations"),
        ),
        True,
    ),
    "draft_add_tool": (
        "Add a tool step calling a capability (a tool of a registered source): arguments "
        "pre-mapped from same-named state fields (else input properties), the dependency "
        "declared, inserted after `after` (or at the start). Answers the patch applied.",
        _schema(
            {
                "draft": _DRAFT,
                "revision": _REVISION,
                "source": {"type": "string"},
                "tool": {"type": "string"},
                "node": _ID,
                "dependency": _ID,
                "after": _ID,
                "next": _ID,
                "assign": {"type": "object"},
            },
            ("draft", "revision", "source", "tool"),
        ),
        True,
    ),
    "draft_connect": (
        "Route node `from` to node `to`: its next; for a switch a case (with `when`, a "
        "${ ... } condition) or its default; for a parallel a branch. Answers the patch.",
        _schema(
            {
                "draft": _DRAFT,
                "revision": _REVISION,
                "from": _ID,
                "to": _ID,
                "when": {"type": "string"},
            },
            ("draft", "revision", "from", "to"),
        ),
        True,
    ),
    "draft_set_output": (
        "Set the workflow's output: an end node's output template (the only end node "
        "unless `node`), optionally its outcome and the output_schema. Answers the patch.",
        _schema(
            {
                "draft": _DRAFT,
                "revision": _REVISION,
                "output": {"type": ["object", "string"]},
                "node": _ID,
                "outcome": _ID,
                "output_schema": {"type": "object"},
            },
            ("draft", "revision", "output"),
        ),
        True,
    ),
    "draft_validate": (
        "Check a draft now: as an artifact and against the catalog (each tool listed by its "
        "bound source's last probe, literal arguments against the tool's input schema, "
        "traced argument types, result.structured paths against its output schema, "
        "contracts changed since the last edit); every diagnostic has next actions. "
        "Writes nothing.",
        _schema({"draft": _DRAFT, "bindings": _BINDINGS}, ("draft",)),
        False,
    ),
    "draft_publish": (
        "Save the draft (at revision) as the immutable artifact version `version`; with "
        "deploy, also a live deployment binding each dependency to its registered source. "
        "Refused, nothing saved, unless it passes the checks against the catalog now; "
        "answers the contract fingerprints it checked.",
        _schema(
            {
                "draft": _DRAFT,
                "revision": _REVISION,
                "version": {"type": "string", "pattern": f"^{VERSION_PATTERN.pattern}$"},
                "deploy": {"type": "boolean"},
                "deployment": {"type": "string"},
                "bindings": _BINDINGS,
            },
            ("draft", "revision", "version"),
        ),
        True,
    ),
    "explain": (
        "What a diagnostic or error code means: its cause, how to fix it, and an example.",
        _schema({"code": {"type": "string", "maxLength": 64}}, ("code",)),
        False,
    ),
}
DRAFT_TOOL_NAMES: Final = tuple(_TOOLS)

_EXPECTED: Final = (DraftError, ArtifactError, SourceError, LookupError, ValueError)


async def _explain(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return explain(arguments["code"])


class DraftTools(TableTools):
    """The tools of one `DraftService`."""

    table = _TOOLS
    expected = _EXPECTED

    def __init__(self, service: DraftService) -> None:
        self.service = service
        s = service
        self.handlers = {
            "draft_create": lambda a: s.create(a["name"], a.get("from")),
            "draft_get": lambda a: s.get(a["draft"]),
            "draft_list": lambda a: s.list(
                query=a.get("query"), limit=a.get("limit"), cursor=a.get("cursor")
            ),
            "draft_delete": lambda a: s.delete(a["draft"], a.get("revision")),
            "draft_patch": lambda a: s.patch(a["draft"], a["revision"], a["operations"]),
            "draft_add_tool": lambda a: s.add_tool(
                a["draft"],
                a["revision"],
                a["source"],
                a["tool"],
                node=a.get("node"),
                dependency=a.get("dependency"),
                after=a.get("after"),
                next=a.get("next"),
                assign=a.get("assign"),
            ),
            "draft_connect": lambda a: s.connect(
                a["draft"], a["revision"], a["from"], a["to"], a.get("when")
            ),
            "draft_set_output": lambda a: s.set_output(
                a["draft"],
                a["revision"],
                a["output"],
                node=a.get("node"),
                outcome=a.get("outcome"),
                output_schema=a.get("output_schema"),
            ),
            "draft_validate": lambda a: s.validate(a["draft"], a.get("bindings")),
            "draft_publish": lambda a: s.publish(
                a["draft"],
                a["revision"],
                a["version"],
                deploy=a.get("deploy", False),
                deployment=a.get("deployment"),
                bindings=a.get("bindings"),
            ),
            "explain": _explain,
        }
