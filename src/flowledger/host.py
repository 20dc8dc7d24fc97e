"""What every host (CLI, MCP server) needs: which database, which catalog, which session.

* The database comes from an explicit URL, else ``FLOWLEDGER_DB``, else
  ``sqlite:///flowledger.db`` in the current directory.
* ``--app module:attribute`` names a `Catalog`, or a function returning one, the way
  uvicorn names an app; without it the built-in examples are served. The module is
  found from the current directory first, then the Python path. Whatever the module or
  the function raises is `AppLoadError` ``while loading --app module:attr: Type: ...``.
* The session is explicit, else the database's default session.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final, Literal

from .storage import open_store
from .workflows import Catalog
from .workflows.records.run import is_id
from .workflows.runtime.session import WorkflowSession, default_session_id

__all__ = [
    "DEFAULT_DATABASE",
    "OWNER_FALLBACK_POLL",
    "OWNER_POLL_INTERVAL",
    "AppLoadError",
    "database_url",
    "load_catalog",
    "open_session",
]

DEFAULT_DATABASE: Final = "sqlite:///flowledger.db"
_MAX_REASON: Final = 400
# Seconds between an owner's looks for front-door requests when nothing wakes it: where a
# front door in another process cannot wake it (SQLite), and where every one can
# (PostgreSQL `NOTIFY`: the slow fallback poll, as a worker's; see `WorkWaiter`).
OWNER_POLL_INTERVAL: Final = 1.0
OWNER_FALLBACK_POLL: Final = 5.0


class AppLoadError(ValueError):
    """``--app`` did not name a catalog."""


def database_url(explicit: str | None = None) -> str:
    return explicit or os.environ.get("FLOWLEDGER_DB") or DEFAULT_DATABASE


def load_catalog(app: str | None = None) -> Catalog:
    """The catalog named by ``module:attribute`` (a Catalog or a function returning one),
    or the built-in examples."""
    if app is None:
        from .examples import catalog

        return catalog()
    module_name, sep, attribute = app.partition(":")
    if not sep or not module_name or not attribute:
        raise AppLoadError(f"--app must look like module:attribute, not {app!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as uvicorn does: modules next to the caller
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise AppLoadError(
                f"cannot import {module_name!r}: {exc} (modules are found from the current "
                f"directory, {os.getcwd()}, and the Python path)"
            ) from exc
        raise _while_loading(app, exc) from exc  # a module the app itself imports
    except Exception as exc:  # the module's own code raised while it was imported
        raise _while_loading(app, exc) from exc
    target: object = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise AppLoadError(f"{module_name!r} has no attribute {attribute!r}") from None
    if callable(target) and not isinstance(target, Catalog):
        try:
            target = target()
        except Exception as exc:  # the catalog factory (or a registration in it) raised
            raise _while_loading(app, exc) from exc
    if not isinstance(target, Catalog):
        raise AppLoadError(f"{app!r} is a {type(target).__name__}, not a workflows.Catalog")
    return target


def _while_loading(app: str, exc: BaseException) -> AppLoadError:
    reason = " ".join(str(exc).split())
    if len(reason) > _MAX_REASON:
        reason = reason[:_MAX_REASON] + "..."
    text = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
    return AppLoadError(f"while loading --app {app}: {text}")


@asynccontextmanager
async def open_session(
    url: str,
    catalog: Catalog,
    session_id: str | None = None,
    *,
    activate: bool = True,
    lease_ttl: float | None = None,
    poll_interval: float | Literal["auto"] | None = "auto",
    read_only: bool = False,
) -> AsyncIterator[WorkflowSession]:
    """Open the store and the session; with ``activate``, own it (adopting its unfinished
    runs, and acting on front doors' requests when woken and every ``poll_interval``
    seconds; ``"auto"``: `OWNER_FALLBACK_POLL` if the store's wake-ups reach across
    processes, else `OWNER_POLL_INTERVAL`) until the block ends, then shut the
    supervisor down. With ``read_only`` (never together with ``activate``) the database
    must exist and nothing is written to it."""
    if session_id is not None and not is_id(session_id):
        raise ValueError(f"--session must be a UUID, not {session_id!r}")
    if read_only and activate:
        raise ValueError("a read-only session cannot be owned")
    async with open_store(url, read_only=read_only) as store:
        sid = session_id or await default_session_id(store)
        if poll_interval == "auto":
            woken = store.wakeups.across_processes
            poll_interval = OWNER_FALLBACK_POLL if woken else OWNER_POLL_INTERVAL
        session = WorkflowSession.build(
            store, sid, catalog, lease_ttl=lease_ttl, poll_interval=poll_interval
        )
        if not activate:
            yield session
            return
        await session.supervisor.activate()
        try:
            yield session
        finally:
            await session.supervisor.shutdown()
