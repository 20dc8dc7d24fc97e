"""Which checkpoint errors fail a run, and which only block it.

A run becomes ``failed`` only for definite problems (its input is missing, corrupt or
invalid; its checkpoint is missing, corrupt or belongs to another run), and, for a
definition with ``on_error="fail"``, when a task raises. The summary says which. A
checkpoint written by another graph than the registered one is never a failure: the run
keeps its status, its readiness is ``blocked`` (see `resumption`), and registering the old
graph lets it continue.
"""

from __future__ import annotations

from typing import Final

from .... import flow

DEFINITE: Final = (
    flow.CheckpointNotFoundError,
    flow.CheckpointDecodeError,
    flow.GraphRunMismatchError,
)


# A checkpoint of another graph blocks a run; it never fails it.
GRAPH_CHANGED: Final = (
    flow.GraphMismatchError,
    flow.GraphVersionMismatchError,
    flow.UnknownVertexError,
)


def definite(error: BaseException) -> bool:
    """A checkpoint problem that retrying cannot cure (missing, corrupt, another run's)."""
    if isinstance(error, DEFINITE):
        return True
    return isinstance(error, flow.StoreError) and isinstance(error.cause, flow.FlowError)


def failure_summary(error: BaseException) -> str:
    """Which definite checkpoint problem failed a run, for its status summary."""
    if isinstance(error, flow.CheckpointNotFoundError):
        return "workflow checkpoint missing"
    if isinstance(error, flow.GraphRunMismatchError):
        return "workflow checkpoint belongs to another run"
    return "workflow checkpoint corrupt"
