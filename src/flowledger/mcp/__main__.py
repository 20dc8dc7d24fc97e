"""``python -m flowledger.mcp``: the ``flowledger mcp`` command without the CLI."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from ..host import database_url
from ..httpsec import StartupError
from . import DEFAULT_HOST, DEFAULT_PORT, serve


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m flowledger.mcp",
        description="Serve a workflow session's tools over MCP (stdio, or streamable HTTP).",
    )
    p.add_argument("--db", help="database URL (default: $FLOWLEDGER_DB or sqlite:///flowledger.db)")
    p.add_argument("--app", help="module:attribute naming a Catalog (default: built-in examples)")
    p.add_argument("--session", help="session UUID (default: the database's default session)")
    p.add_argument("--read-only", action="store_true", help="hide and refuse the mutating tools")
    p.add_argument(
        "--no-execute",
        action="store_true",
        help="front door: never own the session; `flowledger worker` processes execute runs",
    )
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"HTTP address (default {DEFAULT_HOST})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port ({DEFAULT_PORT})")
    p.add_argument(
        "--tokens-file",
        help="bearer tokens, one 'token [session-uuid]' a line (default: $FLOWLEDGER_MCP_TOKENS)",
    )
    p.add_argument(
        "--sources",
        metavar="FILE",
        help="a sources file (or directory) reconciled into the source registry first",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        asyncio.run(
            serve(
                database_url(args.db),
                app=args.app,
                session=args.session,
                read_only=args.read_only,
                no_execute=args.no_execute,
                http=args.http,
                host=args.host,
                port=args.port,
                tokens_file=args.tokens_file,
                sources=args.sources,
            )
        )
    except StartupError as exc:
        print(f"flowledger mcp: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
