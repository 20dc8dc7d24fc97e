"""Tool fingerprints: what a tool promises (contract) and everything it says (full).

Both are ``sha256:<64 hex digits>`` over RFC 8785 canonical JSON of a tool's listing
entry as the server sent it (camelCase wire names):

- The **contract fingerprint** covers ``{"name", "inputSchema", "outputSchema"}`` (a
  missing output schema is ``null``) with the JSON Schema *annotation* keywords
  ``description``, ``title`` and ``examples`` removed wherever they are keywords of a
  schema. It changes when what may be sent or returned changes, not when prose does.
  Some servers write host settings into descriptions (mcp-server-time puts the local
  time zone there), so prose must not count as a contract change.
- The **full fingerprint** covers the whole entry: descriptions, titles, annotations,
  icons, ``_meta``. A tool whose words or hints changed silently is visible.

"Where they are keywords" is decided by walking the schema along the keywords whose
values are schemas (``properties``, ``items``, ``anyOf``, ``$defs``, ...). Anything
else is data and stays byte for byte: a *property named* ``title`` in ``properties``,
``"title"`` in ``required``, objects inside ``default``, ``const``, ``enum`` and unknown
keywords. The walk is bounded (`MAX_SCHEMA_DEPTH`) so a hostile listing cannot exhaust
the stack.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

import rfc8785

__all__ = [
    "ANNOTATION_KEYWORDS",
    "MAX_SCHEMA_DEPTH",
    "FingerprintError",
    "canonical_json",
    "contract_document",
    "contract_fingerprint",
    "full_fingerprint",
    "short",
    "strip_annotations",
]

ANNOTATION_KEYWORDS: Final = frozenset({"description", "title", "examples"})
MAX_SCHEMA_DEPTH: Final = 128
PREFIX: Final = "sha256:"
SHORT_HEX: Final = 12

# Keywords whose value is one schema (draft-04 through 2020-12).
_ONE_SCHEMA: Final = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
# Keywords whose value is an array of schemas.
_SCHEMA_ARRAY: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
# Keywords whose value maps names (data, kept as they are) to schemas.
_SCHEMA_MAP: Final = frozenset(
    {"$defs", "definitions", "dependentSchemas", "patternProperties", "properties"}
)


class FingerprintError(ValueError):
    """A listing entry cannot be fingerprinted (not canonical-JSON representable, or
    nested deeper than `MAX_SCHEMA_DEPTH`)."""


def strip_annotations(schema: Any, *, _depth: int = 0) -> Any:
    """A copy of JSON Schema ``schema`` without ``description``/``title``/``examples``
    where they are schema keywords. Non-object schemas (``true``, ``false``) and data
    values are returned as they are."""
    if not isinstance(schema, Mapping):
        return schema
    if _depth >= MAX_SCHEMA_DEPTH:
        raise FingerprintError(f"schema nested deeper than {MAX_SCHEMA_DEPTH} levels")
    below = _depth + 1
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ANNOTATION_KEYWORDS:
            continue
        if key in _ONE_SCHEMA:
            out[key] = strip_annotations(value, _depth=below)
        elif key == "items":  # one schema, or (draft-04 to 2019-09) an array of them
            out[key] = (
                [strip_annotations(item, _depth=below) for item in value]
                if isinstance(value, list)
                else strip_annotations(value, _depth=below)
            )
        elif key in _SCHEMA_ARRAY and isinstance(value, list):
            out[key] = [strip_annotations(item, _depth=below) for item in value]
        elif key in _SCHEMA_MAP and isinstance(value, Mapping):
            out[key] = {name: strip_annotations(sub, _depth=below) for name, sub in value.items()}
        elif key == "dependencies" and isinstance(value, Mapping):
            # draft-07: each value is a schema or an array of property names (data)
            out[key] = {
                name: strip_annotations(sub, _depth=below) if isinstance(sub, Mapping) else sub
                for name, sub in value.items()
            }
        else:
            out[key] = value
    return out


def contract_document(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What the contract fingerprint hashes, for a listing entry in wire form."""
    return {
        "name": entry.get("name"),
        "inputSchema": strip_annotations(entry.get("inputSchema")),
        "outputSchema": strip_annotations(entry.get("outputSchema")),
    }


def canonical_json(document: Any) -> bytes:
    """RFC 8785 canonical JSON; `FingerprintError` when ``document`` has no such form."""
    try:
        return rfc8785.dumps(document)
    except rfc8785.CanonicalizationError as exc:
        raise FingerprintError(f"not representable as canonical JSON: {exc}") from None
    except RecursionError:
        raise FingerprintError("nested too deeply for canonical JSON") from None


def _digest(document: Any) -> str:
    return PREFIX + hashlib.sha256(canonical_json(document)).hexdigest()


def contract_fingerprint(entry: Mapping[str, Any]) -> str:
    """``sha256:...`` of the tool's name and schemas, annotations removed."""
    return _digest(contract_document(entry))


def full_fingerprint(entry: Mapping[str, Any]) -> str:
    """``sha256:...`` of the whole listing entry."""
    return _digest(dict(entry))


def short(fingerprint: str) -> str:
    """The first 12 hex digits of a fingerprint, for tables."""
    return fingerprint.removeprefix(PREFIX)[:SHORT_HEX]
