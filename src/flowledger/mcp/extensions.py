"""Installing an SDK `Extension` on a low-level `Server` (the SDK applies extensions only
in its high-level ``MCPServer``): its methods, gated to their protocol revisions, its
``tools/call`` interceptor around the server's handler, and its capability ad."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.extension import (
    Extension,
    MethodBinding,
    RequestHandler,
    compose_tool_call_handler,
)
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

__all__ = ["install_extension"]


def _gated(binding: MethodBinding) -> RequestHandler:
    """``binding``'s handler, answering "method not found" at any other revision."""
    versions = binding.protocol_versions

    async def handler(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        if versions is not None and ctx.protocol_version not in versions:
            raise MCPError(types.METHOD_NOT_FOUND, f"Method not found: {binding.method}")
        return await binding.handler(ctx, params)

    return handler


def install_extension(server: Server[Any], extension: Extension, call_tool: RequestHandler) -> None:
    """Serve ``extension`` on ``server``, whose ``tools/call`` handler is ``call_tool``."""
    for binding in extension.methods():
        if server.get_request_handler(binding.method) is not None:
            raise ValueError(f"{binding.method} is already served")
        server.add_request_handler(binding.method, binding.params_type, _gated(binding))
    server.add_request_handler(
        "tools/call",
        types.CallToolRequestParams,
        compose_tool_call_handler([extension], call_tool),
    )
    server.extensions[extension.identifier] = extension.settings()
