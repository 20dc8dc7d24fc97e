"""`JsonSerializer`: LangGraph's serializer protocol, with JSON as the only format.

``dumps_typed(obj)`` returns ``("json", bytes)``: compact UTF-8 JSON text (key order
kept, so equal values give equal bytes, which is what content addressing needs).
``loads_typed`` accepts ``"json"`` only: a pickle is refused (`PickleRefusedError`), any
other format too (`UnsupportedSerializationError`). Nothing is ever unpickled, and
nothing is imported because stored data names it.

JSON has no tuples, sets, bytes, dates or classes, so such values are written as an
object with the reserved key ``"__fl__"`` naming what they are::

    {"__fl__": "tuple", "v": [...]}             tuple (also set, frozenset)
    {"__fl__": "bytes", "v": "<base64>"}        bytes, bytearray
    {"__fl__": "datetime", "v": "<iso>"}        datetime, date, time; timedelta as
                                                [days, seconds, microseconds]
    {"__fl__": "uuid", "v": "<hex>"}            UUID; Decimal as its text
    {"__fl__": "float", "v": "nan"}             NaN and the infinities
    {"__fl__": "dict", "v": [[k, v], ...]}      a dict with a key that is not a string,
                                                or that has the key "__fl__" itself
    {"__fl__": "model", "cls": "m:Q", "v": {}}  a pydantic model (LangChain messages are
                                                pydantic models): ``model_dump()``
    {"__fl__": "dataclass", "cls": .., "v": {}} a dataclass (its ``init`` fields)
    {"__fl__": "namedtuple", "cls": .., "v": {}}
    {"__fl__": "enum", "cls": .., "v": value}
    {"__fl__": "send", "v": [node, arg]}        LangGraph's ``Send``

An exception is written as its ``repr`` text, as LangGraph's own serializer does (LangGraph
reads error writes as text). Anything else is an `UnserializableValueError` naming the
path to the value, raised before anything is stored.

Classes are rebuilt only when allowed: LangChain's message classes and LangGraph's
``Interrupt``, ``Command``, ``Overwrite``, ``Send`` and ``_DeltaSnapshot`` always; the
classes given as ``types=`` (or through the saver's ``with_allowlist``); and, unless
``strict=True``, a dataclass, pydantic model, enum or named tuple whose module is
*already imported* by the reading process (the graph that defined its state has imported
it). A class is never imported because stored data names it; one that may not be rebuilt
is an `UnknownTypeError`.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import importlib
import json
import math
import sys
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Final, cast

import pydantic

from .errors import (
    CorruptCheckpointError,
    PickleRefusedError,
    UnknownTypeError,
    UnserializableValueError,
    UnsupportedSerializationError,
)

__all__ = [
    "JSON_TYPE",
    "TAG",
    "JsonSerializer",
    "class_path",
    "is_pickle_type",
    "is_plain",
    "plain_copy",
]

JSON_TYPE: Final = "json"
TAG: Final = "__fl__"
_MAX_DEPTH: Final = 200

_LANGGRAPH_TYPES: Final = (
    ("langgraph.types", "Interrupt"),
    ("langgraph.types", "Command"),
    ("langgraph.types", "Overwrite"),
    ("langgraph.types", "Send"),
    ("langgraph.checkpoint.serde.types", "_DeltaSnapshot"),
)


def class_path(cls: type) -> str:
    """``module:qualname``, how a class is named in stored data."""
    return f"{cls.__module__}:{cls.__qualname__}"


def is_pickle_type(type_tag: str) -> bool:
    """Whether a serializer's type tag says pickle (``pickle``, ``pickle+aes``, ...)."""
    return "pickle" in type_tag.lower()


def _builtin_paths() -> frozenset[str]:
    paths = {f"{module}:{name}" for module, name in _LANGGRAPH_TYPES}
    from langchain_core import messages

    for name in dir(messages):
        item = getattr(messages, name)
        if isinstance(item, type) and issubclass(item, messages.BaseMessage):
            paths.add(class_path(item))
    return frozenset(paths)


class _Unencodable(Exception):
    """A value with no JSON form; ``path`` is filled in on the way out."""

    def __init__(self, type_name: str, hint: str = "") -> None:
        self.type_name = type_name
        self.hint = hint
        self.path: list[str] = []


class _Undecodable(Exception):
    def __init__(self, reason: str, class_path: str | None = None) -> None:
        self.reason = reason
        self.class_path = class_path


def _show_path(path: list[str]) -> str:
    return "".join(reversed(path)) or "the value"


class JsonSerializer:
    """LangGraph's ``SerializerProtocol`` over JSON (see the module documentation)."""

    def __init__(
        self, *, types: Iterable[type | tuple[str, str]] = (), strict: bool = False
    ) -> None:
        self.strict = strict
        self._allowed: set[str] = set(_builtin_paths())
        self._classes: dict[str, type] = {}
        self._models: dict[str, Callable[[Any], Any]] = {}  # see `_decode_tagged`
        self.allow(types)

    def allow(self, types: Iterable[type | tuple[str, ...] | str]) -> None:
        """Allow rebuilding these classes (class objects, ``(module, name)`` pairs as
        LangGraph's allowlists give them, or ``module:qualname`` strings)."""
        for item in types:
            if isinstance(item, type):
                path = class_path(item)
                self._classes[path] = item
            elif isinstance(item, str):
                path = item
            elif isinstance(item, tuple) and len(item) >= 2:
                path = f"{'.'.join(item[:-1])}:{item[-1]}"
            else:
                raise TypeError(f"cannot allow {item!r}: give a class or a (module, name) pair")
            self._allowed.add(path)
            self._models.pop(path, None)  # the class it names may be another now

    def copy(self) -> JsonSerializer:
        clone = JsonSerializer.__new__(JsonSerializer)
        clone.strict = self.strict
        clone._allowed = set(self._allowed)
        clone._classes = dict(self._classes)
        clone._models = dict(self._models)
        return clone

    # -- the protocol --------------------------------------------------------------------

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return JSON_TYPE, self.dumps(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_tag, raw = data
        if type_tag != JSON_TYPE:
            if is_pickle_type(type_tag):
                raise PickleRefusedError("the value", type_tag)
            raise UnsupportedSerializationError("the value", type_tag)
        return self.loads(raw)

    # -- bytes -----------------------------------------------------------------------------

    def dumps(self, obj: Any) -> bytes:
        """``obj`` as JSON bytes; `UnserializableValueError` names what has no JSON form."""
        kind = type(obj)  # the scalars a step writes most, without the encoder's set-up
        if obj is None:
            return b"null"
        if kind is bool:
            return b"true" if obj else b"false"
        if kind is int:
            return str(obj).encode()
        if kind is str:
            try:
                return _encode_text(obj).encode()
            except UnicodeEncodeError:
                return _encode_ascii(obj).encode()
        try:
            tree = self.encode(obj)
        except _Unencodable as exc:
            raise UnserializableValueError(_show_path(exc.path), exc.type_name, exc.hint) from None
        try:
            return _COMPACT.encode(tree).encode()
        except UnicodeEncodeError:  # a lone surrogate: escaped text still round-trips
            return _ASCII.encode(tree).encode()

    def loads(self, raw: bytes) -> Any:
        """The value of JSON bytes written by `dumps`. Tagged objects are rebuilt as the
        parser meets them (innermost first), so a value is walked once, in C."""
        try:
            return json.loads(raw, object_hook=self._hook, parse_constant=_no_constant)
        except _Undecodable as exc:
            if exc.class_path is not None:
                raise UnknownTypeError("a value", exc.class_path, exc.reason) from None
            raise CorruptCheckpointError("value", exc.reason) from None
        except (ValueError, RecursionError) as exc:
            raise CorruptCheckpointError("value", f"not JSON ({exc})") from None

    def _hook(self, node: dict[str, Any]) -> Any:
        return self._decode_tagged(node) if TAG in node else node

    # -- trees -----------------------------------------------------------------------------

    def encode(self, obj: Any, depth: int = 0) -> Any:
        """``obj`` as plain JSON data (the tagged forms above). Plain JSON data (str-keyed
        dicts without the reserved key, lists, strings, finite numbers, booleans, None)
        is returned as it is, not copied."""
        kind = type(obj)
        if kind is str or kind is int or kind is bool or obj is None:
            return obj
        if depth > _MAX_DEPTH:
            raise _Unencodable(kind.__name__, f"nested deeper than {_MAX_DEPTH} levels")
        if kind is float:
            return obj if math.isfinite(obj) else {TAG: "float", "v": repr(obj)}
        if (kind is list or kind is dict) and is_plain(obj):
            return obj
        if kind is list:
            out = []
            for index, item in enumerate(obj):
                try:
                    out.append(self.encode(item, depth + 1))
                except _Unencodable as exc:
                    exc.path.append(f"[{index}]")
                    raise
            return out
        if kind is dict:
            return self._encode_dict(obj, depth)
        return self._encode_other(obj, kind, depth)

    def _encode_dict(self, obj: dict[Any, Any], depth: int) -> Any:
        if TAG not in obj and all(type(k) is str for k in obj):
            out: dict[str, Any] = {}
            for key, value in obj.items():
                try:
                    out[key] = self.encode(value, depth + 1)
                except _Unencodable as exc:
                    exc.path.append(f"[{key!r}]")
                    raise
            return out
        pairs = []
        for key, value in obj.items():
            try:
                pairs.append([self.encode(key, depth + 1), self.encode(value, depth + 1)])
            except _Unencodable as exc:
                exc.path.append(f"[{key!r}]")
                raise
        return {TAG: "dict", "v": pairs}

    def _encode_other(self, obj: Any, kind: type, depth: int) -> Any:
        if isinstance(obj, enum.Enum):
            return {TAG: "enum", "cls": class_path(kind), "v": self.encode(obj.value, depth + 1)}
        if isinstance(obj, pydantic.BaseModel):
            return {
                TAG: "model",
                "cls": class_path(kind),
                "v": self._encode_fields(obj.model_dump(), depth),
            }
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}
            return {
                TAG: "dataclass",
                "cls": class_path(kind),
                "v": self._encode_fields(values, depth),
            }
        if isinstance(obj, tuple):
            if hasattr(obj, "_fields") and hasattr(obj, "_asdict"):
                return {
                    TAG: "namedtuple",
                    "cls": class_path(kind),
                    "v": self._encode_fields(obj._asdict(), depth),
                }
            return {TAG: "tuple", "v": self.encode(list(obj), depth)}
        if isinstance(obj, set | frozenset):
            return {
                TAG: kind.__name__ if kind in (set, frozenset) else "set",
                "v": self.encode(list(obj), depth),
            }
        if isinstance(obj, bytes | bytearray):
            tag = "bytearray" if isinstance(obj, bytearray) else "bytes"
            return {TAG: tag, "v": base64.b64encode(bytes(obj)).decode()}
        if isinstance(obj, dt.datetime | dt.date | dt.time):
            return {
                TAG: type(obj).__name__ if kind in _TIMES else _time_kind(obj),
                "v": obj.isoformat(),
            }
        if isinstance(obj, dt.timedelta):
            return {TAG: "timedelta", "v": [obj.days, obj.seconds, obj.microseconds]}
        if isinstance(obj, uuid.UUID):
            return {TAG: "uuid", "v": obj.hex}
        if isinstance(obj, decimal.Decimal):
            return {TAG: "decimal", "v": str(obj)}
        if isinstance(obj, str):  # a str subclass
            return str(obj)
        if isinstance(obj, int) and not isinstance(obj, bool):
            return int(obj)
        if isinstance(obj, float):
            return self.encode(float(obj), depth)
        if isinstance(obj, list):
            return self.encode(list(obj), depth)
        if isinstance(obj, dict):
            return self._encode_dict(dict(obj), depth)
        if class_path(kind) == "langgraph.types:Send":
            send = [self.encode(obj.node, depth + 1), self.encode(obj.arg, depth + 1)]
            if getattr(obj, "timeout", None) is not None:
                send.append(self.encode(obj.timeout, depth + 1))
            return {TAG: "send", "v": send}
        if isinstance(obj, BaseException):
            return repr(obj)  # as LangGraph's own serializer: error writes are read as text
        raise _Unencodable(
            class_path(kind),
            "store plain data, or a dataclass, pydantic model, enum or named tuple",
        )

    def _encode_fields(self, values: dict[str, Any], depth: int) -> Any:
        return self.encode(values, depth + 1)

    def decode(self, tree: Any) -> Any:
        """A value back from its plain JSON data (a tree `encode` made)."""
        kind = type(tree)
        if kind is list:
            return [self.decode(item) for item in tree]
        if kind is dict:
            node = {key: self.decode(value) for key, value in tree.items()}
            return self._hook(node)
        return tree

    def _decode_tagged(self, node: dict[str, Any]) -> Any:
        """One tagged object whose members are decoded already."""
        tag = node[TAG]
        value = node.get("v")
        try:
            if tag == "model" and type(value) is dict:
                # A model of a class rebuilt before (LangChain's messages, every read):
                # what `_rebuild` does, without finding and checking its class again.
                path = node.get("cls")
                validate = self._models.get(path) if type(path) is str else None
                if validate is not None:
                    return validate(value)
            decoder = _SIMPLE.get(tag) if isinstance(tag, str) else None
            if decoder is not None:
                return decoder(value)
            if tag in ("model", "dataclass", "namedtuple", "enum"):
                return self._rebuild(tag, node.get("cls"), value)
        except _Undecodable:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, pydantic.ValidationError) as exc:
            raise _Undecodable(f"a malformed {tag!r} value ({type(exc).__name__}: {exc})") from None
        raise _Undecodable(f"unknown tag {tag!r}")

    def _rebuild(self, tag: str, path: object, value: Any) -> Any:
        if not isinstance(path, str):
            raise _Undecodable(f"a {tag!r} value without a class")
        cls = self._class(path, tag)
        if tag == "enum":
            return cls(value)
        if not isinstance(value, dict):
            raise _Undecodable(f"a {tag!r} value whose fields are not an object")
        if tag == "model":
            return cls.model_validate(value)
        return cls(**value)

    def _class(self, path: str, tag: str) -> Any:
        cls = self._classes.get(path)
        if cls is None:
            # Only a class the application allowed may have its module imported here.
            cls = _resolve(path, load=path in self._allowed)
            if cls is None:
                raise _Undecodable("is not imported by this process", path)
            if path not in self._allowed and (self.strict or not _kind_matches(cls, tag)):
                raise _Undecodable("is not allowed to be rebuilt", path)
            if path in self._allowed:
                self._classes[path] = cls
        if not _kind_matches(cls, tag):
            raise _Undecodable(f"is not a {tag}", path)
        if tag == "model" and self._classes.get(path) is cls:
            # this path names this model class until `allow` names another: `_decode_tagged`
            self._models[path] = cast(type[pydantic.BaseModel], cls).model_validate
        return cls


_TIMES: Final = (dt.datetime, dt.date, dt.time)
_COMPACT: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_encode_text: Final = json.encoder.encode_basestring
_encode_ascii: Final = json.encoder.encode_basestring_ascii
_ASCII: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _time_kind(obj: Any) -> str:
    if isinstance(obj, dt.datetime):
        return "datetime"
    return "date" if isinstance(obj, dt.date) else "time"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _resolve(path: str, *, load: bool) -> Any:
    """The class at ``module:qualname``: its module must be imported already, unless
    ``load`` (an allowed class), which may import it."""
    module_name, _, qualname = path.partition(":")
    module = sys.modules.get(module_name)
    if module is None and load and module_name:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            return None
    if module is None or not qualname or "<" in qualname:
        return None
    item: Any = module
    for part in qualname.split("."):
        item = getattr(item, part, None)
        if item is None:
            return None
    return item if isinstance(item, type) else None


def _kind_matches(cls: type, tag: str) -> bool:
    if tag == "model":
        return issubclass(cls, pydantic.BaseModel)
    if tag == "dataclass":
        return dataclasses.is_dataclass(cls)
    if tag == "namedtuple":
        return issubclass(cls, tuple) and hasattr(cls, "_fields")
    if tag == "enum":
        return issubclass(cls, enum.Enum)
    return False


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError("expected a list")
    return value


def _send(value: Any) -> Any:
    from langgraph.types import Send

    node, arg, *timeout = _list(value)
    return Send(node, arg, timeout=timeout[0]) if timeout else Send(node, arg)


def _dict(value: Any) -> dict[Any, Any]:
    return {_hashable(k): v for k, v in _list(value)}


def _hashable(key: Any) -> Any:
    hash(key)  # a TypeError (a malformed value) for a list or dict key
    return key


def _float(value: Any) -> float:
    result = float(value)
    if math.isfinite(result):
        raise ValueError("a finite float is stored as a number")
    return result


def _bytes(value: Any) -> bytes:
    if not isinstance(value, str):
        raise ValueError("expected base64 text")
    return base64.b64decode(value, validate=True)


def is_plain(root: list[Any] | dict[str, Any]) -> bool:
    """Whether ``root`` is JSON data as it stands: lists, dicts with string keys other than
    the reserved one, strings, ints, finite floats, booleans and None."""
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            if TAG in node:
                return False
            for key, value in node.items():
                if type(key) is not str:
                    return False
                kind = type(value)
                if kind is dict or kind is list:
                    stack.append(value)
                elif not (kind is str or kind is int or kind is bool or value is None) and not (
                    kind is float and math.isfinite(value)
                ):
                    return False
        else:
            for value in node:
                kind = type(value)
                if kind is dict or kind is list:
                    stack.append(value)
                elif not (kind is str or kind is int or kind is bool or value is None) and not (
                    kind is float and math.isfinite(value)
                ):
                    return False
        if len(stack) > _MAX_DEPTH * 64:
            return False  # let the slow path bound the depth
    return True


class _NotPlain(Exception):
    pass


def plain_copy(root: dict[str, Any]) -> dict[str, Any] | None:
    """A deep copy of ``root`` if it is JSON data as it stands (as `is_plain` says), else
    None: the check and the copy in one walk (a checkpoint's metadata, every put)."""
    try:
        return _copy_dict(root)
    except (_NotPlain, RecursionError):
        return None


def _copy_dict(node: dict[str, Any]) -> dict[str, Any]:
    if TAG in node:
        raise _NotPlain
    out: dict[str, Any] = {}
    for key, value in node.items():
        if type(key) is not str:
            raise _NotPlain
        out[key] = _copy_value(value)
    return out


def _copy_value(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        return _copy_dict(value)
    if kind is list:
        return [_copy_value(item) for item in value]
    if kind is float and math.isfinite(value):
        return value
    raise _NotPlain


_SIMPLE: Final[dict[str, Callable[[Any], Any]]] = {
    "tuple": lambda v: tuple(_list(v)),
    "set": lambda v: set(_list(v)),
    "frozenset": lambda v: frozenset(_list(v)),
    "dict": _dict,
    "float": _float,
    "bytes": _bytes,
    "bytearray": lambda v: bytearray(_bytes(v)),
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "uuid": lambda v: uuid.UUID(hex=v),
    "decimal": decimal.Decimal,
    "send": _send,
}
