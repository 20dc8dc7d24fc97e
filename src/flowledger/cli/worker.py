"""``flowledger worker``: run a `flowledger.workflows.runtime.worker.Worker` until a signal.

SIGTERM and SIGINT stop it cleanly: the runs it executes stop at their next step
boundary (the runs left unfinished are logged; another worker adopts them), every
session it owns is shut down (its lease released, so another worker can claim it at
once) and its heartbeat record deleted. A second signal stops it at once.
Progress goes to stderr as log lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import Final

from ..deploy.runs.retention import deployed_run_logs
from ..host import load_catalog
from ..observability import metrics
from ..storage import Store, open_store
from ..workflows.records.registry import status_prefix
from ..workflows.records.run import RunStatus
from ..workflows.records.unfinished import UnfinishedIndex
from ..workflows.runtime.session import WorkflowSession
from ..workflows.runtime.worker import Worker, WorkerSettings, reindex
from .census import waiting_census
from .runtime import CliError, Options
from .sources_file import reconcile_sources

__all__ = ["run_worker"]

log = logging.getLogger("flowledger.workflows.runtime.worker")


def _configure_logging() -> None:
    if os.environ.get("FLOWLEDGER_DEBUG"):
        return  # run_command configured DEBUG output already
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        root.addHandler(handler)
    logging.getLogger("flowledger").setLevel(logging.INFO)


async def _register_deployed(session: WorkflowSession) -> None:
    """Deployed runs are ordinary runs of definitions kept in the session's database:
    registered before the worker owns the session, so it adopts and starts them, and
    looked up when a front door starts a revision saved after the worker took it."""
    from ..deploy import DeployService

    await DeployService(session).serve_deployments()


_UNFINISHED: Final = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.INTERRUPTED)


def _unfinished_census(store: Store) -> metrics.Census:
    """The runs not finished yet, by status, in every session: per scrape one prefix
    listing of the unfinished index (`UnfinishedIndex.scan`: which sessions have any),
    then per such session one listing of the registry's status entries per unfinished
    status (`status_prefix`). Keys only: no run record is read."""
    index = UnfinishedIndex(store.kv)

    async def census() -> dict[tuple[str, ...], float]:
        counts = dict.fromkeys(_UNFINISHED, 0)
        for session_id in await index.scan():
            for status in _UNFINISHED:
                counts[status] += len(await store.kv.keys(status_prefix(session_id, status)))
        return {(str(status),): float(count) for status, count in counts.items()}

    return census


async def run_worker(
    options: Options,
    settings: WorkerSettings,
    *,
    rebuild_index: bool,
    sources: str | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> None:
    _configure_logging()
    if metrics_port is not None:
        try:
            metrics.enable()  # before anything: a worker asked for metrics has them
        except metrics.MetricsUnavailableError as exc:
            raise CliError(f"--metrics-port: {exc}") from None
    catalog = load_catalog(options.app)
    if sources is not None:
        await reconcile_sources(options.url, sources)
    async with open_store(options.url) as store, contextlib.AsyncExitStack() as serving:
        if metrics.enabled():  # --metrics-port, or FLOWLEDGER_METRICS=otlp
            metrics.add_census(
                "flowledger_runs_unfinished",
                "Runs not finished yet, in every session, by status.",
                ("status",),
                _unfinished_census(store),
            )
            metrics.add_census(
                "flowledger_runs_waiting",
                "Runs waiting, in every session: paused by kind, or queued for admission.",
                ("reason",),
                waiting_census(store),
            )
        if metrics_port is not None:
            from .metrics_listener import metrics_listener  # the HTTP stack, only if asked

            url = await serving.enter_async_context(metrics_listener(metrics_host, metrics_port))
            log.info("metrics: serving %s", url, extra={"event": "metrics_serving"})
        if rebuild_index:
            added = await reindex(store)
            log.info("reindex: %d unfinished run(s) added to the index", added)
        worker = Worker(
            store,
            catalog,
            settings,
            prepare_session=_register_deployed,
            run_logs=(deployed_run_logs,),
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def on_signal() -> None:
            if not stop.is_set():
                stop.set()  # runs in flight stop at their next step boundary
            elif task is not None:
                task.cancel()  # a second signal: let go at once

        installed: list[signal.Signals] = []
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, on_signal)
                installed.append(signum)
        try:
            await worker.run(stop)
        except asyncio.CancelledError:
            if task is None or not stop.is_set():
                raise
            task.uncancel()  # the second signal: `Worker.close` has let go at once
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)
            if signal.SIGINT in installed:  # asyncio resets it to the default, not Python's
                with contextlib.suppress(ValueError):
                    signal.signal(signal.SIGINT, signal.default_int_handler)
