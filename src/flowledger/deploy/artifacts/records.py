"""The artifact store's records: what a saved version, a child pin and a referrer are,
and the strict JSON codec of a version record.

A version record is RFC 8785 JSON ``{"record": 1, "state": "saved" | "deleted",
"artifact": {...}}``; decoding refuses anything unexpected (`ArtifactCorruptError`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

import rfc8785

from flowledger.workflows.authoring.metadata import NAME_PATTERN, VERSION_PATTERN
from flowledger.workflows.records.run import is_digest

from .errors import ArtifactCorruptError
from .limits import MAX_ARTIFACT_BYTES, MAX_CHILD_DEPTH

__all__ = [
    "RECORD_VERSION",
    "ArtifactRecord",
    "ChildPin",
    "Referrer",
    "ReferrerKind",
    "closure_digest",
    "decode_record",
    "encode_record",
]

RECORD_VERSION: Final = 1
ReferrerKind = Literal["artifact", "deployment", "run"]
_KINDS: Final = ("artifact", "deployment", "run")
_SEGMENT: Final = re.compile(r"[a-z0-9][a-z0-9_.-]{0,199}")


@dataclass(frozen=True, slots=True)
class Referrer:
    """Something that refers to a saved artifact: a parent artifact (id
    ``<name>.<version>.<digest>``), a deployment or a run (ids chosen by their owners:
    one storage-name segment, ``[a-z0-9][a-z0-9_.-]*``, at most 200 characters)."""

    kind: ReferrerKind
    id: str

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"referrer kind must be one of {', '.join(_KINDS)}, not {self.kind!r}")
        if not isinstance(self.id, str) or not _SEGMENT.fullmatch(self.id):
            raise ValueError(f"referrer id {self.id!r} must match ^{_SEGMENT.pattern}$")

    @staticmethod
    def artifact(name: str, version: str, digest: str) -> Referrer:
        return Referrer("artifact", f"{name}.{version}.{digest}")

    def __str__(self) -> str:
        return f"{self.kind} {self.id}"


@dataclass(frozen=True, slots=True)
class ChildPin:
    """A child as resolved when its parent was saved."""

    name: str
    version: str
    digest: str
    closure_digest: str

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "version": self.version,
            "digest": self.digest,
            "closure_digest": self.closure_digest,
        }


@dataclass(frozen=True, slots=True)
class ArtifactRecord:
    """A saved version. ``closure_digest`` covers the artifact and, recursively, every
    child (SHA-256 of the canonical JSON ``{"digest": ..., "children": [{"name",
    "version", "closure_digest"}, ...]}``, children sorted by name); ``height`` is 0
    without children, else one more than the highest child."""

    name: str
    version: str
    digest: str
    size: int
    closure_digest: str
    height: int
    children: tuple[ChildPin, ...]
    saved_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "digest": self.digest,
            "size": self.size,
            "closure_digest": self.closure_digest,
            "height": self.height,
            "children": [child.to_json() for child in self.children],
            "saved_at": _format_time(self.saved_at),
        }


def _format_time(value: datetime) -> str:
    return f"{value.astimezone(UTC):%Y-%m-%dT%H:%M:%S}.{value.microsecond:06d}Z"


def closure_digest(digest: str, children: tuple[ChildPin, ...]) -> str:
    body: dict[str, Any] = {
        "digest": digest,
        "children": [
            {"name": c.name, "version": c.version, "closure_digest": c.closure_digest}
            for c in sorted(children, key=lambda c: c.name)
        ],
    }
    return hashlib.sha256(rfc8785.dumps(body)).hexdigest()


def encode_record(record: ArtifactRecord, *, deleted: bool = False) -> bytes:
    body = {
        "record": RECORD_VERSION,
        "state": "deleted" if deleted else "saved",
        "artifact": record.to_json(),
    }
    return rfc8785.dumps(body)


def decode_record(key: str, raw: bytes, name: str, version: str) -> tuple[ArtifactRecord, bool]:
    def bad(reason: str) -> ArtifactCorruptError:
        return ArtifactCorruptError(key, reason)

    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise bad("the version record is not JSON") from None
    if not isinstance(body, dict) or set(body) != {"record", "state", "artifact"}:
        raise bad("the version record has unexpected fields")
    if body["record"] != RECORD_VERSION or body["state"] not in ("saved", "deleted"):
        raise bad("unsupported version record")
    doc = body["artifact"]
    fields = {"name", "version", "digest", "size", "closure_digest", "height", "children"}
    if not isinstance(doc, dict) or set(doc) != fields | {"saved_at"}:
        raise bad("the version record's artifact has unexpected fields")
    if doc["name"] != name or doc["version"] != version:
        raise bad("the version record names another artifact")
    if not is_digest(doc["digest"]) or not is_digest(doc["closure_digest"]):
        raise bad("malformed digest")
    size, height = doc["size"], doc["height"]
    for value, high in ((size, MAX_ARTIFACT_BYTES), (height, MAX_CHILD_DEPTH)):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
            raise bad("size or height out of range")
    children = doc["children"]
    if not isinstance(children, list):
        raise bad("children is not a list")
    pins: list[ChildPin] = []
    for child in children:
        if not isinstance(child, dict) or set(child) != {
            "name",
            "version",
            "digest",
            "closure_digest",
        }:
            raise bad("malformed child pin")
        if not (
            isinstance(child["name"], str)
            and NAME_PATTERN.fullmatch(child["name"])
            and isinstance(child["version"], str)
            and VERSION_PATTERN.fullmatch(child["version"])
            and is_digest(child["digest"])
            and is_digest(child["closure_digest"])
        ):
            raise bad("malformed child pin")
        pins.append(
            ChildPin(child["name"], child["version"], child["digest"], child["closure_digest"])
        )
    try:
        saved_at = datetime.strptime(doc["saved_at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except (TypeError, ValueError):
        raise bad("malformed saved_at") from None
    record = ArtifactRecord(
        name,
        version,
        doc["digest"],
        size,
        doc["closure_digest"],
        height,
        tuple(pins),
        saved_at,
    )
    return record, body["state"] == "deleted"
