"""The artifact error family.

Every error says *where* (``place``: a path into the artifact such as
``nodes.decide.cases[0].when``, or ``$`` for the whole document), *what*
(``code``: a stable snake_case word for programs; the message for people) and
how to repair it (``hint``). A validation collects every problem it can find
(`ArtifactValidationError.issues`, bounded by `MAX_ISSUES`) rather than stopping
at the first, so an author fixes a document in one round.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ...workflows.authoring.guidance import next_actions

__all__ = [
    "MAX_ISSUES",
    "ROOT_PLACE",
    "ArtifactConflictError",
    "ArtifactCorruptError",
    "ArtifactError",
    "ArtifactInUseError",
    "ArtifactIssue",
    "ArtifactNotFoundError",
    "ArtifactValidationError",
    "ExpressionError",
    "ExpressionLimitError",
    "choices",
    "place_of",
]

MAX_ISSUES: Final = 100
ROOT_PLACE: Final = "$"

_PLAIN_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def place_of(*segments: str | int) -> str:
    """The place of a path: keys joined by ``.``, list indexes as ``[i]``, and keys that
    are not plain identifiers quoted (``arguments["a.b"]``). No segments: ``$``."""
    text = ""
    for segment in segments:
        if isinstance(segment, int):
            text += f"[{segment}]"
        elif _PLAIN_KEY.fullmatch(segment):
            text += f".{segment}" if text else segment
        else:
            quoted = segment.replace("\\", "\\\\").replace('"', '\\"')
            text += f'["{quoted}"]'
    return text or ROOT_PLACE


@dataclass(frozen=True, slots=True)
class ArtifactIssue:
    """One problem found in an artifact."""

    place: str
    code: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        text = f"{self.place}: {self.message}"
        return f"{text} (hint: {self.hint})" if self.hint else text

    def to_json(self, **context: str) -> dict[str, Any]:
        """``{place, code, message, hint, next_actions}``; ``context`` is what is known of
        the document (`guidance.CONTEXT_KEYS`: its artifact and version, a draft) for the
        next actions."""
        return {
            "place": self.place,
            "code": self.code,
            "message": self.message,
            "hint": self.hint,
            "next_actions": next_actions(self.code, context),
        }


class ArtifactError(Exception):
    """Base class of every artifact error: ``place``, ``code``, ``hint``."""

    place: str
    code: str
    hint: str

    def __init__(self, place: str, code: str, message: str, hint: str = "") -> None:
        self.place = place
        self.code = code
        self.hint = hint
        super().__init__(f"{place}: {message}" + (f" (hint: {hint})" if hint else ""))


class ArtifactValidationError(ArtifactError, ValueError):
    """An artifact was refused; ``issues`` lists every problem found (at most
    `MAX_ISSUES`; ``truncated`` says whether there were more). Nothing was written."""

    def __init__(self, issues: Iterable[ArtifactIssue], *, truncated: bool = False) -> None:
        found = tuple(issues)
        if not found:
            raise ValueError("ArtifactValidationError needs at least one issue")
        self.issues: tuple[ArtifactIssue, ...] = found[:MAX_ISSUES]
        self.truncated = truncated or len(found) > MAX_ISSUES
        first = self.issues[0]
        self.place = first.place
        self.code = first.code
        self.hint = first.hint
        more = len(self.issues) - 1
        suffix = f" (and {more} more issue{'s' if more != 1 else ''})" if more else ""
        Exception.__init__(self, f"invalid artifact: {first}{suffix}")

    def to_json(self, **context: str) -> list[dict[str, Any]]:
        return [issue.to_json(**context) for issue in self.issues]


class ArtifactConflictError(ArtifactError):
    """Saving different bytes under an existing name and version (artifacts are immutable)."""

    def __init__(
        self,
        name: str,
        version: str,
        stored_digest: str,
        new_digest: str,
        *,
        deleted: bool = False,
        message: str = "",
    ) -> None:
        self.name = name
        self.version = version
        self.stored_digest = stored_digest
        self.new_digest = new_digest
        self.deleted = deleted
        if not message:
            message = (
                f"{name}@{version} was deleted; a version is never reused"
                if deleted
                else f"{name}@{version} is already saved with other content "
                f"(sha256 {stored_digest[:12]}..., this one {new_digest[:12]}...)"
            )
        super().__init__(
            "version",
            "artifact_conflict",
            message,
            "artifacts are immutable: save the change under a new version",
        )

    @classmethod
    def contended(cls, name: str, version: str) -> ArtifactConflictError:
        """Too many concurrent changes to one version record to finish; try again."""
        return cls(name, version, "", "", message=f"{name}@{version} is changing concurrently")


class ArtifactNotFoundError(ArtifactError, LookupError):
    """No artifact with that name and version in this session."""

    def __init__(self, name: str, version: str, place: str = ROOT_PLACE) -> None:
        self.name = name
        self.version = version
        super().__init__(
            place,
            "artifact_missing",
            f"no saved artifact {name}@{version}",
            "save it first (children are saved before the artifacts that use them)",
        )


class ArtifactInUseError(ArtifactError):
    """A delete refused because deployments, runs or other artifacts still refer to it."""

    def __init__(self, name: str, version: str, referrers: Sequence[str], more: bool) -> None:
        self.name = name
        self.version = version
        self.referrers = tuple(referrers)
        shown = ", ".join(self.referrers) + (", ..." if more else "")
        super().__init__(
            ROOT_PLACE,
            "artifact_in_use",
            f"{name}@{version} is still referred to by {shown}",
            "delete or unpin what refers to it first",
        )


class ArtifactCorruptError(ArtifactError):
    """Stored artifact data failed verification (digest, size, or decoding)."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        super().__init__(ROOT_PLACE, "artifact_corrupt", f"stored artifact {key}: {reason}")


class ExpressionError(ArtifactError):
    """Evaluating a validated expression failed at run time (a type error inside a JMESPath
    function, a non-finite number; `ExpressionLimitError`: a limit of the evaluation)."""

    def __init__(
        self,
        place: str,
        message: str,
        *,
        code: str = "expression_failed",
        hint: str = "check the types the expression reads; JMESPath functions refuse wrong types",
    ) -> None:
        super().__init__(place, code, message, hint)


class ExpressionLimitError(ExpressionError):
    """An evaluation was stopped at a limit (docs/deploy.md, "Limits"): ``limit`` is
    ``steps`` (`MAX_EVALUATION_STEPS`), ``values`` (`MAX_BUILT_VALUES`; for the result,
    `MAX_RESULT_VALUES`) or ``bytes`` (`MAX_VALUE_BYTES`), ``bound`` its value, ``node``
    what the evaluation was at (such as ``join()``, ``a multi-select list `[...]```, or
    ``the result``) and ``expression`` the expression's text (empty when the result of a
    template of several expressions was over)."""

    def __init__(self, place: str, limit: str, bound: int, node: str, expression: str) -> None:
        self.limit = limit
        self.bound = bound
        self.node = node
        self.expression = expression
        what = {
            "steps": f"the evaluation took more than {bound:,} steps",
            "values": f"a value would hold more than {bound:,} JSON values",
            "bytes": f"a value would hold more than {bound:,} bytes of text",
        }.get(limit, f"the {limit} limit of {bound:,} was passed")
        within = f" of `{_clipped(expression)}`" if expression else ""
        super().__init__(
            place,
            f"evaluation stopped at {node}{within}: {what}",
            code="expression_limit",
            hint="an expression may not build large values or do much work; split the work "
            "over several nodes, or have a tool do it",
        )


def _clipped(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def choices(prefix: str, names: Iterable[str]) -> str:
    """A hint listing ``names`` (sorted, at most 12 shown) after ``prefix``."""
    shown = sorted(names)
    if not shown:
        return f"{prefix}: none"
    listed = ", ".join(shown[:12]) + (", ..." if len(shown) > 12 else "")
    return f"{prefix}: {listed}"
