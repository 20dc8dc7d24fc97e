"""One tool as a source lists it: its schemas, its hints and both fingerprints.

``entry`` is the listing entry in wire form (camelCase names, only the fields the server
sent, as the MCP SDK parsed them; fields the SDK does not know are not kept). The
fingerprints are computed from it once, when the listing is read.

``read_only`` and ``idempotent`` are the server's ``readOnlyHint`` and
``idempotentHint`` (absent means ``False``, as the MCP specification defaults them).
They are *hints* from the server, not guarantees; `repeatable` is the deploy layer's
reading of them: a call may be repeated after a crash without doubling an effect when
the tool claims to be read-only or idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .fingerprint import contract_fingerprint, full_fingerprint

__all__ = ["ToolInfo"]


@dataclass(frozen=True, eq=False)
class ToolInfo:
    name: str
    entry: Mapping[str, Any]
    contract_fingerprint: str
    full_fingerprint: str

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> ToolInfo:
        """Fingerprint a listing entry (raises `FingerprintError` if it cannot be)."""
        document = dict(entry)
        return cls(
            name=str(document["name"]),
            entry=document,
            contract_fingerprint=contract_fingerprint(document),
            full_fingerprint=full_fingerprint(document),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolInfo):
            return NotImplemented
        return self.full_fingerprint == other.full_fingerprint

    def __hash__(self) -> int:
        return hash(self.full_fingerprint)

    @property
    def title(self) -> str | None:
        title = self.entry.get("title")
        return title if isinstance(title, str) else None

    @property
    def description(self) -> str | None:
        description = self.entry.get("description")
        return description if isinstance(description, str) else None

    @property
    def input_schema(self) -> Mapping[str, Any]:
        schema = self.entry.get("inputSchema")
        return schema if isinstance(schema, Mapping) else {}

    @property
    def output_schema(self) -> Mapping[str, Any] | None:
        schema = self.entry.get("outputSchema")
        return schema if isinstance(schema, Mapping) else None

    @property
    def annotations(self) -> Mapping[str, Any]:
        annotations = self.entry.get("annotations")
        return annotations if isinstance(annotations, Mapping) else {}

    @property
    def read_only(self) -> bool:
        return self.annotations.get("readOnlyHint") is True

    @property
    def idempotent(self) -> bool:
        return self.annotations.get("idempotentHint") is True

    @property
    def repeatable(self) -> bool:
        return self.read_only or self.idempotent

    def to_json(self) -> dict[str, Any]:
        """The probe's JSON for this tool."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "read_only": self.read_only,
            "idempotent": self.idempotent,
            "contract_fingerprint": self.contract_fingerprint,
            "full_fingerprint": self.full_fingerprint,
            "input_schema": dict(self.input_schema),
            "output_schema": None if self.output_schema is None else dict(self.output_schema),
            "annotations": dict(self.annotations),
        }
