"""Opening what one MCP server serves: the catalog, and a session with its tool bundle.

Every failure before serving starts becomes a one-line `McpStartupError`, most of all a
session owned by another process (a worker, another server): the server owns the
session it serves, so it refuses to start rather than run beside the owner.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from ..host import AppLoadError, load_catalog
from ..host import open_session as open_workflow_session
from ..tools import SupervisorPort, WorkflowTools
from ..workflows import Catalog
from ..workflows.errors import SessionOwnedError
from ..workflows.frontdoor import FrontDoor
from ..workflows.session import WorkflowSession
from .errors import McpStartupError

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
    tools: WorkflowTools
    executes: bool  # runs execute here (else a worker or the owner elsewhere does)

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
) -> AsyncIterator[ServedSession]:
    """Open the store, own the session (``session_id`` or the database's default one,
    adopting its unfinished runs) and build its tools; shut the supervisor down on exit.
    A read-only server only reads, so it does not own the session: it can run beside the
    process that does. A ``no_execute`` server (a front door) does not own it either: its
    tools write pending runs and requests that ``flowledger worker`` processes execute."""
    async with AsyncExitStack() as stack:
        try:
            session = await stack.enter_async_context(
                open_workflow_session(
                    url,
                    catalog,
                    session_id,
                    activate=not (read_only or no_execute),
                    read_only=read_only,
                )
            )
        except SessionOwnedError as exc:
            raise McpStartupError(
                f"workflow session {exc.session_id} is owned by another process "
                "(a worker or another server); stop it or serve another --session"
            ) from exc
        except ValueError as exc:  # a malformed --session
            raise McpStartupError(str(exc)) from exc
        except Exception as exc:
            raise McpStartupError(
                f"cannot open the workflow session on {redact_url(url)}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        control: SupervisorPort = session.supervisor
        start_timeout = 30.0
        if no_execute and not read_only:
            door = FrontDoor.for_session(session)
            control = door
            start_timeout = door.start_timeout + 5  # the front door's own timeout speaks
        tools = WorkflowTools(
            session.session_id,
            catalog=session.catalog,
            registry=session.registry,
            inputs=session.inputs,
            supervisor=control,
            start_timeout=start_timeout,
        )
        yield ServedSession(session, tools, executes=not (read_only or no_execute))
