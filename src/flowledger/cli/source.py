"""``flowledger source``: MCP capability sources and the operator's source registry.

``source probe --stdio/--url`` connects once to a server given on the command line
(stdio: launches the command; HTTP: opens a session), lists every tool and disconnects.
On a terminal it prints a table (tool, the server's read-only and idempotent hints, the
first 12 hex digits of the contract and full fingerprints); with ``--json`` the whole
listing: the source's identity (environment and header *names* only), the server's
self-description, and per tool its schemas, annotations and both fingerprints in full,
ready to copy into an artifact's ``dependencies``. A source that cannot be reached is
one ``error:`` line and exit code 1. A stdio server's own stderr passes through to this
command's stderr. ``source probe NAME`` probes a registered source instead and records
the probe in the registry (``source_registry.py``).

The registry's commands (``add``, ``set``, ``list``, ``show``, ``enable``, ``disable``,
``remove``) are in ``source_registry.py``, ``migrate`` in ``source_migrate.py``.
"""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .runtime import CliError, DbOption, emit_json, run_command, stdout_console
from .source_migrate import migrate
from .source_registry import (
    add,
    disable,
    enable,
    list_sources,
    probe_registered,
    remove,
    set_source,
    show,
)
from .source_render import render_probe

if TYPE_CHECKING:
    from ..deploy.sources.spec import McpSource

# `flowledger.deploy` (and the MCP SDK under it) is imported inside the command, so
# that every other command starts without it.

__all__ = ["probe", "source_app"]

source_app = typer.Typer(
    help="MCP capability sources: the operator's registry, and what a server offers.",
    no_args_is_help=True,
)
source_app.command("add")(add)
source_app.command("set")(set_source)
source_app.command("list")(list_sources)
source_app.command("show")(show)
source_app.command("enable")(enable)
source_app.command("disable")(disable)
source_app.command("remove")(remove)
source_app.command("migrate")(migrate)

StdioOption = Annotated[
    str | None,
    typer.Option(
        "--stdio",
        metavar="'CMD ARGS'",
        help="Launch this command line (split as a shell would) and speak MCP over its "
        "stdin and stdout.",
        show_default=False,
    ),
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url", metavar="URL", help="A streamable HTTP MCP endpoint.", show_default=False
    ),
]
HeaderOption = Annotated[
    list[str] | None,
    typer.Option(
        "--header",
        "-H",
        metavar="NAME=VALUE",
        help="HTTP: a header to send with every request (repeatable).",
        show_default=False,
    ),
]
EnvOption = Annotated[
    list[str] | None,
    typer.Option(
        "--env",
        "-e",
        metavar="NAME[=VALUE]",
        help="stdio: an environment variable for the server (repeatable; a bare NAME passes "
        "this shell's value on); the server gets these and PATH, HOME, USER, SHELL, TERM, "
        "LOGNAME, nothing else.",
        show_default=False,
    ),
]
CwdOption = Annotated[
    str | None,
    typer.Option("--cwd", metavar="DIR", help="stdio: the server's working directory."),
]
TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        min=0.1,
        max=3600,
        metavar="S",
        help="Seconds to connect and finish the handshake, and again to list the tools.",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the whole listing as JSON (for scripts).")
]


@source_app.command("probe")
def probe(
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="NAME",
            help="A registered source: probe its current revision and record the probe.",
            show_default=False,
        ),
    ] = None,
    stdio: StdioOption = None,
    url: UrlOption = None,
    header: HeaderOption = None,
    env: EnvOption = None,
    cwd: CwdOption = None,
    timeout: TimeoutOption = 30.0,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """List a server's tools with their hints and fingerprints (for writing an
    artifact's dependencies): a registered source (NAME), or one given by --stdio or
    --url."""
    if name is not None:
        given = [
            option
            for option, value in (
                ("--stdio", stdio),
                ("--url", url),
                ("--header", header),
                ("--env", env),
                ("--cwd", cwd),
            )
            if value
        ]
        if given:
            raise typer.BadParameter(
                f"NAME probes a registered source, {', '.join(given)} a server given here: "
                "not both",
                param_hint=given[0],
            )
        probe_registered(name, db, timeout, json_output)
        return
    if db is not None:
        raise typer.BadParameter("--db goes with a registered source's NAME", param_hint="--db")

    from ..deploy import SourceError
    from ..deploy.sources.session import probe as probe_source

    source = _source(stdio, url, header or [], env or [], cwd)

    async def work() -> None:
        try:
            server, tools = await probe_source(source, seconds=timeout)
        except SourceError as exc:
            raise CliError(str(exc)) from None
        listing = [tool.to_json() for tool in tools]
        if json_output:
            emit_json({"source": source.identity(), "server": server.to_json(), "tools": listing})
            return
        render_probe(stdout_console(), server.to_json(), listing, source.label)

    run_command(work)


def _source(
    stdio: str | None, url: str | None, headers: list[str], env: list[str], cwd: str | None
) -> McpSource:
    from ..deploy import HttpSource, SourceError, StdioSource

    if (stdio is None) == (url is None):
        raise typer.BadParameter(
            "give exactly one of --stdio and --url", param_hint="--stdio/--url"
        )
    try:
        if stdio is not None:
            if headers:
                raise typer.BadParameter("--header needs --url", param_hint="--header")
            try:
                words = shlex.split(stdio)
            except ValueError as exc:
                raise typer.BadParameter(f"cannot split the command line: {exc}") from None
            if not words:
                raise typer.BadParameter("the command line is empty", param_hint="--stdio")
            variables = _pairs("--env", env, inherit=True)
            return StdioSource(words[0], words[1:], variables, cwd)
        assert url is not None
        if env or cwd is not None:
            raise typer.BadParameter("--env and --cwd need --stdio", param_hint="--env/--cwd")
        return HttpSource(url, _pairs("--header", headers))
    except SourceError as exc:
        raise typer.BadParameter(str(exc)) from None


def _pairs(option: str, given: list[str], *, inherit: bool = False) -> dict[str, Any]:
    """``NAME=VALUE`` items; with ``inherit``, a bare ``NAME`` takes this process's value
    (so a secret need not appear on the command line)."""
    pairs: dict[str, Any] = {}
    for item in given:
        name, equals, value = item.partition("=")
        if inherit and not equals and name:
            if name not in os.environ:
                raise typer.BadParameter(
                    f"{name} is not set in this environment", param_hint=option
                )
            value = os.environ[name]
        elif not equals or not name:
            # the value is not echoed: it may be a credential
            raise typer.BadParameter("expected NAME=VALUE", param_hint=option)
        pairs[name] = value
    return pairs
