"""Workflow metadata: the name, version, schemas and vertex labels of a definition.

`Metadata` validates everything it can without compiling the schemas (that happens once,
at catalog registration; see `flowledger.workflows.authoring.schema`). A `Metadata` is immutable:
schemas are kept as bytes, vertices as a tuple of frozen `VertexMetadata`, and every
accessor that returns a mutable value returns a fresh one.

Also here: the two text-bounding helpers shared by the bridge. `bound_summary` bounds a
status summary (workflows-spec §1.6); `bound_text` cleans and bounds display text for
activities (§6.3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import rfc8785

from flowledger.flow.ids import VERTEX_ID

from ..errors import InvalidSchemaError

__all__ = [
    "MAX_DESCRIPTION_BYTES",
    "MAX_LABEL_BYTES",
    "MAX_SUMMARY_BYTES",
    "NAME_PATTERN",
    "VERSION_PATTERN",
    "Metadata",
    "VertexMetadata",
    "bound_summary",
    "bound_text",
    "schema_bytes",
]

NAME_PATTERN: Final = re.compile(r"[a-z][a-z0-9_]{2,63}")
# Deliberately stricter than the reference (workflows-spec §11.1): a version is also a
# storage-name segment and an activity field, so anything else would register fine and
# then fail at run creation.
VERSION_PATTERN: Final = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
MAX_SUMMARY_BYTES: Final = 1024
MAX_DESCRIPTION_BYTES: Final = 1024
MAX_LABEL_BYTES: Final = 64

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc, exactly
_LABEL_FORBIDDEN: Final = frozenset("\x00\r\n")


def _utf8(text: str) -> bytes | None:
    """UTF-8 bytes of ``text``, or ``None`` if it holds a lone surrogate."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _cut(data: bytes, limit: int) -> str:
    """The longest prefix of valid UTF-8 ``data`` of at most ``limit`` bytes."""
    # The input is valid UTF-8, so only a partial code point at the cut can be invalid.
    return data[:limit].decode("utf-8", errors="ignore")


def bound_summary(text: str) -> str:
    """``text`` unchanged if it is at most 1024 UTF-8 bytes, else its longest prefix of at
    most 1024 bytes that ends on a code-point boundary.

    A lone surrogate (which has no UTF-8 form) is replaced by ``?`` so the summary can
    always be stored as JSON."""
    data = _utf8(text)
    if data is None:
        data = text.encode("utf-8", errors="replace")
        text = data.decode("utf-8")
    if len(data) <= MAX_SUMMARY_BYTES:
        return text
    return _cut(data, MAX_SUMMARY_BYTES)


def bound_text(text: str, limit: int) -> str:
    """Display text: control characters (Unicode Cc) removed, Unicode whitespace trimmed
    at both ends, then cut to at most ``limit`` UTF-8 bytes at a code-point boundary and
    trimmed again. ``limit <= 0`` or text that is not valid Unicode (a lone surrogate)
    gives ``""``."""
    if limit <= 0 or _utf8(text) is None:
        return ""
    cleaned = _CONTROL.sub("", text).strip()
    data = cleaned.encode("utf-8")
    if len(data) <= limit:
        return cleaned
    return _cut(data, limit).strip()


@dataclass(frozen=True, slots=True)
class VertexMetadata:
    """Display descriptor of one graph vertex: a label and, optionally, the flow vertex
    id (a vertex name such as ``"review"``) it describes.

    With ids, activities label completions by vertex identity, which stays right when
    parallel vertices finish out of declaration order; prefer them. `Metadata` validates
    both fields."""

    label: str
    id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"id": ..., "label": ...}``; ``id`` only when set."""
        doc: dict[str, Any] = {}
        if self.id is not None:
            doc["id"] = self.id
        doc["label"] = self.label
        return doc


def schema_bytes(value: object, field: str) -> bytes:
    """A schema argument as immutable bytes: a mapping is serialised as RFC 8785 canonical
    JSON (which refuses integers beyond ±(2**53 - 1): pass such a schema as text); text and
    bytes are kept exactly as given (copied)."""
    if isinstance(value, Mapping):
        try:
            return rfc8785.dumps(_plain(value))
        except (ValueError, TypeError, RecursionError) as exc:
            raise InvalidSchemaError(field, f"schema is not JSON data: {exc}") from exc
    if isinstance(value, str):
        data = _utf8(value)
        if data is None:
            raise InvalidSchemaError(field, "schema text is not valid UTF-8")
        return data
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise InvalidSchemaError(
        field, f"schema must be a mapping, str or bytes, not {type(value).__name__}"
    )


def _plain(value: Any) -> Any:
    """Mappings as dicts and tuples as lists: the only containers rfc8785 accepts."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _parse(data: bytes, field: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise InvalidSchemaError(field, f"schema is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise InvalidSchemaError(field, "schema is not a JSON object")
    return value


class Metadata:
    """What a workflow definition is, for discovery and validation.

    Construction validates (raising `InvalidSchemaError` naming the field):

    * ``name`` matches ``^[a-z][a-z0-9_]{2,63}$``;
    * ``version`` matches ``^[a-z0-9][a-z0-9_.-]{0,63}$`` (stricter than the reference,
      §11.1: it also rules out whitespace, NUL, CR, LF and TAB);
    * ``description`` is at most 1024 UTF-8 bytes;
    * every vertex label is non-empty, at most 64 UTF-8 bytes, without NUL, CR or LF;
    * vertex ids that are set are valid flow vertex names and unique.

    Schemas are not compiled (nor even parsed) here; registration does that. An empty
    ``resume_schema`` means "no resume schema"; an empty ``input_schema`` is kept and
    fails at registration."""

    __slots__ = (
        "_description",
        "_input_schema",
        "_name",
        "_resume_schema",
        "_version",
        "_vertices",
    )

    def __init__(
        self,
        name: str,
        version: str,
        *,
        input_schema: Mapping[str, Any] | str | bytes,
        resume_schema: Mapping[str, Any] | str | bytes | None = None,
        description: str = "",
        vertices: Sequence[VertexMetadata] = (),
    ) -> None:
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise InvalidSchemaError("name", f"{name!r} must match ^{NAME_PATTERN.pattern}$")
        if not isinstance(version, str) or not VERSION_PATTERN.fullmatch(version):
            raise InvalidSchemaError(
                "version", f"{version!r} must match ^{VERSION_PATTERN.pattern}$"
            )
        if not isinstance(description, str):
            raise InvalidSchemaError("description", "must be a string")
        encoded = _utf8(description)
        if encoded is None:
            raise InvalidSchemaError("description", "is not valid UTF-8")
        if len(encoded) > MAX_DESCRIPTION_BYTES:
            raise InvalidSchemaError(
                "description",
                f"is {len(encoded)} bytes; the limit is {MAX_DESCRIPTION_BYTES}",
            )
        self._name = name
        self._version = version
        self._description = description
        self._input_schema = schema_bytes(input_schema, "input")
        resume = None if resume_schema is None else schema_bytes(resume_schema, "resume")
        self._resume_schema = resume or None  # empty bytes: no resume schema
        self._vertices = _check_vertices(vertices)

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> str:
        return self._version

    @property
    def description(self) -> str:
        return self._description

    @property
    def vertices(self) -> tuple[VertexMetadata, ...]:
        return self._vertices

    @property
    def input_schema_bytes(self) -> bytes:
        return self._input_schema

    @property
    def resume_schema_bytes(self) -> bytes | None:
        return self._resume_schema

    @property
    def input_schema(self) -> dict[str, Any]:
        """A freshly parsed copy of the input schema (non-integer numbers as floats).

        Raises `InvalidSchemaError` if the bytes are not a JSON object, which only an
        unregistered definition can have."""
        return _parse(self._input_schema, "input")

    @property
    def resume_schema(self) -> dict[str, Any] | None:
        """A freshly parsed copy of the resume schema, or ``None`` if there is none."""
        if self._resume_schema is None:
            return None
        return _parse(self._resume_schema, "resume")

    def to_json(self) -> dict[str, Any]:
        """The discovery form (§1.2): name, version, description, input_schema,
        resume_schema (omitted when there is none) and vertices (always a list)."""
        doc: dict[str, Any] = {
            "name": self._name,
            "version": self._version,
            "description": self._description,
            "input_schema": self.input_schema,
        }
        resume = self.resume_schema
        if resume is not None:
            doc["resume_schema"] = resume
        doc["vertices"] = [v.to_json() for v in self._vertices]
        return doc

    def _key(self) -> tuple[Any, ...]:
        return (
            self._name,
            self._version,
            self._description,
            self._input_schema,
            self._resume_schema,
            self._vertices,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Metadata):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Metadata({self._name!r}, {self._version!r})"


def _check_vertices(vertices: Sequence[VertexMetadata]) -> tuple[VertexMetadata, ...]:
    if isinstance(vertices, str | bytes) or not isinstance(vertices, Sequence):
        raise InvalidSchemaError("vertices", "must be a sequence of VertexMetadata")
    result = tuple(vertices)
    ids: set[str] = set()
    for index, vertex in enumerate(result):
        if not isinstance(vertex, VertexMetadata):
            raise InvalidSchemaError(
                "vertices", f"item {index} is a {type(vertex).__name__}, not VertexMetadata"
            )
        label = vertex.label
        if not isinstance(label, str) or not label:
            raise InvalidSchemaError("vertex label", f"label {index} is empty or not a string")
        encoded = _utf8(label)
        if encoded is None:
            raise InvalidSchemaError("vertex label", f"label {index} is not valid UTF-8")
        if len(encoded) > MAX_LABEL_BYTES:
            raise InvalidSchemaError(
                "vertex label",
                f"label {index} is {len(encoded)} bytes; the limit is {MAX_LABEL_BYTES}",
            )
        if _LABEL_FORBIDDEN.intersection(label):
            raise InvalidSchemaError("vertex label", f"label {index} contains NUL, CR or LF")
        if vertex.id is None:
            continue
        if not isinstance(vertex.id, str) or not VERTEX_ID.fullmatch(vertex.id):
            raise InvalidSchemaError("vertex ID", f"{vertex.id!r} must match ^{VERTEX_ID.pattern}$")
        if vertex.id in ids:
            raise InvalidSchemaError("vertex ID", f"{vertex.id!r} appears twice")
        ids.add(vertex.id)
    return result
