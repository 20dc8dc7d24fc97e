"""L4 surface: a session's tools over MCP (official ``mcp`` SDK): the ``workflow_*`` bundle,
the deploy, draft and capability tools, fork and prune; the document formats' JSON
Schemas as resources; instructions that describe the authoring loop.

* `serve_stdio` - one session over stdin/stdout (``flowledger mcp``);
* `serve_http` / `HttpMcpServer` - streamable HTTP with bearer tokens, one session per
  token (``flowledger mcp --http``);
* `load_tokens` - tokens from a file or ``FLOWLEDGER_MCP_TOKENS`` (`flowledger.httpsec`,
  shared with the dashboard);
* `build_server` / `WorkflowMcpServer` - the MCP server over any tool bundle.

Hosts catch `flowledger.httpsec.StartupError` (`McpStartupError`, or a `TokenError`; its
message is one line) and exit non-zero. ``python -m
flowledger.mcp`` is the same command line as ``flowledger mcp``.
"""

from ..httpsec.tokens import TOKENS_ENV, TokenError, load_tokens, parse_tokens, session_for_token
from .errors import McpStartupError
from .http import DEFAULT_HOST, DEFAULT_PORT, HttpMcpServer, is_loopback, serve_http
from .server import WorkflowMcpServer, build_server
from .sources_file import reconcile_sources_file
from .stdio import serve_stdio

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "TOKENS_ENV",
    "HttpMcpServer",
    "McpStartupError",
    "TokenError",
    "WorkflowMcpServer",
    "build_server",
    "is_loopback",
    "load_tokens",
    "parse_tokens",
    "serve",
    "serve_http",
    "serve_stdio",
    "session_for_token",
]


async def serve(
    db_url: str,
    *,
    app: str | None = None,
    session: str | None = None,
    read_only: bool = False,
    no_execute: bool = False,
    http: bool = False,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    tokens_file: str | None = None,
    allow_inline_sources: bool = False,
    sources: str | None = None,
) -> None:
    """What ``flowledger mcp`` does with its options: stdio, or (``http``) streamable HTTP
    with the tokens of ``tokens_file`` or ``$FLOWLEDGER_MCP_TOKENS``. With ``no_execute`` the
    server is a front door: it never owns a session, and workers execute the runs.
    ``sources``: a sources file (or directory) reconciled into the registry first."""
    if not http:
        if tokens_file is not None:
            raise McpStartupError("--tokens-file needs --http")
        if allow_inline_sources:
            raise McpStartupError(
                "--allow-inline-sources needs --http (a stdio server is the operator's own)"
            )
    tokens = load_tokens(tokens_file) if http else {}  # refused before anything is written
    if sources is not None:
        await reconcile_sources_file(db_url, sources)
    if not http:
        await serve_stdio(
            db_url, app=app, session=session, read_only=read_only, no_execute=no_execute
        )
        return
    await serve_http(
        db_url,
        app=app,
        host=host,
        port=port,
        tokens=tokens,
        read_only=read_only,
        no_execute=no_execute,
        session=session,
        allow_inline_sources=allow_inline_sources,
    )
