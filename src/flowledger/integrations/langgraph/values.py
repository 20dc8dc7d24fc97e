"""Values in and out of their stored forms (`records` documents them).

Every value goes through LangGraph's serializer protocol (``serde.dumps_typed`` /
``serde.loads_typed``): the saver's serde, by default flowledger's `JsonSerializer`. The
formats kept are JSON (``json``, or ``json+<cipher>`` from LangGraph's
``EncryptedSerializer`` around a JSON serde) and the raw ``null`` / ``bytes`` /
``bytearray`` forms. A serde that produces anything else (``msgpack``, ``pickle``) is
refused when writing (`UnsupportedSerializationError`, nothing written), and a stored
value of another format is never handed to the serde: a pickle is a
`PickleRefusedError`, anything else an `UnsupportedSerializationError`.

JSON text up to `INLINE_TEXT` bytes stays in its record; longer text is an attachment
named by its SHA-256, stored once however many records, threads or namespaces name it.
A Python list is stored element by element (`Encoder.elements`), so an element that
recurs (the same message in a write and in the channel after it, in every later
checkpoint of a growing list) is one attachment.
"""

from __future__ import annotations

import base64
import binascii
import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Final

import pydantic
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...storage import digest_of
from .errors import (
    CorruptCheckpointError,
    PickleRefusedError,
    SaverError,
    UnknownTypeError,
    UnserializableValueError,
    UnsupportedSerializationError,
)
from .records import is_digest
from .serde import JSON_TYPE, JsonSerializer, is_pickle_type

__all__ = [
    "INLINE_BYTES",
    "INLINE_TEXT",
    "Encoded",
    "Encoder",
    "check_blob",
    "check_type",
    "load_scalar",
    "scalar_digests",
]

_SLOTS: Final = 512  # (log, channel) lists whose elements are remembered (see `Encoder`)
INLINE_TEXT: Final = 64  # JSON text this short stays in its record
INLINE_BYTES: Final = 48  # so do raw bytes this short (as base64)
_RAW_TYPES: Final = frozenset({"null", "bytes", "bytearray"})
_SMALL_INT: Final = 10**18  # its decimal text is far below INLINE_TEXT


def check_type(type_tag: object, where: str, *, writing: bool) -> str:
    """``type_tag`` if it is a JSON-based format; the typed refusal otherwise."""
    if not isinstance(type_tag, str):
        raise CorruptCheckpointError(where, f"type tag {type_tag!r} is not text")
    if type_tag == JSON_TYPE or type_tag.startswith(JSON_TYPE + "+") or type_tag in _RAW_TYPES:
        return type_tag
    if is_pickle_type(type_tag) and not writing:
        raise PickleRefusedError(where, type_tag)
    raise UnsupportedSerializationError(where, type_tag)


@dataclass
class Encoded:
    """What records being built need besides their JSON: the attachments they introduce
    (digest -> bytes) and every digest they need stored."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    needed: set[str] = field(default_factory=set)

    def attach(self, data: bytes) -> str:
        digest = digest_of(data)
        self.blobs[digest] = data
        self.needed.add(digest)
        return digest


class Encoder:
    """Python values to stored value forms, through a serde.

    The elements of the list a channel last held (as stored, or as a read returned them)
    are remembered by identity with their stored forms, one *slot* per log and channel
    (the last `_SLOTS` of them): the next checkpoint of a growing list holds the same
    objects, and serialising every one of them again would cost each step as much as the
    whole list. Only the current list of a slot is kept, so old lists are not kept alive.
    A remembered string (immutable) is reused as it is; a remembered pydantic model
    (LangChain's messages) only while its fields still equal a ``model_dump()`` taken when
    it was stored or read (an independent copy: nested containers included), so a message
    changed in place is stored again, never stale."""

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde
        self._slots: OrderedDict[tuple[str, str], _Slot] = OrderedDict()

    def scalar(self, value: Any, where: str, out: Encoded) -> Any:
        try:
            type_tag, data = self.serde.dumps_typed(value)
        except UnserializableValueError as exc:
            inner = "" if exc.where == "the value" else exc.where
            raise UnserializableValueError(f"{where}{inner}", exc.type_name) from None
        except SaverError:
            raise
        except Exception as exc:  # a foreign serde's own failure
            raise UnserializableValueError(where, type(value).__name__, str(exc)) from exc
        type_tag = check_type(type_tag, where, writing=True)
        if not isinstance(data, bytes | bytearray):
            raise UnserializableValueError(
                where, type(value).__name__, "the serde returned no bytes"
            )
        data = bytes(data)
        if type_tag == JSON_TYPE:
            try:
                text = data.decode()
            except UnicodeDecodeError:
                raise UnsupportedSerializationError(where, "json (not UTF-8)") from None
            return [text] if len(data) <= INLINE_TEXT else out.attach(data)
        if len(data) <= INLINE_BYTES:
            return {"t": type_tag, "b": base64.b64encode(data).decode()}
        return {"t": type_tag, "d": out.attach(data)}

    def small(self, value: Any) -> list[str] | None:
        """The stored form of None, a boolean or an integer of up to 18 digits when the
        serde is flowledger's own `JsonSerializer` - ``[json text]``, what `scalar` makes
        of it, without the checks `scalar` makes of a serde's output (this serde's text
        for these is short, plain JSON) - else None (then `scalar` is needed). A step's
        counters and flags are most of what a graph writes."""
        serde = self.serde
        if type(serde) is not JsonSerializer:
            return None
        kind = type(value)
        if value is None or kind is bool or (kind is int and -_SMALL_INT < value < _SMALL_INT):
            return [serde.dumps(value).decode()]
        return None

    def elements(
        self,
        values: list[Any],
        where: str,
        out: Encoded,
        slot: tuple[str, str] | None = None,
    ) -> list[Any]:
        """The stored forms of a list's elements (``slot``: the log and channel whose
        list this is, see the class documentation). The attachments they need are in
        ``out.blobs``; naming them (``out.needed``) is the list's stored form's business
        (`lists`): a delta names only the elements it adds."""
        blobs = out.blobs
        known = self._slots.get(slot) if slot is not None else None
        if known is not None and known.starts(values):
            # A list that grew (each step of a conversation): what it kept is reused at
            # once, and the slot's list grows with it.
            current, start = known, len(known.items)
            blobs.update(known.attached)
        else:
            current, start = _Slot(), 0
        entries = list(current.entries)
        for index in range(start, len(values)):
            item = values[index]
            at = known.find(item) if known is not None else None
            if at is not None and known is not None:
                entry, fields = known.entries[at], known.fields[at]
                digest = _digest(entry)
                if digest is not None:
                    blobs[digest] = known.attached[digest]
            else:
                entry = self.scalar(item, f"{where}[{index}]", out)
                fields = _fields(item) if slot is not None else _NOT_KEPT
            entries.append(entry)
            if slot is not None:
                current.add(item, fields, entry, blobs)
        if slot is not None:
            self._keep(slot, current)
        return entries

    def remember(
        self,
        slot: tuple[str, str],
        items: list[Any],
        entries: Iterable[Any],
        blobs: Mapping[str, bytes],
    ) -> None:
        """Remember the list a read returned as the slot's current list."""
        forms = list(entries)
        known = self._slots.get(slot)
        current = (known.read_again(items, forms) if known is not None else None) or _Slot()
        start = len(current.items)
        for item, entry in zip(items[start:], forms[start:], strict=True):
            current.add(item, _fields(item), entry, blobs)
        self._keep(slot, current)

    def _keep(self, slot: tuple[str, str], current: _Slot) -> None:
        self._slots[slot] = current
        self._slots.move_to_end(slot)
        while len(self._slots) > _SLOTS:
            self._slots.popitem(last=False)


_NOT_KEPT: Final = object()
"""The fields of an element that is not remembered (neither a string nor a model)."""


def _fields(item: Any) -> Any:
    """What a remembered element is checked against: a string itself (immutable), a
    model's ``model_dump()`` (an independent copy of its fields)."""
    if type(item) is str:
        return item
    if isinstance(item, pydantic.BaseModel):
        return item.model_dump()
    return _NOT_KEPT


def _digest(entry: Any) -> str | None:
    """The attachment a scalar value form names, if any."""
    if type(entry) is str:
        return entry
    if type(entry) is dict:
        return entry.get("d")
    return None


class _Slot:
    """The elements remembered of a slot's list, in its order: each one's object, its
    fields (`_fields`), its stored form, and the attachments (digest -> bytes) those
    name. ``complete``: every element of the list is remembered."""

    __slots__ = ("_position", "attached", "complete", "entries", "fields", "items")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.fields: list[Any] = []
        self.entries: list[Any] = []
        self.attached: dict[str, bytes] = {}
        self.complete = True
        self._position: dict[int, int] | None = None

    def add(self, item: Any, fields: Any, entry: Any, blobs: Mapping[str, bytes]) -> None:
        digest = _digest(entry)
        data = blobs.get(digest) if digest is not None else None
        if fields is _NOT_KEPT or (digest is not None and data is None):
            self.complete = False  # (without its bytes an entry could not be sent again)
            return
        if digest is not None and data is not None:
            self.attached[digest] = data
        if self._position is not None:
            self._position[id(item)] = len(self.items)
        self.items.append(item)
        self.fields.append(fields)
        self.entries.append(entry)

    def find(self, item: Any) -> int | None:
        """Where ``item`` is remembered, if it is, its fields as they were then."""
        if self._position is None:
            self._position = dict(zip(map(id, self.items), range(len(self.items)), strict=True))
        at = self._position.get(id(item))
        if at is None or self.items[at] is not item:
            return None
        return at if type(item) is str or item.__dict__ == self.fields[at] else None

    def starts(self, values: list[Any]) -> bool:
        """Whether ``values`` begins with every element remembered, each as `find` would
        find it, checked in a few calls to C rather than a Python step per element: the
        same objects, their ``__dict__`` (a string has none: itself) equal to the fields
        remembered."""
        items = self.items
        return (
            self.complete
            and len(values) >= len(items)
            and all(map(operator.is_, values, items))
            and list(map(getattr, items, repeat("__dict__"), items)) == self.fields
        )

    def read_again(self, items: list[Any], entries: list[Any]) -> _Slot | None:
        """A read's list that begins with this one read again (the same stored forms, so
        the same values), as remembered: the fields of each element it begins with, new
        objects of the same classes whose fields equal those remembered, are those (a
        copy independent of them, as `_fields` would take), without a ``model_dump()``
        each. None if it does not begin so."""
        n = len(self.items)
        if not self.complete or len(items) < n or entries[:n] != self.entries:
            return None
        head = items[:n]
        if list(map(type, head)) != list(map(type, self.items)):
            return None
        if list(map(getattr, head, repeat("__dict__"), head)) != self.fields:
            return None
        again = _Slot()
        again.items = head
        again.fields = list(self.fields)
        again.entries = list(self.entries)
        again.attached = dict(self.attached)
        return again


def scalar_digests(entries: Iterable[Any]) -> set[str]:
    """The attachment digests of scalar value forms."""
    found: set[str] = set()
    for entry in entries:
        if isinstance(entry, str):
            found.add(entry)
        elif isinstance(entry, dict) and "d" in entry:
            found.add(entry["d"])
    return found


def load_scalar(
    serde: SerializerProtocol, entry: Any, blobs: Mapping[str, bytes], where: str
) -> Any:
    """The value of a scalar stored form (its attachment, if any, in ``blobs``)."""
    if isinstance(entry, str):
        type_tag, data = JSON_TYPE, blobs[entry]
    elif isinstance(entry, list):
        type_tag, data = JSON_TYPE, entry[0].encode()
    else:
        type_tag = check_type(entry["t"], where, writing=False)
        if "d" in entry:
            data = blobs[entry["d"]]
        else:
            try:
                data = base64.b64decode(entry["b"], validate=True)
            except (binascii.Error, ValueError) as exc:
                raise CorruptCheckpointError(where, f"bad base64 ({exc})") from None
    try:
        return serde.loads_typed((type_tag, data))
    except UnknownTypeError as exc:
        raise UnknownTypeError(where, exc.class_path, exc.reason) from None
    except CorruptCheckpointError as exc:
        raise CorruptCheckpointError(where, exc.reason) from None
    except PickleRefusedError:
        raise PickleRefusedError(where, type_tag) from None
    except UnsupportedSerializationError:
        raise UnsupportedSerializationError(where, type_tag) from None
    except SaverError:
        raise
    except Exception as exc:  # a foreign serde's own failure (a wrong key, ...)
        raise CorruptCheckpointError(where, f"{type(exc).__name__}: {exc}") from exc


def check_blob(digest: str, data: bytes, where: str) -> bytes:
    if not is_digest(digest) or digest_of(data) != digest:
        raise CorruptCheckpointError(where, f"attachment {digest} does not match its digest")
    return data
