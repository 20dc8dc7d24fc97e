"""Storage names: the one grammar every key, blob and ledger name obeys.

A name is 1..512 bytes: one or more segments joined by single ``/``. Each
segment starts with ``[a-z0-9]`` and continues with ``[a-z0-9_.-]``. So a name
is canonical by construction: no upper case, no ``.``/``..`` segments, no
leading, trailing or doubled slash. Prefix filters (``keys``, ``list``,
``names``) are plain string prefixes and are not validated.
"""

from __future__ import annotations

import re
from typing import Final, Literal

__all__ = ["MAX_NAME_BYTES", "InvalidNameError", "NameRule", "validate_name"]

MAX_NAME_BYTES: Final = 512

NameRule = Literal["empty", "too long", "empty segment", "bad first byte", "illegal byte"]

_FIRST: Final = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789")
_REST: Final = _FIRST | frozenset(b"_.-")
_VALID: Final = re.compile(r"[a-z0-9][a-z0-9_.-]*(?:/[a-z0-9][a-z0-9_.-]*)*")

# Names that passed the grammar, remembered so that a name used again (a log appended to
# every step, a key read and written) costs a set lookup instead of a regex match. Only
# exact ``str`` objects go in and are looked up: a subclass could compare equal to a valid
# name without being one. Bounded: emptied when full (only speed depends on it).
_SEEN: Final[set[str]] = set()
_SEEN_MAX: Final = 4096


class InvalidNameError(ValueError):
    """A storage name broke one of the grammar's rules; nothing was read or written."""

    def __init__(self, name: object, rule: NameRule) -> None:
        self.name = name
        self.rule: NameRule = rule
        super().__init__(f"invalid storage name {name!r}: {rule}")


def validate_name(name: object) -> str:
    """Return ``name`` unchanged if it is a valid storage name, else raise `InvalidNameError`."""
    if type(name) is str and name in _SEEN:
        return name
    if isinstance(name, str) and len(name) <= MAX_NAME_BYTES and _VALID.fullmatch(name):
        # The common case, in one C call; the rest finds which rule failed.
        if type(name) is str:
            if len(_SEEN) >= _SEEN_MAX:
                _SEEN.clear()
            _SEEN.add(name)
        return name
    if not isinstance(name, str):
        raise InvalidNameError(name, "illegal byte")
    if not name:
        raise InvalidNameError(name, "empty")
    try:
        raw = name.encode("ascii")
    except UnicodeEncodeError:
        if len(name.encode("utf-8")) > MAX_NAME_BYTES:
            raise InvalidNameError(name, "too long") from None
        raise InvalidNameError(name, "illegal byte") from None
    if len(raw) > MAX_NAME_BYTES:
        raise InvalidNameError(name, "too long")
    for segment in raw.split(b"/"):
        if not segment:
            raise InvalidNameError(name, "empty segment")
        if segment[0] not in _FIRST:
            raise InvalidNameError(name, "bad first byte")
        if any(byte not in _REST for byte in segment[1:]):
            raise InvalidNameError(name, "illegal byte")
    return name
