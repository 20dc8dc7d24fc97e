"""Per-vertex policies: retry and error routing. They belong to the binding, not the task."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ErrorRoute", "Retry"]


@dataclass(frozen=True, slots=True)
class Retry:
    """Retry a failing task up to ``attempts`` executions in total.

    ``backoff`` is a delay in seconds, or ``backoff(next_attempt) -> seconds``.
    ``retryable(error) -> bool`` decides whether an error is worth another
    attempt (default: every error). An interrupt is never retried. The
    vertex's ``timeout`` spans all attempts.
    """

    attempts: int = 3
    backoff: float | Callable[[int], float] = 0.0
    retryable: Callable[[BaseException], bool] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or isinstance(self.attempts, bool):
            raise TypeError("Retry.attempts must be an int")
        if self.attempts < 1:
            raise ValueError(f"Retry.attempts must be >= 1, not {self.attempts}")
        if isinstance(self.backoff, bool) or not (
            callable(self.backoff) or isinstance(self.backoff, int | float)
        ):
            raise TypeError("Retry.backoff must be seconds or a function of the attempt")
        if not callable(self.backoff) and not (math.isfinite(self.backoff) and self.backoff >= 0):
            raise ValueError(f"Retry.backoff must be a finite number >= 0, not {self.backoff}")


@dataclass(frozen=True, slots=True)
class ErrorRoute:
    """On final failure, fold the error into the state and continue at ``handler``.

    ``record(state, error)`` works like a reducer: it may mutate the state copy
    it receives, return a partial update (a mapping) or a new state. If it
    fails, the vertex pauses as errored instead (no recursive routing).
    """

    handler: str
    record: Callable[[Any, BaseException], Any] | None = None
