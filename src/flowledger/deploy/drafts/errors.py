"""The draft error family: one stable ``code`` per kind (each has an `explain` entry)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..artifacts.errors import ArtifactIssue

__all__ = [
    "CapabilityMissingError",
    "DraftConflictError",
    "DraftContractError",
    "DraftCorruptError",
    "DraftError",
    "DraftExistsError",
    "DraftInvalidError",
    "DraftLimitError",
    "DraftNotFoundError",
    "DraftUnstorableError",
    "EditInvalidError",
    "PatchError",
    "PatchInvalidError",
    "PatchTestFailedError",
    "ProbeMissingError",
]


class DraftError(Exception):
    """Base class of the draft errors; ``code`` is stable, the message says what and where."""

    code: ClassVar[str] = "draft_error"


class DraftNotFoundError(DraftError, LookupError):
    code = "draft_missing"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no draft {name!r} in this session (draft_list shows them)")


class DraftExistsError(DraftError):
    code = "draft_exists"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"draft {name!r} already exists: edit it, or delete it first")


class DraftLimitError(DraftError):
    code = "draft_limit"

    def __init__(self, limit: int) -> None:
        super().__init__(f"this session already has {limit} drafts, the limit; delete one first")


class DraftConflictError(DraftError):
    """The edit named a revision that is not the draft's current one; nothing was applied."""

    code = "revision_conflict"

    def __init__(self, name: str, given: int, current: int | None) -> None:
        self.name = name
        self.given = given
        self.current = current
        now = f"it is at revision {current}" if current is not None else "it changed meanwhile"
        super().__init__(
            f"draft {name!r}: revision {given} is stale ({now}); nothing was applied: "
            "read the draft again (draft_get) and redo the edit on its current revision"
        )


class PatchError(DraftError):
    """A JSON Patch operation that cannot be applied; ``index`` and ``path`` name it."""

    code = "patch_failed"

    def __init__(self, index: int, path: str, reason: str) -> None:
        self.index = index
        self.path = path
        self.reason = reason
        where = f"operation {index} (path {path!r})" if path else f"operation {index}"
        super().__init__(f"{where}: {reason}; nothing was applied")


class PatchInvalidError(PatchError):
    """An operation that is not RFC 6902 (unknown ``op``, a missing member, a bad pointer)."""

    code = "patch_invalid"


class PatchTestFailedError(PatchError):
    """A ``test`` operation found another value."""

    code = "patch_test_failed"


class DraftUnstorableError(DraftError):
    """The edited document cannot be stored (too large, too deep, not JSON data)."""

    code = "draft_unstorable"

    def __init__(self, place: str, reason: str) -> None:
        self.place = place
        super().__init__(f"the edited document cannot be kept: {place}: {reason}; nothing applied")


class EditInvalidError(DraftError):
    """A focused edit that does not fit the document (a node that is not there, ...)."""

    code = "edit_invalid"

    def __init__(self, edit: str, message: str) -> None:
        self.edit = edit
        super().__init__(f"{edit}: {message}; nothing was applied")


class ProbeMissingError(DraftError):
    """A capability's source has no successful probe to read its tools from."""

    code = "probe_missing"

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        super().__init__(
            f"source {source!r} {reason}: the operator probes it (flowledger source probe "
            f"{source}, or source_probe {{source: {source}}}) before its tools can be used"
        )


class CapabilityMissingError(DraftError, LookupError):
    code = "capability_missing"

    def __init__(self, source: str, tool: str, names: Sequence[str]) -> None:
        self.source = source
        self.tool = tool
        listed = ", ".join(sorted(names)[:20]) or "none"
        super().__init__(
            f"source {source!r} has no tool {tool!r} in its last probe (it lists: {listed})"
        )


class DraftInvalidError(DraftError, ValueError):
    """Publishing a draft that does not validate; ``issues`` says every problem."""

    code = "draft_invalid"

    def __init__(self, name: str, issues: Sequence[ArtifactIssue]) -> None:
        self.name = name
        self.issues = tuple(issues)
        shown = "; ".join(str(issue) for issue in self.issues[:5])
        more = len(self.issues) - 5
        super().__init__(
            f"draft {name!r} is not a valid artifact, nothing was saved: {shown}"
            + (f" (and {more} more)" if more > 0 else "")
        )

    def to_json(self) -> list[dict[str, Any]]:
        return [issue.to_json() for issue in self.issues]


class DraftContractError(DraftError, ValueError):
    """Publishing a draft the catalog's checks refuse (`flowledger.deploy.drafts.contracts`:
    an unbound or unseen source, a tool its probe does not list, arguments the tool does
    not accept, a result path it does not declare, a contract changed since the draft was
    checked); ``diagnostics`` are all of them. Nothing was saved."""

    code = "draft_contract"

    def __init__(self, name: str, diagnostics: Sequence[dict[str, Any]]) -> None:
        self.name = name
        self.diagnostics = tuple(diagnostics)
        shown = "; ".join(
            f"{item['place']}: [{item['code']}] {item['message']}" for item in self.diagnostics
        )
        super().__init__(
            f"draft {name!r} does not pass the checks against the catalog, nothing was saved "
            f"({len(self.diagnostics)} diagnostic(s), each with next actions in draft_validate): "
            f"{shown}"
        )

    def to_json(self) -> list[dict[str, Any]]:
        return [dict(item) for item in self.diagnostics]


class DraftCorruptError(DraftError):
    code = "draft_corrupt"

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        super().__init__(f"stored draft {key}: {reason}")
