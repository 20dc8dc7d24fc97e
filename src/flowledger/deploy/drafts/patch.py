"""Applying an RFC 6902 JSON Patch to a draft's document, all or nothing.

The operations are applied one by one (with the `jsonpatch` library) to a copy, so a
failing one is named by its index and path and the document given is never changed.
A document that grows past `MAX_DRAFT_BYTES` (checked after every ``copy``, which can
double it, and at the end) or stops being storable JSON data is refused the same way.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any, Final

import jsonpatch  # type: ignore[import-untyped, unused-ignore]
import jsonpointer  # type: ignore[import-untyped, unused-ignore]

from ..artifacts.document import check_json_data
from .errors import (
    DraftUnstorableError,
    PatchError,
    PatchInvalidError,
    PatchTestFailedError,
)

__all__ = ["MAX_DRAFT_BYTES", "MAX_OPERATIONS", "apply_patch", "check_storable", "encoded_size"]

MAX_OPERATIONS: Final = 1000
MAX_DRAFT_BYTES: Final = 512 << 10  # compact JSON of the document; a KV value holds 1 MiB

_MEMBERS: Final[dict[str, tuple[str, ...]]] = {
    "add": ("path", "value"),
    "remove": ("path",),
    "replace": ("path", "value"),
    "move": ("from", "path"),
    "copy": ("from", "path"),
    "test": ("path", "value"),
}


def encoded_size(document: Any) -> int:
    return len(json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode())


def check_storable(document: Any) -> None:
    """`DraftUnstorableError` unless ``document`` is JSON data a draft can keep."""
    issues = check_json_data(document)
    if issues:
        raise DraftUnstorableError(issues[0].place, issues[0].message)
    size = encoded_size(document)
    if size > MAX_DRAFT_BYTES:
        raise DraftUnstorableError("$", f"{size} bytes; the limit is {MAX_DRAFT_BYTES}")


def _check_operation(index: int, operation: Any) -> str:
    if not isinstance(operation, dict):
        raise PatchInvalidError(index, "", "an operation is a JSON object")
    op = operation.get("op")
    if op not in _MEMBERS:
        raise PatchInvalidError(
            index, "", f"op {op!r} is not one of add, remove, replace, move, copy, test"
        )
    path = operation.get("path")
    for member in _MEMBERS[op]:
        if member not in operation:
            raise PatchInvalidError(
                index, path if isinstance(path, str) else "", f"{op} needs {member!r}"
            )
    for member in ("path", "from"):
        if member in _MEMBERS[op]:
            pointer = operation[member]
            if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
                raise PatchInvalidError(
                    index,
                    path if isinstance(path, str) else "",
                    f"{member!r} must be a JSON Pointer ('' or starting with '/')",
                )
    result: str = operation["path"]
    return result


def apply_patch(document: Any, operations: Sequence[Any]) -> Any:
    """The document after ``operations`` (RFC 6902); ``document`` is left unchanged.
    `PatchInvalidError`, `PatchError` (``patch_failed``), `PatchTestFailedError` and
    `DraftUnstorableError` name what failed; nothing of the patch is kept then."""
    if not isinstance(operations, list | tuple):
        raise PatchInvalidError(0, "", "a patch is a list of operations")
    if len(operations) > MAX_OPERATIONS:
        raise PatchInvalidError(
            MAX_OPERATIONS, "", f"{len(operations)} operations; the limit is {MAX_OPERATIONS}"
        )
    current = copy.deepcopy(document)
    for index, operation in enumerate(operations):
        path = _check_operation(index, operation)
        try:
            current = jsonpatch.JsonPatch([operation]).apply(current, in_place=True)
        except jsonpatch.JsonPatchTestFailed as exc:
            raise PatchTestFailedError(index, path, str(exc)) from None
        except jsonpatch.InvalidJsonPatch as exc:
            raise PatchInvalidError(index, path, str(exc)) from None
        except (jsonpatch.JsonPatchConflict, jsonpointer.JsonPointerException) as exc:
            raise PatchError(index, path, str(exc)) from None
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            # jsonpatch reaches into the document with plain indexing in a few places
            raise PatchError(index, path, f"{type(exc).__name__}: {exc}") from None
        if operation["op"] == "copy" and encoded_size(current) > MAX_DRAFT_BYTES:
            raise DraftUnstorableError(path or "$", f"over {MAX_DRAFT_BYTES} bytes after a copy")
    check_storable(current)
    return current
