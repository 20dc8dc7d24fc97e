"""JSON, and nothing but JSON: how states and checkpoint parts become bytes and back.

* `dumps` writes compact JSON with sorted keys, so equal values always give
  equal bytes. NaN and infinities are refused. `dumps_ordered` is the same but
  keeps key order; states are written with it, so a dict in a state comes back
  in insertion order (the same value in the same order gives the same bytes,
  which is all content addressing needs).
* `loads` is strict: bounded size and nesting depth (checked before parsing),
  no duplicate keys, no NaN/Infinity literals, no trailing data.
* `to_json_value` turns a Python value (dicts, lists, scalars, dataclasses,
  pydantic models, ...) into plain JSON data and names the path of the first
  part that cannot be represented.
* `StateCodec` binds a state type (dataclass, TypedDict, pydantic model, or
  plain ``dict``) to pydantic's `TypeAdapter`. A state must serialise to a
  JSON object: its top-level fields are what checkpoints de-duplicate.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any, Final, Generic, TypeVar

import pydantic
import pydantic_core

from ..jsontext import decode_json
from .errors import BuildError, CodecError

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "MAX_DOCUMENT_DEPTH",
    "JsonObject",
    "StateCodec",
    "copy_json",
    "dumps",
    "dumps_ordered",
    "loads",
    "to_json_value",
]

S = TypeVar("S")
JsonObject = dict[str, Any]

MAX_DOCUMENT_BYTES: Final = 16 << 20  # a whole state, or one checkpoint document
MAX_DEPTH: Final = 64  # bracket levels in a user value (a state, interrupt info, ...)
# Stored documents wrap user values a few levels deep; readers allow for that margin.
MAX_DOCUMENT_DEPTH: Final = MAX_DEPTH + 8

_STRINGS: Final = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS: Final = re.compile(rb"[\[\]{}]")


_ENCODER: Final = json.JSONEncoder(
    separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False
)


_ORDERED_ENCODER: Final = json.JSONEncoder(
    separators=(",", ":"), sort_keys=False, ensure_ascii=False, allow_nan=False
)


def dumps(value: Any) -> bytes:
    """Compact, key-sorted UTF-8 JSON of plain JSON data."""
    return _encode(_ENCODER, value)


def dumps_ordered(value: Any) -> bytes:
    """Compact UTF-8 JSON of plain JSON data that keeps every object's key order.

    For state: a state's fields and dict values come back in the order they were
    written. The bytes are still a function of the value *and its order*, so the same
    value always has the same digest; two dicts equal but for their order are stored
    once each, which costs a little de-duplication and loses nothing."""
    return _encode(_ORDERED_ENCODER, value)


def _encode(encoder: json.JSONEncoder, value: Any) -> bytes:
    try:
        return encoder.encode(value).encode()
    except (TypeError, ValueError) as exc:
        to_json_value(value)  # names the offending path if there is one
        raise CodecError("encode", "", str(exc)) from exc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def check_depth(data: bytes, max_depth: int = MAX_DEPTH) -> None:
    depth = 0
    for match in _BRACKETS.finditer(_STRINGS.sub(b"", data)):
        if match.group() in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                raise CodecError("decode", "", f"nesting deeper than {max_depth}")
        else:
            depth -= 1
            if depth < 0:
                raise CodecError("decode", "", "unbalanced brackets")


def check_readable(
    data: bytes, *, max_bytes: int = MAX_DOCUMENT_BYTES, max_depth: int = MAX_DOCUMENT_DEPTH
) -> None:
    """Raise `CodecError` if `loads` would refuse ``data`` for its size or depth."""
    if len(data) > max_bytes:
        raise CodecError("encode", "", f"document is {len(data)} bytes; the limit is {max_bytes}")
    if data.count(b"[") + data.count(b"{") > max_depth:  # else it cannot be too deep
        check_depth(data, max_depth)


def loads(
    data: bytes, *, max_bytes: int = MAX_DOCUMENT_BYTES, max_depth: int = MAX_DOCUMENT_DEPTH
) -> Any:
    """Strictly parse untrusted JSON bytes; raise `CodecError` on anything doubtful."""
    if not isinstance(data, bytes | bytearray):
        raise CodecError("decode", "", f"expected bytes, got {type(data).__name__}")
    if not data:
        raise CodecError("decode", "", "empty document")
    if len(data) > max_bytes:
        raise CodecError("decode", "", f"document is {len(data)} bytes; the limit is {max_bytes}")
    check_depth(bytes(data), max_depth)
    try:
        return decode_json(data, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # DuplicateKeyError names its pointer
        raise CodecError("decode", "", str(exc)) from exc


def to_json_value(value: Any, path: str = "$", depth: int = 0) -> Any:
    """Plain JSON data equal to ``value``; `CodecError` names the first path that is not."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError:
                raise CodecError("encode", path, "a string holds a lone surrogate") from None
        return value
    if depth >= MAX_DEPTH and isinstance(value, Mapping | list | tuple):
        raise CodecError("encode", path, f"nesting deeper than {MAX_DEPTH}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CodecError("encode", path, f"{value} is not representable in JSON")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CodecError("encode", path, f"object key {key!r} is not a string")
            to_json_value(key, f"{path}.{key}", depth)
            out[key] = to_json_value(item, f"{path}.{key}", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [to_json_value(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    try:
        converted = pydantic_core.to_jsonable_python(value)
    except pydantic_core.PydanticSerializationError as exc:
        parts = _parts(value)
        if parts is not None:
            to_json_value(parts, path, depth)  # raises at the offending field
        raise CodecError(
            "encode", path, f"{type(value).__name__} is not JSON-serialisable"
        ) from exc
    return to_json_value(converted, path, depth + 1)


def _parts(value: Any) -> dict[str, Any] | None:
    """The fields of a pydantic model or dataclass instance, to search for a bad one."""
    if isinstance(value, pydantic.BaseModel):
        return {name: getattr(value, name) for name in type(value).model_fields}
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in fields(value)}
    return None


def copy_json(value: Any) -> Any:
    """An independent copy of JSON data: new dicts and lists, the same immutable scalars
    (a long string is shared, not copied)."""
    if type(value) is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if type(value) is list:
        return [copy_json(item) for item in value]
    return value


class StateCodec(Generic[S]):
    """Converts states of one type to JSON objects and back (fresh objects every time)."""

    def __init__(self, state_type: type[S] | None) -> None:
        self.state_type: Any = dict if state_type is None else state_type
        self._adapter: pydantic.TypeAdapter[Any] | None = None
        if self.state_type is not dict:
            try:
                self._adapter = pydantic.TypeAdapter(self.state_type)
            except pydantic.PydanticUserError as exc:  # e.g. typing.TypedDict on 3.11
                raise BuildError("Graph", f"state type {state_type!r}: {exc.message}") from exc

    def dump(self, state: S) -> JsonObject:
        """The state as a JSON object; `CodecError` (op ``encode``) names a bad path."""
        if self._adapter is None:
            doc = to_json_value(state, "state")
        else:
            try:
                # Python mode, then our own conversion: JSON mode would turn NaN into null.
                doc = self._adapter.dump_python(state, mode="python")
            except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
                to_json_value(state, "state")  # raises with the path when it can find one
                raise CodecError("encode", "state", str(exc)) from exc
            doc = to_json_value(doc, "state")
        if not isinstance(doc, dict):
            raise CodecError("encode", "state", f"a state must be a JSON object, not {doc!r}")
        return doc

    def load(self, doc: Any) -> S:
        """A fresh state from a JSON object; `CodecError` (op ``decode``) names a bad path."""
        if not isinstance(doc, dict):
            raise CodecError("decode", "state", "a state must be a JSON object")
        if self._adapter is None:
            copied: S = copy_json(doc)
            return copied
        try:
            return self._adapter.validate_python(doc)  # type: ignore[no-any-return]
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = "state" + "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]
            )
            raise CodecError("decode", where, first["msg"]) from exc

    def clone(self, state: S) -> S:
        return self.load(self.dump(state))

    @property
    def typed(self) -> bool:
        """Whether states go through a pydantic adapter (else they are plain dicts)."""
        return self._adapter is not None
