"""The failure kinds of a tool node and the table of which of them may be retried.

A tool call that does not produce a usable result fails with exactly one *kind*:

* ``tool_error``: the tool answered with an error result (``isError``), or the server
  refused the request before running it (a JSON-RPC parse, request, method or params
  error); the call ended;
* ``invalid_result``: the tool answered with a result that breaks its declared output
  schema (or the protocol); the call took effect;
* ``timeout``: no answer within the node's ``timeout``; the server was asked to cancel,
  whether the call took effect is unknown;
* ``unavailable``: the source could not be reached, or the connection was lost *before
  the request was written* to the transport: known not executed;
* ``outcome_unknown``: the connection was lost (or the owner stopped, or the server
  answered with an internal JSON-RPC error) after the request may have reached the tool.

`RETRY_TABLE` is the rule validation enforces (docs/deploy.md, "Failures"): a kind may
appear in ``retry.on`` when the condition holds for the tool it calls. Conditions that
need the tool's annotations (``read_only``/``idempotent``) are checked where tool infos
are known: when a deployment starts a run (`check_start`), and again at every call.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "DEFAULT_RETRY_ON",
    "FAILURE_KINDS",
    "MAX_ATTEMPTS",
    "MAX_BACKOFF_FACTOR",
    "MAX_BACKOFF_SECONDS",
    "NEEDS_REPEATABLE",
    "RETRY_TABLE",
    "FailureKind",
    "may_retry",
    "routed_by_default",
]

FailureKind = Literal["tool_error", "invalid_result", "timeout", "unavailable", "outcome_unknown"]
FAILURE_KINDS: Final[tuple[str, ...]] = (
    "tool_error",
    "invalid_result",
    "timeout",
    "unavailable",
    "outcome_unknown",
)
MAX_ATTEMPTS: Final = 10
"""A node makes at most this many attempts of one call (the first one included)."""
MAX_BACKOFF_SECONDS: Final = 600.0
MAX_BACKOFF_FACTOR: Final = 10.0
DEFAULT_RETRY_ON: Final[tuple[str, ...]] = ("unavailable",)

# kind -> when it may be retried (the documentation's words)
RETRY_TABLE: Final[dict[str, str]] = {
    "unavailable": "always (the call is known not to have been made)",
    "tool_error": "always, when listed (the tool answered; listing it says the error is transient)",
    "timeout": "only for a tool annotated read-only or idempotent, or declared idempotent "
    "by the deployment",
    "invalid_result": "only for a tool annotated read-only or idempotent, or declared "
    "idempotent by the deployment",
    "outcome_unknown": "only for a tool annotated read-only or idempotent, or declared "
    "idempotent by the deployment",
}
NEEDS_REPEATABLE: Final = frozenset({"timeout", "invalid_result", "outcome_unknown"})


def may_retry(kind: str, repeatable: bool) -> bool:
    """Whether the table lets a failure of ``kind`` be retried, for a tool that is (or
    is not) read-only or idempotent."""
    return kind in FAILURE_KINDS and (kind not in NEEDS_REPEATABLE or repeatable)


def routed_by_default(kind: str, repeatable: bool) -> bool:
    """Whether ``on_error`` without ``kinds`` routes a failure of ``kind``: every kind,
    except ``outcome_unknown`` of a tool that is not read-only or idempotent (an unknown
    side effect is handled only where the author names it)."""
    return kind in FAILURE_KINDS and (kind != "outcome_unknown" or repeatable)
