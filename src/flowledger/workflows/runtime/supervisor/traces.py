"""The ``flowledger.segment`` span of each segment an owner executes (start, resume,
adoption): a child of the run's stored trace context, so all segments of a run, in any
process, read as one trace (`flowledger.observability.tracing`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol, TypeVar

from ....observability import tracing
from ...authoring.definition import Definition
from ...records.run import Run

__all__ = ["segment_span"]


@contextlib.contextmanager
def segment_span(kind: str, run: Run, definition: Definition) -> Iterator[Outcome]:
    """Yield what records the segment's outcome: pass it the run record after the segment
    (it is returned unchanged); its status is the span's ``flowledger.outcome``, or
    ``stopped`` if the owner stopped executing it (None), or the word passed instead."""
    if not tracing.ENABLED:
        yield _unchanged
        return
    attributes: dict[str, str | int | bool] = {
        "flowledger.run.id": run.id,
        "flowledger.graph_run.id": run.graph_run_id,
        "flowledger.definition.name": run.definition_name,
        "flowledger.definition.version": run.definition_version,
    }
    # a deployed definition names its deployment and revision (duck-typed: L3 is above)
    extra = getattr(definition, "trace_attributes", None)
    if callable(extra):
        attributes.update(extra())
    with tracing.segment(kind, attributes, run.trace_parent) as span:
        span.set_attribute("flowledger.outcome", "stopped")

        def outcome(after: R) -> R:
            if isinstance(after, Run):
                span.set_attribute("flowledger.outcome", str(after.status))
            elif isinstance(after, str):
                span.set_attribute("flowledger.outcome", after)
            return after

        yield outcome


R = TypeVar("R", Run, str, None, Run | None)


class Outcome(Protocol):
    """Record the run after the segment (or a word for how it ended); return it as is."""

    def __call__(self, after: R, /) -> R: ...


def _unchanged(after: R) -> R:
    return after
