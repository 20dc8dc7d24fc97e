"""The elicitation form for a run's request pause: what `flowledger.mcp.elicit` (a tool
call's multi round-trip) and `flowledger.mcp.tasks` (a task's ``inputRequests``) ask.

The message is the pause's question - the interrupt info's ``question`` text, else the
info as compact JSON - cut at `MAX_QUESTION` characters, after the error of a previous
answer if there was one. The schema is the resume schema when it is a flat object of
primitives (`form_schema`); there is no form otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["MAX_QUESTION", "declares_forms", "form_schema", "pause_form"]

#: The longest question (characters) a form shows; longer ones are cut and marked.
MAX_QUESTION: Final = 1000
_PRIMITIVES: Final = frozenset({"string", "number", "integer", "boolean"})
_KEPT: Final = frozenset(
    {
        "type",
        "title",
        "description",
        "enum",
        "enumNames",
        "default",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "format",
    }
)
_FORMATS: Final = frozenset({"email", "uri", "date", "date-time"})


def form_schema(resume_schema: object) -> dict[str, Any] | None:
    """The elicitation form for ``resume_schema``, or ``None`` if it is not a flat object
    of primitives (string, number, integer, boolean, string enums)."""
    if not isinstance(resume_schema, Mapping) or resume_schema.get("type") != "object":
        return None
    properties = resume_schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return None
    form: dict[str, Any] = {}
    for name, spec in properties.items():
        if not isinstance(name, str) or not isinstance(spec, Mapping):
            return None
        if set(spec) - _KEPT:
            return None  # a keyword the form cannot express: the answer would not match
        kind = spec.get("type")
        if kind not in _PRIMITIVES:
            return None
        if "enum" in spec and (
            kind != "string" or not all(isinstance(v, str) for v in spec["enum"])
        ):
            return None
        if "format" in spec and spec["format"] not in _FORMATS:
            return None
        form[name] = dict(spec)
    required = resume_schema.get("required", [])
    if not isinstance(required, list) or not all(r in form for r in required):
        return None
    schema: dict[str, Any] = {"type": "object", "properties": form}
    if required:
        schema["required"] = list(required)
    return schema


def _question(info: object) -> str:
    if isinstance(info, Mapping) and isinstance(info.get("question"), str):
        text: str = info["question"]
    else:
        text = json.dumps(info, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= MAX_QUESTION else text[:MAX_QUESTION] + "..."


def pause_form(run: Mapping[str, Any], error: str = "") -> types.ElicitRequest | None:
    """The form for ``run`` (a ``workflow_run_get`` answer) stopped at a request pause,
    or ``None`` (not paused, an error pause, a resume schema no form can express)."""
    pending = run.get("pending") if run.get("run_status") == "interrupted" else None
    if not isinstance(pending, Mapping) or pending.get("kind") != "request":
        return None
    schema = form_schema(pending.get("resume_schema"))
    if schema is None:
        return None
    question = _question(pending.get("info"))
    message = f"{error}\n\n{question}" if error else question
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


def declares_forms(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request is a 2026-07-28 one whose client declares form elicitation
    (an empty elicitation capability means form mode)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)
