"""What a tool node does when its call fails: classify, retry, route (docs/deploy.md,
"Failures").

`classify` names the failure kind of an exception a call raised (the source layer's
`SourceError.failure_kind`, an error result, an unknown outcome found after a restart);
an exception without a kind (an unknown tool, a changed contract, arguments that do not
validate) is no call failure: it fails the run as before. `FailurePolicy` is a node's
``retry`` and ``on_error`` read for one call: which failures it retries, after how long,
and which it routes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ...workflows.authoring.metadata import bound_text
from ..artifacts.failures import FAILURE_KINDS, may_retry, routed_by_default
from ..artifacts.model import Backoff, ToolNode
from ..sources.errors import SourceError
from .errors import NodeExecutionError, ToolErrorResult, ToolOutcomeUnknownError

__all__ = ["Failure", "FailurePolicy", "RecordedFailureError", "classify"]

MAX_FAILURE_MESSAGE_BYTES: Final = 300


def classify(error: BaseException) -> str | None:
    """The failure kind of ``error``, or ``None`` if it is not a failed call."""
    if isinstance(error, SourceError):
        return error.failure_kind
    if isinstance(error, ToolErrorResult):
        return "tool_error"
    if isinstance(error, ToolOutcomeUnknownError):
        return "outcome_unknown"
    if isinstance(error, RecordedFailureError):
        return error.failure.kind
    return None


@dataclass(frozen=True)
class Failure:
    """One failed attempt: what ``error`` holds in an ``on_error`` scope."""

    kind: str
    code: str
    message: str
    tool: str
    attempt: int

    @classmethod
    def of(cls, error: BaseException, kind: str, tool: str, attempt: int) -> Failure:
        code = str(getattr(error, "code", "") or type(error).__name__)
        message = bound_text(str(error) or type(error).__name__, MAX_FAILURE_MESSAGE_BYTES)
        return cls(kind, code, message, tool, attempt)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None, tool: str, attempt: int) -> Failure:
        """A failure as an intent record keeps it (a record without one: unknown)."""
        data = data or {}
        kind = data.get("kind")
        return cls(
            kind if isinstance(kind, str) else "",
            str(data.get("code") or "tool_failed"),
            str(data.get("message") or "the call failed"),
            tool,
            attempt,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "code": self.code,
            "message": self.message,
            "tool": self.tool,
            "attempt": self.attempt,
        }


class RecordedFailureError(NodeExecutionError):
    """An attempt's failure recorded by an earlier execution of the node (its owner
    stopped before the step committed), neither retried nor routed now."""

    code = "tool_call_failed"

    def __init__(self, node: str, failure: Failure) -> None:
        self.failure = failure
        super().__init__(
            node,
            f"attempt {failure.attempt} of {failure.tool} failed ({failure.kind or 'unknown'}, "
            f"{failure.code}): {failure.message}",
        )


@dataclass(frozen=True)
class FailurePolicy:
    """A tool node's ``retry`` and ``on_error``, for deciding about one failure."""

    attempts: int
    retry_on: frozenset[str]
    backoff: Backoff
    route_kinds: frozenset[str] | None  # None: the default (`routed_by_default`)
    routes: bool

    @classmethod
    def of(cls, node: ToolNode) -> FailurePolicy:
        retry = node.retry
        on_error = node.on_error
        return cls(
            attempts=retry.attempts if retry is not None else 1,
            retry_on=frozenset(retry.on) if retry is not None else frozenset(),
            backoff=retry.backoff if retry is not None else Backoff(),
            route_kinds=(
                frozenset(on_error.kinds)
                if on_error is not None and on_error.kinds is not None
                else None
            ),
            routes=on_error is not None,
        )

    def retries(self, failure: Failure, repeatable: bool) -> bool:
        """Whether ``failure`` is followed by another attempt: attempts remain, its kind
        is listed in ``retry.on``, and the table allows it for this tool (enforced here
        too, whatever validation saw)."""
        return (
            failure.attempt < self.attempts
            and failure.kind in self.retry_on
            and may_retry(failure.kind, repeatable)
        )

    def routes_kind(self, kind: str, repeatable: bool) -> bool:
        """Whether ``on_error`` routes a failure of ``kind``."""
        if not self.routes or kind not in FAILURE_KINDS:
            return False
        if self.route_kinds is not None:
            return kind in self.route_kinds
        return routed_by_default(kind, repeatable)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt ``attempt`` (2 and later)."""
        backoff = self.backoff
        if attempt < 2:
            return 0.0
        exponent = min(attempt - 2, 64)
        return float(min(backoff.max, backoff.initial * backoff.factor**exponent))
