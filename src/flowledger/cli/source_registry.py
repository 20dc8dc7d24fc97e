"""``flowledger source add|set|list|show|enable|disable|remove`` and ``source probe NAME``:
the operator's source registry (`flowledger.deploy.registry.SourceRegistry`) from the
command line.

Each command opens the database itself (no session: the registry belongs to the
operator, outside every session). ``list`` and ``show`` open it read-only (it must
exist; nothing is written). ``add`` registers revision 1 (refused if the name is
registered), ``set`` saves the next revision (refused for an unknown name; ``--expect
N`` refuses unless the current revision is N; an unchanged document writes nothing),
``disable`` / ``enable`` flip the source's state, ``remove`` unregisters it unless an
unfinished run is pinned to it (each use is checked against the run registry of the
run's session), and ``probe NAME`` connects to the current revision, lists its tools
and records the probe (a source that does not answer is recorded too, and exits 1).

A refusal is one ``error:`` line and exit code 1; with ``--json`` a success prints one
JSON document.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .runtime import CliError, DbOption, emit_json, run_command, stdout_console
from .source_document import FLAG_OPTIONS, document_from_flags, read_document_file
from .source_render import render_probe, render_saved, render_source, render_sources

if TYPE_CHECKING:
    from ..deploy.registry.store import RegisteredSource, SourceRegistry
    from ..storage import Store

# `flowledger.deploy` (and the MCP SDK under it) is imported inside the commands, so that
# every other command starts without it.

__all__ = [
    "add",
    "disable",
    "enable",
    "list_sources",
    "probe_registered",
    "remove",
    "set_source",
    "show",
]

FLAGS = "Document from flags"

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The source's name.")]
TargetArgument = Annotated[
    str,
    typer.Argument(
        metavar="FILE|NAME",
        help="A flowledger.source/v1 document (YAML or JSON; - reads stdin), or, with "
        "--stdio, --url, --python, --builtin or --openapi, the name of the source the flags "
        "describe.",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the result as one JSON document (for scripts).")
]
StdioOption = Annotated[
    str | None,
    typer.Option(
        "--stdio",
        metavar="'CMD ARGS'",
        help="The command line that starts the server (split as a shell would).",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        metavar="URL",
        help="A streamable HTTP MCP endpoint.",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
PythonOption = Annotated[
    str | None,
    typer.Option(
        "--python",
        metavar="MODULE[:FUNCTION,...]",
        help="Functions of an importable Python module, called in the process that runs "
        "the workflow (default: every public function the module defines).",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
OpenApiOption = Annotated[
    str | None,
    typer.Option(
        "--openapi",
        metavar="DOCUMENT",
        help="The operations of an OpenAPI 3.0/3.1 document (a file path or a URL) as tools, "
        "called against --base-url.",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        metavar="URL",
        help="--openapi: where the operations are called (the document's servers are not used).",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
OperationOption = Annotated[
    list[str] | None,
    typer.Option(
        "--operation",
        metavar="OPERATION_ID",
        help="--openapi: this operation only (repeatable; default: every operation).",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
AuthHeaderOption = Annotated[
    str | None,
    typer.Option(
        "--auth-header",
        metavar="NAME=SECRET",
        help="--openapi: send secret SECRET (declared with --secret) as header NAME.",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
AuthQueryOption = Annotated[
    str | None,
    typer.Option(
        "--auth-query",
        metavar="NAME=SECRET",
        help="--openapi: send secret SECRET (declared with --secret) as query parameter NAME.",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
BuiltinOption = Annotated[
    bool,
    typer.Option(
        "--builtin",
        help="The built-in standard library of transforms (read-only, idempotent).",
        rich_help_panel=FLAGS,
    ),
]
ReadOnlyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--read-only",
        metavar="FUNCTION",
        help="--python: annotate FUNCTION read-only (repeatable).",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
IdempotentOption = Annotated[
    list[str] | None,
    typer.Option(
        "--idempotent",
        metavar="FUNCTION",
        help="--python: annotate FUNCTION idempotent (repeatable).",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
EnvOption = Annotated[
    list[str] | None,
    typer.Option(
        "--env",
        "-e",
        metavar="NAME=VALUE",
        help="stdio: an environment variable for the server; NAME=secret:SECRET refers to "
        "a declared secret (repeatable).",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
HeaderOption = Annotated[
    list[str] | None,
    typer.Option(
        "--header",
        "-H",
        metavar="NAME=VALUE",
        help="HTTP: a header sent with every request; NAME=secret:SECRET refers to a "
        "declared secret (repeatable).",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
CwdOption = Annotated[
    str | None,
    typer.Option(
        "--cwd",
        metavar="DIR",
        help="stdio: the server's working directory.",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
SecretOption = Annotated[
    list[str] | None,
    typer.Option(
        "--secret",
        metavar="SECRET[=VAR]",
        help="Declare a secret, read from environment variable VAR (default: SECRET) of "
        "the process that connects the source (repeatable).",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
SessionOption = Annotated[
    list[str] | None,
    typer.Option(
        "--session",
        metavar="UUID",
        help="A session that may see and use the source (repeatable). \\[default: every session]",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
AllowToolOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-tool",
        metavar="TOOL",
        help="A tool deployments may bind (repeatable). \\[default: every tool]",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
CallToolOption = Annotated[
    list[str] | None,
    typer.Option(
        "--call-tool",
        metavar="TOOL",
        help="A tool capability_call may try although the server does not mark it "
        "read-only (repeatable).",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]
DescriptionOption = Annotated[
    str | None,
    typer.Option(
        "--description",
        metavar="TEXT",
        help="What the source is for (at most 1024 characters).",
        show_default=False,
        rich_help_panel=FLAGS,
    ),
]


# -- shared -----------------------------------------------------------------------------


@contextmanager
def _refused() -> Iterator[None]:
    """The registry's refusals (and a source's failures) as the one line they are."""
    from ..deploy import SourceError
    from ..deploy.registry.errors import SourceNotRegisteredError
    from ..deploy.registry.spec import CredentialMissingError

    try:
        yield
    except SourceNotRegisteredError as exc:
        what = f"source {exc.name!r}" + (
            "" if exc.revision is None else f" revision {exc.revision}"
        )
        raise CliError(f"{what} is not registered (see `flowledger source list`)") from None
    except (SourceError, CredentialMissingError) as exc:
        raise CliError(str(exc)) from None


@asynccontextmanager
async def _opened(
    db: str | None, *, read_only: bool
) -> AsyncIterator[tuple[SourceRegistry, Store]]:
    from ..deploy.registry.store import SourceRegistry
    from ..host import database_url
    from ..storage import open_store

    async with open_store(database_url(db), read_only=read_only) as store:
        with _refused():
            yield SourceRegistry.over(store), store


def _run(work: Callable[[], Coroutine[Any, Any, None]]) -> None:
    run_command(work)


def _from_flags(target: str, flags: dict[str, Any]) -> dict[str, Any] | None:
    """Before the command runs (a bad flag is a usage error): the document the flags
    describe, or ``None`` when ``target`` is a file (then no flag may describe one)."""
    if all(flags[kind] is None for kind in ("stdio", "url", "python", "openapi")):
        if flags["builtin"]:
            return document_from_flags(target, **flags)
        given = [
            option
            for option, key in zip(FLAG_OPTIONS, _FLAG_KEYS, strict=True)
            if flags[key] not in (None, [])
        ]
        if given:
            raise typer.BadParameter(
                f"{', '.join(given)} describe a source only with --stdio, --url, --python, "
                "--builtin or --openapi (a FILE holds the whole document)",
                param_hint=given[0],
            )
        return None
    return document_from_flags(target, **flags)


def _validated(target: str, document: dict[str, Any] | None) -> Any:
    """The validated document ``add`` / ``set`` save: the flags' ``document``, or the
    file ``target``."""
    from ..deploy import ArtifactValidationError
    from ..deploy.registry.document import load_source, validate_source

    if document is None:
        data = read_document_file(target)
        where = "stdin" if target == "-" else target
        try:
            return load_source(data)
        except ArtifactValidationError as exc:
            raise CliError(f"{where}: {_one(exc)}") from None
    try:
        return validate_source(document)
    except ArtifactValidationError as exc:
        first = exc.issues[0]
        if first.code == "secret_undeclared":  # the document's hint, in flags
            raise CliError(
                f"invalid source: {first.message} (hint: declare it with --secret NAME or "
                "--secret NAME=VARIABLE)"
            ) from None
        raise CliError(_one(exc)) from None


_FLAG_KEYS = (
    "base_url",
    "operations",
    "auth_header",
    "auth_query",
    "read_only",
    "idempotent",
    "env",
    "headers",
    "cwd",
    "secrets",
    "sessions",
    "allow_tools",
    "call_tools",
    "description",
)


def _one(exc: Any) -> str:
    """A validation error as one line: the first issue and how many more."""
    more = len(exc.issues) - 1
    return f"invalid source: {exc.issues[0]}" + (
        f" (and {more} more issue{'s' * (more != 1)})" if more else ""
    )


def _saved(registered: RegisteredSource, *, added: bool, unchanged: bool) -> dict[str, Any]:
    return {**registered.to_json(), "added": added, "unchanged": unchanged}


def _emit(result: dict[str, Any], as_json: bool, render: Callable[..., None]) -> None:
    if as_json:
        emit_json(result)
    else:
        render(stdout_console(), result)


# -- commands ---------------------------------------------------------------------------


def add(
    target: TargetArgument,
    stdio: StdioOption = None,
    url: UrlOption = None,
    python: PythonOption = None,
    builtin: BuiltinOption = False,
    read_only: ReadOnlyOption = None,
    idempotent: IdempotentOption = None,
    openapi: OpenApiOption = None,
    base_url: BaseUrlOption = None,
    operation: OperationOption = None,
    auth_header: AuthHeaderOption = None,
    auth_query: AuthQueryOption = None,
    env: EnvOption = None,
    header: HeaderOption = None,
    cwd: CwdOption = None,
    secret: SecretOption = None,
    session: SessionOption = None,
    allow_tool: AllowToolOption = None,
    call_tool: CallToolOption = None,
    description: DescriptionOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Register a new source (revision 1) from a file or from flags."""
    document = _from_flags(
        target,
        {
            **_flags(
                stdio, url, env, header, cwd, secret, session, allow_tool, call_tool, description
            ),
            "python": python,
            "builtin": builtin,
            "read_only": read_only or [],
            "idempotent": idempotent or [],
            "openapi": openapi,
            "base_url": base_url,
            "operations": operation or [],
            "auth_header": auth_header,
            "auth_query": auth_query,
        },
    )

    async def work() -> None:
        validated = _validated(target, document)
        async with _opened(db, read_only=False) as (registry, _):
            registered = await registry.add(validated)
        _emit(_saved(registered, added=True, unchanged=False), json_output, render_saved)

    _run(work)


def set_source(
    target: TargetArgument,
    expect: Annotated[
        int | None,
        typer.Option(
            "--expect",
            metavar="N",
            min=1,
            help="Only if the current revision is N (a compare-and-swap).",
            show_default=False,
        ),
    ] = None,
    stdio: StdioOption = None,
    url: UrlOption = None,
    python: PythonOption = None,
    builtin: BuiltinOption = False,
    read_only: ReadOnlyOption = None,
    idempotent: IdempotentOption = None,
    openapi: OpenApiOption = None,
    base_url: BaseUrlOption = None,
    operation: OperationOption = None,
    auth_header: AuthHeaderOption = None,
    auth_query: AuthQueryOption = None,
    env: EnvOption = None,
    header: HeaderOption = None,
    cwd: CwdOption = None,
    secret: SecretOption = None,
    session: SessionOption = None,
    allow_tool: AllowToolOption = None,
    call_tool: CallToolOption = None,
    description: DescriptionOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Save a registered source's next revision: the whole document, from a file or from
    flags (an unchanged document writes nothing)."""
    document = _from_flags(
        target,
        {
            **_flags(
                stdio, url, env, header, cwd, secret, session, allow_tool, call_tool, description
            ),
            "python": python,
            "builtin": builtin,
            "read_only": read_only or [],
            "idempotent": idempotent or [],
            "openapi": openapi,
            "base_url": base_url,
            "operations": operation or [],
            "auth_header": auth_header,
            "auth_query": auth_query,
        },
    )

    async def work() -> None:
        validated = _validated(target, document)
        async with _opened(db, read_only=False) as (registry, _):
            before = await registry.get(validated.name)
            registered = await registry.set(validated, expected=expect)
        unchanged = registered.source.digest == before.source.digest
        _emit(_saved(registered, added=False, unchanged=unchanged), json_output, render_saved)

    _run(work)


def _flags(
    stdio: str | None,
    url: str | None,
    env: list[str] | None,
    header: list[str] | None,
    cwd: str | None,
    secret: list[str] | None,
    session: list[str] | None,
    allow_tool: list[str] | None,
    call_tool: list[str] | None,
    description: str | None,
) -> dict[str, Any]:
    return {
        "stdio": stdio,
        "url": url,
        "env": env or [],
        "headers": header or [],
        "cwd": cwd,
        "secrets": secret or [],
        "sessions": session or [],
        "allow_tools": allow_tool or [],
        "call_tools": call_tool or [],
        "description": description,
    }


def _listed(registered: RegisteredSource, probe: Any) -> dict[str, Any]:
    document = registered.source.document
    last = None
    if probe is not None:
        last = {
            "probed_at": probe.probed_at,
            "revision": probe.revision,
            "ok": probe.ok,
            "error": probe.error,
            "tool_count": len(probe.tools) if probe.ok else None,
        }
    return {
        "name": registered.name,
        "revision": registered.revision,
        "enabled": registered.enabled,
        "transport": registered.source.kind,
        "visibility": "all" if document.sessions is None else list(document.sessions),
        "description": document.description,
        "last_probe": last,
    }


def list_sources(db: DbOption = None, json_output: JsonOption = False) -> None:
    """List the registered sources: revision, state, visibility, last probe."""

    async def work() -> None:
        async with _opened(db, read_only=True) as (registry, _):
            found = [
                _listed(item, await registry.last_probe(item.name))
                for item in await registry.list()
            ]
        _emit({"sources": found}, json_output, render_sources)

    _run(work)


def show(
    name: NameArgument,
    revision: Annotated[
        int | None,
        typer.Option(
            "--revision",
            metavar="N",
            min=1,
            help="Show revision N. \\[default: the current one]",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show a source: its document, state, revisions, last probe (with every tool's
    fingerprints) and the runs pinned to it."""
    from ..workflows.errors import NotFoundError
    from ..workflows.records.registry import RunRegistry

    async def work() -> None:
        async with _opened(db, read_only=True) as (registry, store):
            shown = (await registry.get(name, revision)).to_json()
            revisions = []
            for number in range(1, int(shown["latest"]) + 1):
                found = await registry.get(name, number)
                revisions.append(
                    {"revision": number, "saved_at": found.saved_at, "digest": found.source.digest}
                )
            probe = await registry.last_probe(name)
            runs = []
            records = RunRegistry(store.kv)
            for session_id, run_id in await registry.uses(name):
                try:
                    status = str((await records.get(session_id, run_id)).status)
                except NotFoundError:
                    status = "removed"
                runs.append({"session_id": session_id, "run_id": run_id, "status": status})
        shown["revisions"] = revisions
        shown["last_probe"] = None if probe is None else probe.to_json()
        shown["runs"] = runs
        _emit(shown, json_output, render_source)

    _run(work)


def _switch(name: str, db: str | None, json_output: bool, *, enabled: bool) -> None:
    async def work() -> None:
        async with _opened(db, read_only=False) as (registry, _):
            if enabled:
                await registry.enable(name)
            else:
                await registry.disable(name)
        if json_output:
            emit_json({"name": name, "enabled": enabled})
            return
        stdout_console().print(
            f"source {name} is {'enabled' if enabled else 'disabled'}"
            + (
                ""
                if enabled
                else ": it is started and contacted for no one; starts of deployments bound "
                "to it are unrunnable and pinned runs' resumes blocked until it is enabled"
            ),
            soft_wrap=True,
        )

    _run(work)


def enable(name: NameArgument, db: DbOption = None, json_output: JsonOption = False) -> None:
    """Enable a disabled source."""
    _switch(name, db, json_output, enabled=True)


def disable(name: NameArgument, db: DbOption = None, json_output: JsonOption = False) -> None:
    """Disable a source: nothing starts or contacts it until it is enabled again."""
    _switch(name, db, json_output, enabled=False)


def remove(name: NameArgument, db: DbOption = None, json_output: JsonOption = False) -> None:
    """Unregister a source; refused while an unfinished run is pinned to it."""
    from ..workflows.errors import NotFoundError
    from ..workflows.records.registry import RunRegistry

    async def work() -> None:
        async with _opened(db, read_only=False) as (registry, store):
            records = RunRegistry(store.kv)

            async def unfinished(session_id: str, run_id: str) -> bool:
                try:
                    run = await records.get(session_id, run_id)
                except NotFoundError:
                    return False  # pruned or never created: nothing needs the source
                return not run.status.terminal

            await registry.remove(name, unfinished)
        if json_output:
            emit_json({"name": name, "removed": True})
        else:
            stdout_console().print(f"source {name} is removed (its revisions are kept)")

    _run(work)


def probe_registered(name: str, db: str | None, timeout: float, json_output: bool) -> None:
    """``source probe NAME``: probe the current revision and record it."""

    async def work() -> None:
        async with _opened(db, read_only=False) as (registry, _):
            found = await registry.probe(name, os.environ, seconds=timeout)
            registered = await registry.get(name, found.revision)
        if not found.ok:
            raise CliError(
                f"source {name!r} revision {found.revision} did not answer: {found.error} "
                "(recorded as its last probe)"
            )
        identity = {"source": name, "revision": found.revision, **registered.source.identity()}
        tools = [tool.to_json() for tool in found.tools]
        result = {
            "source": identity,
            "server": found.server,
            "tools": tools,
            "probed_at": found.probed_at,
        }
        if json_output:
            emit_json(result)
            return
        render_probe(
            stdout_console(),
            found.server or {},
            tools,
            f"{name} (revision {found.revision})",
            note=f"recorded as the last probe of {name}",
        )

    _run(work)
