"""What every command shares: options, the session and its tools, and error handling.

A command opens the session either as its *owner* (``start``, ``resume``, ``cancel``,
``demo``: the process holds the session lease and executes runs), as a *reader*
(``definitions``, ``runs``, ``history``: nothing is executed, another process may own
the session meanwhile), or as a *front door* (``start``, ``resume`` and ``cancel`` with
``--no-execute``: pending runs and requests are written for ``flowledger worker``
processes to execute). Readers get the tool bundle with `ReadingControl` in place of
the supervisor, which answers history pages straight from the activity journal; front
doors get a `FrontDoor`.

An owner names the runs it adopts from an owner that is gone, and ends at the next step
boundary: when its block ends, or at once on the first SIGINT, SIGTERM, SIGPIPE or
closed stdout (`OwnerExit`, in ``stopping.py``); then it prints one line on stderr per
run it leaves unfinished and releases the session.

Every failure becomes one line on stderr (``error: ...``) and exit code 1; usage errors
are typer's (exit code 2). ``FLOWLEDGER_DEBUG=1`` lets unexpected exceptions through with
their traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, NoReturn

import click
import typer
from rich.console import Console
from rich.text import Text

from ..jsontext import decode_json
from ..observability.logs import LogFormat
from ..observability.logs import configure as configure_logs

# The engine, the tools and the session are imported where a command first needs them:
# every `flowledger` process imports this module, most need only part of the library
# (`flowledger --help` none of it), and importing all of it costs about a second.
if TYPE_CHECKING:
    from ..tools import ForkTools, WorkflowTools
    from ..workflows.records.run import Run
    from ..workflows.runtime.session import WorkflowSession
    from .stopping import OwnerExit

__all__ = [
    "CONNECTION",
    "AppOption",
    "CliError",
    "DbOption",
    "Host",
    "JsonOption",
    "Options",
    "SessionOption",
    "check_idle",
    "describe",
    "emit_json",
    "open_host",
    "parse_json_option",
    "run_command",
    "stderr_console",
    "stdout_console",
]

MAX_ERROR_CHARS: Final = 600
NON_TERMINAL_WIDTH: Final = 120

CONNECTION: Final = "Database and session"  # the help panel of the options below and alike

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="Database URL. \\[default: $FLOWLEDGER_DB, else sqlite:///flowledger.db]",
        show_default=False,
        rich_help_panel=CONNECTION,
    ),
]
AppOption = Annotated[
    str | None,
    typer.Option(
        "--app",
        metavar="MODULE:ATTR",
        help="A workflows.Catalog, or a function returning one. \\[default: the built-in examples]",
        show_default=False,
        rich_help_panel=CONNECTION,
    ),
]
SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session",
        metavar="UUID",
        help="Session to use. \\[default: the database's default session]",
        show_default=False,
        rich_help_panel=CONNECTION,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the tool result as JSON (for scripts).")
]


class CliError(Exception):
    """A failure whose message is already what the user should read."""


@dataclass(frozen=True)
class Options:
    """The options every command accepts."""

    db: str | None = None
    app: str | None = None
    session: str | None = None

    @property
    def url(self) -> str:
        from ..host import database_url

        return database_url(self.db)

    def flags(self) -> list[str]:
        """The options to repeat in a follow-up command (an explicit ``--db`` and friends)."""
        out: list[str] = []
        if self.db is not None:
            out += ["--db", self.db]
        if self.app is not None:
            out += ["--app", self.app]
        if self.session is not None:
            out += ["--session", self.session]
        return out


# -- consoles ---------------------------------------------------------------------------


def stdout_console() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = NON_TERMINAL_WIDTH  # logs and pipes: no need to squeeze tables
    return console


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def emit_json(result: Any) -> None:
    """Print a tool result exactly, as one line of compact JSON."""
    sys.stdout.write(json.dumps(result, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


# -- the session and its tools ----------------------------------------------------------


class NotOwnedError(CliError):
    def __init__(self) -> None:
        super().__init__("this command reads the session; it cannot change runs")


@dataclass(eq=False)
class Host:
    options: Options
    session: WorkflowSession
    tools: WorkflowTools
    owner: bool
    leaving: OwnerExit | None = None  # an owner's exit: signals, closed stdout, detach

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.tools.call(name, arguments)

    def reader_tools(self) -> WorkflowTools:
        """A tool bundle that reads without the supervisor (usable after its shutdown)."""
        return make_tools(self.session, owner=False)


def make_tools(session: WorkflowSession, *, owner: bool, front_door: bool = False) -> WorkflowTools:
    from ..tools import SupervisorPort, WorkflowTools
    from ..tools.reading import ReadingControl
    from ..workflows.runtime.frontdoor import FrontDoor

    control: SupervisorPort = (
        session.supervisor if owner else ReadingControl(session, NotOwnedError)
    )
    start_timeout = 30.0
    if front_door and not owner:
        door = FrontDoor.for_session(session)
        control = door
        start_timeout = door.start_timeout + 5  # the front door's own timeout speaks first
    return WorkflowTools.for_session(session, supervisor=control, start_timeout=start_timeout)


def make_fork_tools(session: WorkflowSession, *, owner: bool) -> ForkTools:
    """``workflow_run_fork`` for an owner (its supervisor executes the fork) or a front
    door (a worker does)."""
    from ..tools import ForkTools, SupervisorPort
    from ..workflows.runtime.frontdoor import FrontDoor

    control: SupervisorPort = session.supervisor
    start_timeout = 30.0
    if not owner:
        door = FrontDoor.for_session(session)
        control = door
        start_timeout = door.start_timeout + 5
    return ForkTools(
        session.session_id,
        catalog=session.catalog,
        registry=session.registry,
        supervisor=control,
        clock=session.clock,
        start_timeout=start_timeout,
    )


@asynccontextmanager
async def open_host(
    options: Options, *, owner: bool, front_door: bool = False, announce: bool = True
) -> AsyncIterator[Host]:
    """Open the database and the session; as ``owner``, hold the session (and execute its
    unfinished runs) until the block ends; as a ``front_door``, write pending runs and
    requests for workers without owning it; else read only: the database must exist
    (``no database at PATH``), nothing is written, and a read-only directory will do."""
    from ..host import load_catalog, open_session
    from ..workflows.runtime.ownership import left_message
    from .stopping import OwnerExit

    catalog = load_catalog(options.app)
    read_only = not owner and not front_door
    async with open_session(
        options.url, catalog, options.session, activate=owner, read_only=read_only
    ) as session:
        tools = make_tools(session, owner=owner, front_door=front_door)
        host = Host(options, session, tools, owner)
        if not owner:
            yield host
            return
        if announce:
            await _announce_adopted(session)
        leaving = OwnerExit(session.supervisor.request_stop, _notice)
        host.leaving = leaving
        with leaving.installed():
            error: BaseException | None = None
            try:
                yield host
            except asyncio.CancelledError:
                if not leaving.forced:
                    raise
            except GeneratorExit:
                raise
            except BaseException as exc:  # still stop at the boundary, then report it
                error = exc
            left = await _leave(session, leaving)
        for run in left:
            _notice(left_message(run, options.flags()))
        if error is not None:
            raise error
        if leaving.departure is not None:
            raise typer.Exit(leaving.departure.exit_code)


async def _announce_adopted(session: WorkflowSession) -> None:
    """Say which runs left by an earlier owner this process continues (on stderr)."""
    from ..workflows.records.run import RunStatus

    index = session.supervisor.index
    if index is None:
        return
    try:
        for run_id in sorted(await index.runs(session.session_id)):
            run = await session.registry.get(session.session_id, run_id)
            if run.status is RunStatus.RUNNING:
                _notice(
                    f"continuing run {run.id}, left running at revision "
                    f"{run.checkpoint_revision} by an owner that is gone"
                )
            elif run.status is RunStatus.PENDING:
                _notice(f"starting run {run.id}, left pending")
    except Exception:  # a note only: the adoption itself reports real problems
        return


def _notice(message: str) -> None:
    stderr_console().print(message, soft_wrap=True, markup=False, highlight=False)


async def _leave(session: WorkflowSession, leaving: OwnerExit) -> list[Run]:
    """End this process's work on the session: at the next step boundary, or - once
    forced (a second signal, ``--detach``) - at once; return the runs left unfinished for
    the next owner (`open_session` releases the lease afterwards)."""
    supervisor = session.supervisor
    if not leaving.forced:
        try:
            return await supervisor.stop()
        except asyncio.CancelledError:
            if not leaving.forced:
                raise
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        task.uncancel()
    return await supervisor.stop(at_once=True)


# -- arguments --------------------------------------------------------------------------


def parse_json_option(option: str, text: str) -> Any:
    """Parse a JSON option value; ``@path`` reads a file and ``-`` reads stdin."""
    source = text
    if text == "-":
        source = sys.stdin.read()
    elif text.startswith("@"):
        try:
            source = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"{option}: cannot read {text[1:]!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise CliError(f"{option}: {text[1:]!r} is not UTF-8 text") from None
    try:
        return decode_json(source)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{option} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise CliError(f"{option} is not valid JSON: nested too deeply") from None
    except ValueError as exc:  # duplicate keys (named by pointer), over-long integers
        raise CliError(f"{option} is not valid JSON: {exc}") from None


# -- errors -----------------------------------------------------------------------------


def _known() -> tuple[type[BaseException], ...]:
    """The errors whose message is shown as it is (no type name in front)."""
    from ..flow import FlowError
    from ..storage import StorageError
    from ..tools import ToolError
    from ..workflows import WorkflowError

    return (
        CliError,
        ToolError,
        WorkflowError,
        FlowError,
        StorageError,
        ValueError,
        LookupError,
        OSError,
        TimeoutError,
    )


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    if len(line) > MAX_ERROR_CHARS:
        line = line[: MAX_ERROR_CHARS - 1] + "…"
    return line


def describe(error: BaseException) -> str:
    """The one line a user reads for ``error``."""
    from ..tools import ToolError
    from ..workflows import SessionOwnedError

    if isinstance(error, SessionOwnedError):
        return _one_line(
            f"the session is owned by another process (session {error.session_id}, "
            f"lease epoch {error.holder_epoch}); stop it or let it finish, then try again"
        )
    cause = error.__cause__
    if isinstance(cause, SessionOwnedError) and not isinstance(error, ToolError):
        return describe(cause)
    text = str(error)
    if isinstance(error, OSError) and error.strerror:
        text = error.strerror if error.filename is None else f"{error.strerror}: {error.filename}"
    elif isinstance(error, KeyError) and error.args:
        text = str(error.args[0])
    if _is_database_error(error):
        text = f"database: {text}"
    elif not isinstance(error, _known()):
        text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return _one_line(text or type(error).__name__)


def _is_database_error(error: BaseException) -> bool:
    """A database driver's own error (sqlite3, psycopg): worth saying where it came from."""
    import sqlite3

    if isinstance(error, sqlite3.Error):
        return True
    return type(error).__module__.split(".")[0] in ("psycopg", "psycopg_pool")


def fail(message: str) -> NoReturn:
    stderr_console().print(Text.assemble(("error: ", "bold red"), message), soft_wrap=True)
    raise typer.Exit(1)


def check_idle(run_id: str, error: BaseException | None) -> None:
    """After `Supervisor.wait_idle`: an error about ``run_id`` (or about no run in
    particular) fails the command; one about another run of the session is a warning."""
    if error is None:
        return
    about = getattr(error, "run_id", None)
    if about is None or about == run_id:
        raise CliError(f"the run could not be executed: {describe(error)}")
    stderr_console().print(
        Text.assemble(
            ("warning: ", "bold yellow"), f"another run of the session: {describe(error)}"
        ),
        soft_wrap=True,
    )


def _configure_logging(quiet: bool) -> None:
    """``FLOWLEDGER_DEBUG`` shows every log record; otherwise, for ``quiet`` commands, log
    records (library warnings, tracebacks of contained errors) are not printed: the
    command reports what went wrong itself, in one line."""
    root = logging.getLogger()
    if os.environ.get("FLOWLEDGER_DEBUG"):
        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
    elif quiet and not root.handlers:
        root.addHandler(logging.NullHandler())


def run_command(
    work: Callable[[], Coroutine[Any, Any, None]],
    *,
    quiet_logs: bool = True,
    log_format: LogFormat = "human",
) -> None:
    """Run a command's coroutine; every failure is one line on stderr and exit code 1.
    ``log_format="json"``: log records are JSON lines (`flowledger.observability.logs`)."""
    _configure_logging(quiet_logs)
    configure_logs(log_format)
    # here, not at the top: importing the workflows layer would slow every command's start
    from ..workflows.records.answers import answering

    try:
        with answering("cli"):  # a resume made here says so (a server's own surface overrides)
            asyncio.run(work())
    except (typer.Exit, click.exceptions.Exit, click.ClickException, click.Abort):
        raise
    except KeyboardInterrupt:
        stderr_console().print(
            "interrupted: finished steps are durable; a run continues from its last "
            "checkpoint the next time a flowledger process owns the session",
            soft_wrap=True,
            markup=False,
        )
        raise typer.Exit(130) from None
    except Exception as exc:
        if os.environ.get("FLOWLEDGER_DEBUG"):
            raise
        fail(describe(exc))


def default_database_note(options: Options) -> str:
    from ..host import DEFAULT_DATABASE

    return options.url if options.url != DEFAULT_DATABASE else f"{DEFAULT_DATABASE} (default)"
