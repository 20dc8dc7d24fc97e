"""``flowledger worker``: run a `flowledger.workflows.worker.Worker` until a signal.

SIGTERM and SIGINT stop it cleanly: every session it owns is shut down (its lease
released, so another worker can claim it at once) and its heartbeat record deleted.
Progress goes to stderr as log lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys

from ..host import load_catalog
from ..storage import open_store
from ..workflows.worker import Worker, WorkerSettings, reindex
from .runtime import Options

__all__ = ["run_worker"]

log = logging.getLogger("flowledger.workflows.worker")


def _configure_logging() -> None:
    if os.environ.get("FLOWLEDGER_DEBUG"):
        return  # run_command configured DEBUG output already
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        root.addHandler(handler)
    logging.getLogger("flowledger").setLevel(logging.INFO)


async def run_worker(options: Options, settings: WorkerSettings, *, rebuild_index: bool) -> None:
    _configure_logging()
    catalog = load_catalog(options.app)
    async with open_store(options.url) as store:
        if rebuild_index:
            added = await reindex(store)
            log.info("reindex: %d unfinished run(s) added to the index", added)
        worker = Worker(store, catalog, settings)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, stop.set)
                installed.append(signum)
        try:
            await worker.run(stop)
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)
