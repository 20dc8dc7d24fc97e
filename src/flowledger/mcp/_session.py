"""Opening what one MCP server serves: the catalog, and a session with its tool bundle.

Every failure before serving starts becomes a one-line `McpStartupError`, most of all a
session owned by another process (a worker, another server): the server owns the
session it serves, so it refuses to start rather than run beside the owner.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from ..deploy import DeployService
from ..deploy.deployments.scheduling import deployment_schedules
from ..deploy.deployments.tools import combined
from ..deploy.drafts.service import DraftService
from ..deploy.drafts.tools import DraftTools
from ..deploy.registry.access import SourceAccess
from ..deploy.registry.tools import CapabilityTools
from ..host import AppLoadError, load_catalog
from ..host import open_session as open_workflow_session
from ..tools import ForkTools, SupervisorPort, WorkflowTools
from ..tools.schedules import ScheduleTools
from ..workflows import Catalog
from ..workflows.errors import SessionOwnedError
from ..workflows.runtime.frontdoor import FrontDoor
from ..workflows.runtime.session import WorkflowSession
from ..workflows.schedules import ScheduleLoop
from .deploy_tools import Bundle, with_deploy_tools
from .errors import McpStartupError
from .prune_tool import PruneTool

log = logging.getLogger("flowledger.mcp")

__all__ = ["ServedSession", "load_app", "open_served_session", "redact_url"]

_MAX_REASON: Final = 300


def redact_url(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def load_app(app: str | None) -> Catalog:
    """The catalog named by ``--app`` (``module:attribute``), or the built-in examples."""
    try:
        return load_catalog(app)
    except AppLoadError as exc:
        raise McpStartupError(str(exc)) from exc
    except Exception as exc:  # the application's own catalog factory failed
        reason = " ".join(str(exc).split())
        if len(reason) > _MAX_REASON:
            reason = reason[:_MAX_REASON] + "..."
        raise McpStartupError(f"--app {app!r} failed: {type(exc).__name__}: {reason}") from exc


@dataclass(eq=False)
class ServedSession:
    """A workflow session owned by this server, and its tools."""

    session: WorkflowSession
    tools: Bundle  # workflow_*, deploy, draft, fork, prune, schedule_* and capability_* tools
    executes: bool  # runs execute here (else a worker or the owner elsewhere does)
    read_only: bool = False  # serve only the reading tools
    notice: str = ""  # why it serves read-only although asked to own the session

    @property
    def session_id(self) -> str:
        return self.session.session_id


@asynccontextmanager
async def open_served_session(
    url: str,
    catalog: Catalog,
    session_id: str | None = None,
    *,
    read_only: bool = False,
    no_execute: bool = False,
    read_only_when_owned: bool = False,
    access: SourceAccess = SourceAccess.OPERATOR,
) -> AsyncIterator[ServedSession]:
    """Open the store, own the session (``session_id`` or the database's default one,
    adopting its unfinished runs) and build its tools; shut the supervisor down on exit.
    A read-only server only reads, so it does not own the session: it can run beside the
    process that does. A ``no_execute`` server (a front door) does not own it either: its
    tools write pending runs and requests that ``flowledger worker`` processes execute.
    With ``read_only_when_owned`` (the stdio server), a session another process owns is
    served read-only instead, saying why (``notice``): a stdio server that exits leaves
    its client with nothing but "Connection closed". Otherwise that is `McpStartupError`
    (the HTTP server answers 503 until the session is free). ``access``: what the
    server's clients may do with sources (the operator's by default: a stdio server;
    `SourceAccess.TENANT` for an HTTP server); a read-only server contacts none."""
    async with AsyncExitStack() as stack:
        notice = ""
        try:
            session = await _enter(
                stack,
                url,
                catalog,
                session_id,
                read_only=read_only,
                no_execute=no_execute,
                access=access,
            )
        except SessionOwnedError as exc:
            if not read_only_when_owned:
                raise McpStartupError(
                    f"workflow session {exc.session_id} is owned by another process "
                    "(a worker or another server); stop it or serve another --session"
                ) from exc
            notice = (
                f"workflow session {exc.session_id} is owned by another process (a worker, "
                "a `flowledger start`, or another MCP server); runs can be listed and "
                "followed here, and to start, resume or cancel them stop that process and "
                "restart this server, or serve another --session"
            )
            log.warning("serving read-only because %s", notice)
            read_only = True
            session = await _enter(
                stack, url, catalog, session_id, read_only=True, no_execute=False, access=access
            )
        loop: ScheduleLoop | None = None
        if not (read_only or no_execute):  # this server owns the session: it fires its slots
            loop = ScheduleLoop(session)
            loop.start()
            stack.push_async_callback(loop.close)
        control: SupervisorPort = session.supervisor
        start_timeout = 30.0
        if no_execute and not read_only:
            door = FrontDoor.for_session(session)
            control = door
            start_timeout = door.start_timeout + 5  # the front door's own timeout speaks
        tools = WorkflowTools.for_session(session, supervisor=control, start_timeout=start_timeout)
        fork = ForkTools(
            session.session_id,
            catalog=session.catalog,
            registry=session.registry,
            supervisor=control,
            clock=session.clock,
            start_timeout=start_timeout,
        )
        yield ServedSession(
            session,
            combined(
                with_deploy_tools(
                    tools,
                    session,
                    control=control if no_execute and not read_only else None,
                    start_timeout=start_timeout,
                    access=access.read_only() if read_only else access,
                ),
                DraftTools(DraftService(DeployService(session, access=access))),
                fork,
                PruneTool(session, catalog.retention),
                ScheduleTools(deployment_schedules(session, access=access, loop=loop)),
                CapabilityTools.over(
                    session.store,
                    session.session_id,
                    access=access.read_only() if read_only else access,
                    transport="mcp",
                ),
            ),
            executes=not (read_only or no_execute),
            read_only=read_only,
            notice=notice,
        )


async def _enter(
    stack: AsyncExitStack,
    url: str,
    catalog: Catalog,
    session_id: str | None,
    *,
    read_only: bool,
    no_execute: bool,
    access: SourceAccess,
) -> WorkflowSession:
    """`open_workflow_session` entered on ``stack``; its failures as `McpStartupError`,
    but `SessionOwnedError` of an owning server, which the caller answers."""
    try:
        async with AsyncExitStack() as opened:  # closed at once if it is not served
            session = await opened.enter_async_context(
                open_workflow_session(url, catalog, session_id, activate=False, read_only=read_only)
            )
            if not (read_only or no_execute):
                # The catalog is in memory and deployed definitions are registered on
                # first use: without registering them all before activation, a restarted
                # server would not adopt the deployed runs a crash left unfinished.
                await DeployService(session, access=access).serve_deployments()
                await session.supervisor.activate()
                opened.push_async_callback(session.supervisor.shutdown)
            stack.push_async_exit(opened.pop_all())
        return session
    except SessionOwnedError:
        raise
    except ValueError as exc:  # a malformed --session
        raise McpStartupError(str(exc)) from exc
    except Exception as exc:
        raise McpStartupError(
            f"cannot open the workflow session on {redact_url(url)}: {type(exc).__name__}: {exc}"
        ) from exc
