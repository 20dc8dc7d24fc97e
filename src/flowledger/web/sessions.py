"""The workflow sessions a dashboard serves, each with its tool bundle.

Without tokens there is one: ``--session`` or the database's default session, opened
before the server listens. With tokens each token's session is opened on its first
request. A served session is *owned* (the dashboard holds its lease and executes its
runs, including those ``flowledger start --no-execute`` writes for an owner), unless the
dashboard is ``--read-only``: then it only reads, beside whichever process owns it.

Each session lives in its own task, entered and left there, and stops at shutdown:
runs in flight stop at their next step boundary (each one left unfinished is named on
stderr), then the session lease is released.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from dataclasses import dataclass, field
from typing import Final

from ..deploy import DeployService
from ..deploy.deployments.tools import DeployTools
from ..deploy.registry.access import SourceAccess
from ..deploy.registry.tools import CapabilityTools
from ..host import open_session
from ..tools import ForkTools, SupervisorPort, WorkflowTools
from ..tools.reading import ReadingControl
from ..workflows import Catalog
from ..workflows.runtime.ownership import left_message
from ..workflows.runtime.session import WorkflowSession

__all__ = ["Served", "SessionPool", "SessionUnavailableError"]

log = logging.getLogger("flowledger.web")

_STOP_TIMEOUT: Final = 15.0


def _say(line: str) -> None:
    sys.stderr.write(f"flowledger web: {line}\n")
    sys.stderr.flush()


class SessionUnavailableError(Exception):
    """A session could not be opened (its reason is logged, never shown to a browser)."""


def _read_only_refusal() -> Exception:
    return PermissionError("the dashboard is read-only")


@dataclass(eq=False)
class Served:
    """One served session, its tools and its deployed runs' tools."""

    session: WorkflowSession
    tools: WorkflowTools
    deploy: DeployTools
    fork: ForkTools | None = None  # ``workflow_run_fork``; None when serving read-only
    capabilities: CapabilityTools | None = None  # ``capability_*`` (deploy/registry/tools.py)

    @property
    def session_id(self) -> str:
        return self.session.session_id


@dataclass(eq=False)
class _Host:
    url: str
    catalog: Catalog
    session_id: str | None
    read_only: bool
    ready: asyncio.Future[Served] = field(init=False)
    task: asyncio.Task[None] = field(init=False)

    def __post_init__(self) -> None:
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.ready = loop.create_future()
        self.ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self.task = loop.create_task(self._run())

    @property
    def failed(self) -> bool:
        return self.task.done() or (
            self.ready.done() and (self.ready.cancelled() or self.ready.exception() is not None)
        )

    async def _run(self) -> None:
        try:
            async with open_session(
                self.url, self.catalog, self.session_id, activate=False, read_only=self.read_only
            ) as session:
                # a dashboard's users are tenants, tokens or not (docs/sources.md)
                access = SourceAccess.TENANT.read_only() if self.read_only else SourceAccess.TENANT
                deploy = DeployService(session, access=access)
                if self.read_only:
                    await self._serve(session, deploy)
                    return
                # before activation, so the supervisor adopts unfinished deployed runs
                await deploy.serve_deployments()
                await session.supervisor.activate()
                try:
                    await self._serve(session, deploy)
                finally:
                    await session.supervisor.shutdown()
        except Exception as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            else:
                log.error("workflow session failed: %s", exc)
        finally:
            if not self.ready.done():
                self.ready.set_exception(SessionUnavailableError("the server is stopping"))

    async def _serve(self, session: WorkflowSession, deploy: DeployService) -> None:
        control: SupervisorPort = (
            ReadingControl(session, _read_only_refusal) if self.read_only else session.supervisor
        )
        tools = WorkflowTools.for_session(session, supervisor=control)
        fork = None
        if not self.read_only:
            fork = ForkTools(
                session.session_id,
                catalog=session.catalog,
                registry=session.registry,
                supervisor=control,
            )
        capabilities = CapabilityTools.over(
            session.store, session.session_id, access=deploy.sources.access, transport="web"
        )
        self.ready.set_result(Served(session, tools, DeployTools(deploy), fork, capabilities))
        await self._stop.wait()
        supervisor = session.supervisor
        if supervisor.active:
            if not supervisor.idle:
                _say("stopping; the runs in flight stop at their next step boundary")
            for run in await supervisor.stop():
                _say(left_message(run))

    async def stop(self) -> None:
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), _STOP_TIMEOUT)
        except TimeoutError:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task


class SessionPool:
    """The sessions of one dashboard, by session ID (None: the default session)."""

    def __init__(self, url: str, catalog: Catalog, *, read_only: bool) -> None:
        self.url = url
        self.catalog = catalog
        self.read_only = read_only
        self._hosts: dict[str | None, _Host] = {}

    async def get(self, session_id: str | None) -> Served:
        """The served session; `SessionUnavailableError` when it cannot be opened (a
        later request tries again)."""
        host = self._hosts.get(session_id)
        if host is None or host.failed:
            host = _Host(self.url, self.catalog, session_id, self.read_only)
            self._hosts[session_id] = host
        try:
            return await asyncio.shield(host.ready)
        except Exception as exc:
            log.error("cannot serve a workflow session: %s", exc)
            raise SessionUnavailableError(str(exc)) from exc

    async def open_first(self, session_id: str | None) -> Served:
        """Open a session before serving, letting its failure through as it is."""
        host = _Host(self.url, self.catalog, session_id, self.read_only)
        self._hosts[session_id] = host
        return await asyncio.shield(host.ready)

    async def close(self) -> None:
        hosts, self._hosts = list(self._hosts.values()), {}
        for host in hosts:
            await host.stop()
