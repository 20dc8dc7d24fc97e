"""The workflow sessions a dashboard serves, each with its tool bundle.

Without tokens there is one: ``--session`` or the database's default session, opened
before the server listens. With tokens each token's session is opened on its first
request. A served session is *owned* (the dashboard holds its lease and executes its
runs, including those ``flowledger start --no-execute`` writes for an owner), unless the
dashboard is ``--read-only``: then it only reads, beside whichever process owns it.

Each session lives in its own task, entered and left there (`flowledger.httpsec.hosts`,
as the MCP server's do), and stops at shutdown: runs in flight stop at their next step
boundary (each one left unfinished is named on stderr), then the session lease is
released.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from ..deploy import DeployService
from ..deploy.deployments.tools import DeployTools
from ..deploy.registry.access import SourceAccess
from ..deploy.registry.tools import CapabilityTools
from ..host import open_session
from ..httpsec import SessionHosts
from ..tools import ForkTools, SupervisorPort, WorkflowTools
from ..tools.reading import ReadingControl
from ..workflows import Catalog
from ..workflows.runtime.ownership import left_message
from ..workflows.runtime.session import WorkflowSession
from ..workflows.schedules import ScheduleLoop

__all__ = ["Served", "SessionPool", "SessionUnavailableError"]

log = logging.getLogger("flowledger.web")


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


class SessionPool:
    """The sessions of one dashboard, by session ID (None: the default session)."""

    def __init__(self, url: str, catalog: Catalog, *, read_only: bool) -> None:
        self.url = url
        self.catalog = catalog
        self.read_only = read_only
        self._hosts: SessionHosts[Served] = SessionHosts(self._serve, log=log)

    @asynccontextmanager
    async def _serve(self, session_id: str | None) -> AsyncIterator[Served]:
        async with open_session(
            self.url, self.catalog, session_id, activate=False, read_only=self.read_only
        ) as session:
            # a dashboard's users are tenants, tokens or not (docs/sources.md)
            access = SourceAccess.TENANT.read_only() if self.read_only else SourceAccess.TENANT
            deploy = DeployService(session, access=access)
            loop: ScheduleLoop | None = None
            if not self.read_only:
                # before activation, so the supervisor adopts unfinished deployed runs
                await deploy.serve_deployments()
                await session.supervisor.activate()
                loop = ScheduleLoop(session)  # the owner fires the session's schedules
                loop.start()
            try:
                yield self._served(session, deploy)
                if loop is not None:
                    await loop.close()
                supervisor = session.supervisor
                if supervisor.active:
                    if not supervisor.idle:
                        _say("stopping; the runs in flight stop at their next step boundary")
                    for run in await supervisor.stop():
                        _say(left_message(run))
            finally:
                if loop is not None:
                    await loop.close()
                if not self.read_only:
                    await session.supervisor.shutdown()

    def _served(self, session: WorkflowSession, deploy: DeployService) -> Served:
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
                clock=session.clock,
            )
        capabilities = CapabilityTools.over(
            session.store, session.session_id, access=deploy.sources.access, transport="web"
        )
        return Served(session, tools, DeployTools(deploy), fork, capabilities)

    async def get(self, session_id: str | None) -> Served:
        """The served session; `SessionUnavailableError` when it cannot be opened (a
        later request tries again)."""
        try:
            return await self._hosts.get(session_id)
        except Exception as exc:
            log.error("cannot serve a workflow session: %s", exc)
            raise SessionUnavailableError(str(exc)) from exc

    async def open_first(self, session_id: str | None) -> Served:
        """Open a session before serving, letting its failure through as it is."""
        return await self._hosts.get(session_id)

    async def close(self) -> None:
        await self._hosts.close()
