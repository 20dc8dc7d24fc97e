"""``flowledger web``: the web dashboard (`flowledger.web`) until SIGINT or SIGTERM."""

from __future__ import annotations

from typing import Annotated

import typer

from .observing import LogFormatChoice, LogFormatOption
from .observing import log_format as chosen_format
from .runtime import CliError, Options, run_command
from .sources_file import SourcesOption, reconcile_sources

__all__ = ["register_web"]


def web(
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="URL",
            help="Database URL. \\[default: $FLOWLEDGER_DB or sqlite:///flowledger.db]",
            show_default=False,
        ),
    ] = None,
    app_ref: Annotated[
        str | None,
        typer.Option(
            "--app",
            metavar="MODULE:ATTR",
            help="The catalog to serve. \\[default: the built-in examples]",
            show_default=False,
        ),
    ] = None,
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Address to listen on.")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(
            "--port", metavar="PORT", min=0, max=65535, help="Port to listen on (0: any free port)."
        ),
    ] = 8000,
    tokens_file: Annotated[
        str | None,
        typer.Option(
            "--tokens-file",
            metavar="PATH",
            help="Bearer tokens (the MCP tokens file format): each token signs in to its "
            "own session. Required off loopback.",
            show_default=False,
        ),
    ] = None,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only", help="Serve no route that changes runs; runs beside the session's owner."
        ),
    ] = False,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            metavar="UUID",
            help="Serve this session (without tokens). \\[default: the database's default session]",
            show_default=False,
        ),
    ] = None,
    sources: SourcesOption = None,
    log_format: LogFormatOption = LogFormatChoice.HUMAN,
) -> None:
    """Serve the web dashboard: runs, their graphs and activity live, pauses to answer."""
    options = Options(db, app_ref, session)

    async def work() -> None:
        from ..httpsec import StartupError, load_tokens
        from ..web import WebServer, announce

        try:
            tokens = load_tokens(tokens_file) if tokens_file is not None else {}
            if sources is not None:
                await reconcile_sources(options.url, sources)
            server = WebServer(
                options.url,
                app=app_ref,
                host=host,
                port=port,
                tokens=tokens,
                read_only=read_only,
                session=session,
            )
            await server.run(ready=lambda url: announce(url, len(tokens), read_only))
        except StartupError as exc:
            raise CliError(str(exc)) from None

    run_command(work, quiet_logs=False, log_format=chosen_format(log_format))


def register_web(app: typer.Typer) -> None:
    app.command(name="web")(web)
