"""Structure problems: pydantic's validation errors as issues with document places."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError

from .errors import ArtifactIssue, place_of
from .model import FOREACH_BODY_KINDS, NODE_KINDS

__all__ = ["structure_issues"]


_HINTS: Final[Mapping[str, str]] = {
    "missing": "add it",
    "extra_forbidden": "remove it, or check its spelling",
    "union_tag_invalid": "kind is one of " + ", ".join(NODE_KINDS),
    "union_tag_not_found": "add `kind`: one of " + ", ".join(NODE_KINDS),
    "literal_error": "",
}


def structure_issues(exc: ValidationError, document: Any) -> list[ArtifactIssue]:
    issues: list[ArtifactIssue] = []
    union_members: dict[str, int] = {}  # place -> index of its merged issue
    for error in exc.errors(include_url=False):
        path, key_error, union = _place_path(error["loc"], document)
        kind = error["type"]
        message = error["msg"]
        if key_error:
            message = f"the key {path[-1]!r} is not valid: {message}" if path else message
        elif kind == "extra_forbidden":
            message = "unknown field"
        elif kind == "missing":
            message = "this field is required"
        place = place_of(*path)
        if union and place in union_members:  # one issue for all members of a union
            merged = issues[union_members[place]]
            issues[union_members[place]] = ArtifactIssue(
                place, merged.code, f"{merged.message}, or {message[0].lower()}{message[1:]}"
            )
            continue
        if union:
            union_members[place] = len(issues)
        hint = _HINTS.get(kind, "")
        if kind.startswith("union_tag_") and path[-1:] == ["body"]:  # a foreach's body
            hint = "a body's kind is one of " + ", ".join(FOREACH_BODY_KINDS)
        issues.append(ArtifactIssue(place, _code(kind, key_error), message, hint))
    return issues


def _place_path(loc: tuple[str | int, ...], document: Any) -> tuple[list[str | int], bool, bool]:
    """The document path of a pydantic error location: the discriminator tag after a node
    id (at any depth) and the member names of other unions are not places. Returns the
    path, whether the error is about a key, and whether it came from a union member."""
    path: list[str | int] = []
    key_error = union = False
    current: Any = document
    for index, part in enumerate(loc):
        if part == "[key]":
            key_error = True
            continue
        if index >= 2 and loc[index - 2] == "nodes" and part in NODE_KINDS:
            continue  # a node's kind tag (also of a node inside a sequence body)
        present = (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        )
        if present:
            current = current[part]
        elif index < len(loc) - 1 or not isinstance(current, dict):
            union = True  # a union member's name (such as `str`), not a document key
            continue
        path.append(part)
    return path, key_error, union


def _code(kind: str, key_error: bool) -> str:
    if key_error:
        return "bad_key"
    return {
        "missing": "field_missing",
        "extra_forbidden": "field_unknown",
        "union_tag_invalid": "bad_kind",
        "union_tag_not_found": "bad_kind",
        "string_pattern_mismatch": "bad_name",
    }.get(kind, "bad_value")
