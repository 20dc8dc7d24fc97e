"""A field-by-field difference of two JSON states, for people to read.

Objects are compared key by key and arrays index by index, down to the values that
differ, so a change deep in a nested document names its path (``/draft/sections/2``)
instead of showing the whole field twice. No JSON Patch library: a reader needs the
changed paths with both values, not operations to apply (RFC 6902 ``replace`` would not
keep the old value).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["Change", "diff"]

Kind = Literal["added", "removed", "changed"]
_ABSENT: Final = object()
_MAX_CHANGES: Final = 500  # a page shows at most this many; the rest is counted


@dataclass(frozen=True, slots=True)
class Change:
    """One difference: ``path`` is a JSON Pointer (RFC 6901) into the state."""

    path: str
    kind: Kind
    old: Any = None
    new: Any = None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _walk(path: str, old: Any, new: Any) -> Iterator[Change]:
    if old is _ABSENT:
        yield Change(path, "added", new=new)
    elif new is _ABSENT:
        yield Change(path, "removed", old=old)
    elif isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            yield from _walk(f"{path}/{_escape(key)}", old.get(key, _ABSENT), new.get(key, _ABSENT))
    elif isinstance(old, list) and isinstance(new, list):
        for index in range(max(len(old), len(new))):
            yield from _walk(
                f"{path}/{index}",
                old[index] if index < len(old) else _ABSENT,
                new[index] if index < len(new) else _ABSENT,
            )
    elif type(old) is not type(new) or old != new:  # 1 and True differ, 1 and 1.0 too
        yield Change(path, "changed", old=old, new=new)


def diff(old: dict[str, Any] | None, new: dict[str, Any]) -> tuple[list[Change], int]:
    """The changes from ``old`` to ``new`` in path order (``old`` None, the first
    revision: every field of ``new`` is added), at most `_MAX_CHANGES` of them, and how
    many there are in all."""
    changes: list[Change] = []
    count = 0
    for change in _walk("", {} if old is None else old, new):
        count += 1
        if len(changes) < _MAX_CHANGES:
            changes.append(change)
    return changes, count
