"""A draft as stored: `Draft`, and its JSON encoding (strictly decoded).

One KV value per draft (``sessions/<sid>/deploy/drafts/<name>``)::

    {"draft": 1, "name", "revision", "document", "valid", "digest", "diagnostics",
     "truncated", "bindings", "origin", "capabilities", "created_at", "updated_at"}

``revision`` counts the draft's edits: 1 when created, +1 per applied edit, contiguous.
``document`` is any JSON data (possibly not a valid artifact); ``diagnostics`` are its
last validation's (`flowledger.deploy.drafts.diagnostics`). ``bindings`` maps a
dependency to the registered source it came from (a capability), for publishing with a
deployment. ``origin`` says what the draft started from. ``capabilities`` are the tools
the last edit's checks against the catalog found, each ``{dependency, source,
probe_revision, tool, contract_fingerprint}`` (`flowledger.deploy.drafts.contracts`);
publishing compares them with the probes of the moment. (A record written before
capabilities were recorded has none.)

A deleted draft leaves a tombstone, ``{"draft": 1, "name", "deleted": true}``, so the
key's KV revisions keep growing across a delete and a new draft of the same name: an edit
read from the deleted draft can never land on the new one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from flowledger.workflows.authoring.metadata import NAME_PATTERN

from .errors import DraftCorruptError

__all__ = [
    "RECORD_VERSION",
    "Draft",
    "decode_draft",
    "encode_draft",
    "encode_tombstone",
    "timestamp",
]

RECORD_VERSION: Final = 1
_FIELDS: Final = frozenset(
    {
        "draft",
        "name",
        "revision",
        "document",
        "valid",
        "digest",
        "diagnostics",
        "truncated",
        "bindings",
        "origin",
        "capabilities",
        "created_at",
        "updated_at",
    }
)
_CAPABILITY_FIELDS: Final = frozenset(
    {"dependency", "source", "probe_revision", "tool", "contract_fingerprint"}
)
_DIAGNOSTIC_FIELDS: Final = frozenset(
    {"place", "pointer", "code", "message", "hint", "next_actions"}
)


def timestamp() -> str:
    moment = datetime.now(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}Z"


@dataclass(frozen=True, slots=True)
class Draft:
    name: str
    revision: int
    document: Any
    valid: bool
    digest: str | None
    diagnostics: tuple[dict[str, Any], ...]
    truncated: bool
    bindings: dict[str, str] = field(default_factory=dict)
    origin: dict[str, Any] = field(default_factory=dict)
    capabilities: tuple[dict[str, Any], ...] = ()
    created_at: str = ""
    updated_at: str = ""

    def to_json(self, *, document: bool = True) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "draft": self.name,
            "revision": self.revision,
            "valid": self.valid,
            "digest": self.digest,
            "diagnostics": list(self.diagnostics),
            "truncated": self.truncated,
            "bindings": dict(self.bindings),
            "origin": dict(self.origin),
            "capabilities": [dict(item) for item in self.capabilities],
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }
        if document:
            shown["document"] = self.document
        return shown

    def summary(self) -> dict[str, Any]:
        return {
            "draft": self.name,
            "revision": self.revision,
            "valid": self.valid,
            "issues": len(self.diagnostics),
            "updated_at": self.updated_at,
        }


def encode_draft(draft: Draft) -> bytes:
    return json.dumps(
        {
            "draft": RECORD_VERSION,
            "name": draft.name,
            "revision": draft.revision,
            "document": draft.document,
            "valid": draft.valid,
            "digest": draft.digest,
            "diagnostics": list(draft.diagnostics),
            "truncated": draft.truncated,
            "bindings": draft.bindings,
            "origin": draft.origin,
            "capabilities": list(draft.capabilities),
            "created_at": draft.created_at,
            "updated_at": draft.updated_at,
        },
        ensure_ascii=False,
        separators=(",", ":"),
        allow_nan=False,
    ).encode()


def encode_tombstone(name: str) -> bytes:
    return json.dumps({"draft": RECORD_VERSION, "name": name, "deleted": True}).encode()


def decode_draft(key: str, raw: bytes, name: str) -> Draft | None:
    """The draft stored under ``key`` (``None``: a tombstone); `DraftCorruptError` for
    anything unexpected."""

    def bad(reason: str) -> DraftCorruptError:
        return DraftCorruptError(key, reason)

    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise bad("not JSON") from None
    if body == {"draft": RECORD_VERSION, "name": name, "deleted": True}:
        return None
    if not isinstance(body, dict) or set(body) | {"capabilities"} != _FIELDS:
        raise bad("unexpected fields")
    if body["draft"] != RECORD_VERSION:
        raise bad("unsupported record version")
    if body["name"] != name or not NAME_PATTERN.fullmatch(name):
        raise bad("the record names another draft")
    revision = body["revision"]
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
        raise bad("malformed revision")
    valid, digest = body["valid"], body["digest"]
    if not isinstance(valid, bool) or not (
        (valid and isinstance(digest, str) and len(digest) == 64) or (not valid and digest is None)
    ):
        raise bad("malformed validity")
    diagnostics = body["diagnostics"]
    if not isinstance(diagnostics, list) or any(
        not isinstance(item, dict)
        or set(item) != _DIAGNOSTIC_FIELDS
        or not isinstance(item["code"], str)
        for item in diagnostics
    ):
        raise bad("malformed diagnostics")
    if valid == bool(diagnostics):
        raise bad("validity and diagnostics disagree")
    bindings, origin = body["bindings"], body["origin"]
    if not isinstance(bindings, dict) or any(
        not isinstance(k, str) or not isinstance(v, str) for k, v in bindings.items()
    ):
        raise bad("malformed bindings")
    if not isinstance(origin, dict) or not isinstance(body["truncated"], bool):
        raise bad("malformed origin")
    capabilities = body.get("capabilities", [])
    if not isinstance(capabilities, list) or any(
        not isinstance(item, dict)
        or set(item) != _CAPABILITY_FIELDS
        or not all(isinstance(item[k], str) for k in _CAPABILITY_FIELDS - {"probe_revision"})
        or not isinstance(item["probe_revision"], int)
        for item in capabilities
    ):
        raise bad("malformed capabilities")
    for moment in ("created_at", "updated_at"):
        try:
            datetime.strptime(body[moment], "%Y-%m-%dT%H:%M:%S.%fZ")
        except (TypeError, ValueError):
            raise bad(f"malformed {moment}") from None
    return Draft(
        name,
        revision,
        body["document"],
        valid,
        digest,
        tuple(diagnostics),
        body["truncated"],
        bindings,
        origin,
        tuple(capabilities),
        body["created_at"],
        body["updated_at"],
    )
