"""Decoding JSON text that comes from outside: the one place duplicate keys are refused.

Python's `json` keeps the last of two equal keys, so ``{"n": 3, "n": 4}`` silently
means ``n = 4``; another reader of the same bytes may take the first. flowledger
refuses such a document wherever it enters (CLI options and files, MCP stdio lines
and HTTP bodies, tool arguments, stored documents), and says where: `decode_json`
raises `DuplicateKeyError`, whose ``pointer`` is the RFC 6901 JSON pointer of the
repeated key (``/params/arguments/n``).

The pointer costs nothing on the good path: objects are built as usual, the ones that
held a repeated key are remembered, and only when there is one is the decoded value
walked (in document order, outermost first) to find where it sits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final

__all__ = ["DuplicateKeyError", "decode_json", "json_pointer"]

#: Longest pointer an error message quotes (the attribute keeps it whole).
_MESSAGE_POINTER: Final = 200


class DuplicateKeyError(ValueError):
    """A JSON object holds the same key twice. ``pointer`` locates the key (RFC 6901)."""

    def __init__(self, pointer: str, key: str) -> None:
        self.pointer = pointer
        self.key = key
        shown = pointer if len(pointer) <= _MESSAGE_POINTER else pointer[:_MESSAGE_POINTER] + "..."
        name = key if len(key) <= _MESSAGE_POINTER else key[:_MESSAGE_POINTER] + "..."
        super().__init__(f"duplicate key {name!r} at {shown}")


def json_pointer(path: Sequence[str | int]) -> str:
    """The RFC 6901 pointer of ``path`` (object keys and array indexes); ``""`` is the root."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def decode_json(
    text: str | bytes,
    *,
    parse_float: Callable[[str], Any] | None = None,
    parse_constant: Callable[[str], Any] | None = None,
    on_object: Callable[[int], None] | None = None,
) -> Any:
    """Decode exactly one JSON value from ``text`` like `json.loads`, refusing duplicate
    object keys with `DuplicateKeyError`.

    ``parse_float`` and ``parse_constant`` are those of `json.loads`; ``on_object`` is
    called with the number of members of every object as it is decoded (to bound key
    counts). Other malformed text raises what `json.loads` raises (`json.JSONDecodeError`
    and `ValueError`, `RecursionError` for absurd nesting)."""
    repeated: list[tuple[dict[str, Any], str]] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if on_object is not None:
            on_object(len(pairs))
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    repeated.append((obj, key))
                    break
                seen.add(key)
        return obj

    value = json.loads(
        text,
        object_pairs_hook=pairs_hook,
        parse_float=parse_float,
        parse_constant=parse_constant,
    )
    if repeated:
        raise _locate(value, repeated)
    return value


def _locate(value: Any, repeated: list[tuple[dict[str, Any], str]]) -> DuplicateKeyError:
    """The error for the first object (in document order) of ``repeated`` inside ``value``.

    One is always reachable: an object that dropped a branch holding another is itself
    in ``repeated``, and closer to the root."""
    keys = {id(obj): key for obj, key in repeated}
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            key = keys.get(id(node))
            if key is not None:
                return DuplicateKeyError(json_pointer((*path, key)), key)
            stack.extend((item, (*path, name)) for name, item in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((item, (*path, index)) for index, item in reversed(list(enumerate(node))))
    _, key = repeated[0]  # unreachable by the argument above; kept total
    return DuplicateKeyError(json_pointer((key,)), key)
