"""Expression evaluation off the event loop.

Evaluating a template is synchronous and CPU-bound, up to its limits (docs/deploy.md,
"Limits": a second or so at the work bound). On the event loop that serves every session
of a server, one tenant's heavy expression would hold up every other tenant's requests
for that long. `off_loop` runs it on a small pool of worker threads of its own instead:
not the loop's default executor, which synchronous vertex tasks use, so evaluations
cannot take all of its threads. The pool has `EVALUATION_THREADS` threads: evaluations
hold the GIL, so more threads would not evaluate faster, only leave the loop less of it.

A caller that stops waiting (a run cancelled meanwhile) leaves the evaluation to finish
on its thread; the limits bound how long that takes.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, ParamSpec, TypeVar

__all__ = ["EVALUATION_THREADS", "THREAD_NAME_PREFIX", "off_loop"]

EVALUATION_THREADS: Final = 2
THREAD_NAME_PREFIX: Final = "flowledger-evaluation"

P = ParamSpec("P")
T = TypeVar("T")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(EVALUATION_THREADS, thread_name_prefix=THREAD_NAME_PREFIX)
        return _pool


def _forget_after_fork() -> None:
    # A forked child has none of the parent's threads: it starts a pool of its own (and a
    # lock of its own: another thread may have held this one at the fork).
    global _lock, _pool
    _lock = threading.Lock()
    _pool = None


os.register_at_fork(after_in_child=_forget_after_fork)


async def off_loop(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` on an evaluation thread; its result or exception."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), functools.partial(fn, *args, **kwargs))
