"""How an MCP server that owns its session lets go of it: at the next step boundary.

The server's runs finish the steps in flight (`Supervisor.stop`), and each run left
unfinished is named on stderr (stdout carries the protocol) with the command that
continues it; the caller then shuts the supervisor down, releasing the session lease.
A server that does not own its session (read-only, or a front door) has nothing to do.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from ..workflows.runtime.ownership import left_message
from ..workflows.runtime.session import WorkflowSession

__all__ = ["leave_session"]


async def leave_session(
    session: WorkflowSession,
    flags: Sequence[str] = (),
    *,
    write: Callable[[str], object] | None = None,
) -> None:
    """Stop ``session``'s executions at their next step boundary and report what is left
    (``flags``: the options to repeat in the command that continues a run) through
    ``write`` (default: stderr)."""
    supervisor = session.supervisor
    if not supervisor.active:
        return
    if write is None:
        write = sys.stderr.write  # looked up now: stderr may have been replaced
    if not supervisor.idle:
        write("flowledger mcp: stopping; the runs in flight stop at their next step boundary\n")
    for run in await supervisor.stop():
        write(left_message(run, flags) + "\n")
