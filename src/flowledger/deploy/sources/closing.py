"""Closing a run's source pool off the run's path (`close_soon`).

Closing a stdio session stops its server: the SDK closes the server's stdin and waits
for it to exit (up to 2 s, then terminates it) - for a Python server on a busy machine,
a second or more. A segment that has paused or finished needs nothing more from its
sources, so it hands its pool to `close_soon` and its caller - a resume, the run's next
record - does not wait for the servers to exit. The close is a task of the running
loop, kept here until it is done (a failure is logged: the servers were stopped or
terminated anyway); `drain` waits for every close under way. A loop that ends first
cancels the close: the server's stdin is then closed with this process's end of the
pipe, and a server that exits at end of input (as the protocol asks) exits.
"""

from __future__ import annotations

import asyncio
import logging

from .pool import SourcePool

__all__ = ["close_soon", "drain"]

log = logging.getLogger(__name__)

_closing: set[asyncio.Task[None]] = set()


def close_soon(pool: SourcePool) -> None:
    """Close every session of ``pool`` in a task of its own (see the module docs)."""
    task = asyncio.get_running_loop().create_task(_close(pool), name="close source pool")
    _closing.add(task)
    task.add_done_callback(_closing.discard)


async def _close(pool: SourcePool) -> None:
    try:
        await pool.close()
    except Exception as exc:
        log.warning("closing the sources of a run failed: %s", exc)


async def drain() -> None:
    """Wait until every close started by `close_soon` on this loop is done."""
    loop = asyncio.get_running_loop()
    while mine := [task for task in _closing if task.get_loop() is loop]:
        await asyncio.gather(*mine, return_exceptions=True)
