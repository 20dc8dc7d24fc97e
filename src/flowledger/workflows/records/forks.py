"""Fork markers: which runs were forked from which, as keys retention reads.

The forking itself is `flowledger.workflows.runtime.forks.fork_run`.

Fork marker layout (retention relies on exactly this, to never prune a run that a fork
refers to)::

    sessions/<session id>/workflows/forks/<origin run id>/<fork run id>   -> b"" (empty)

one empty key per fork, written (create-only) before the fork's run record exists, so a
run record with ``forked_from`` always has its marker; a marker whose fork record is
missing (a crash between the two) names a fork that was never made.
"""

from __future__ import annotations

from typing import Final

from .run import run_key

__all__ = ["FORKS_SEGMENT", "fork_marker_key", "fork_markers_prefix"]

FORKS_SEGMENT: Final = "workflows/forks"


def fork_markers_prefix(session_id: str, origin_run_id: str) -> str:
    """``sessions/<sid>/workflows/forks/<origin run id>/``: the markers of one origin's forks."""
    run_key(session_id, origin_run_id)  # validates both IDs
    return f"sessions/{session_id}/{FORKS_SEGMENT}/{origin_run_id}/"


def fork_marker_key(session_id: str, origin_run_id: str, fork_run_id: str) -> str:
    """``sessions/<sid>/workflows/forks/<origin run id>/<fork run id>``."""
    run_key(session_id, fork_run_id)  # validates the fork's ID
    return fork_markers_prefix(session_id, origin_run_id) + fork_run_id
