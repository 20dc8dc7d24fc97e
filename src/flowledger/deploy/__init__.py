"""The deploy layer (L3): MCP capability sources, their tools and fingerprints.

This part covers the sources themselves: specs (`StdioSource`, `HttpSource`), a session
with one source (`SourceSession`: bounded connect and call timeouts, every page of the
tool listing, typed errors), one session per source for a run (`SourcePool`), and tool
fingerprints (`contract_fingerprint`, `full_fingerprint`).
"""

from .fingerprint import (
    FingerprintError,
    contract_fingerprint,
    full_fingerprint,
    strip_annotations,
)
from .source_errors import (
    ConnectionLostError,
    SessionClosedError,
    SourceError,
    SourceProtocolError,
    SourceSpecError,
    SourceUnreachableError,
    ToolArgumentsError,
    ToolCallError,
    ToolCallFailedError,
    ToolCallRejectedError,
    ToolCallTimeoutError,
    ToolNotFoundError,
    ToolResultInvalidError,
)
from .source_pool import SourcePool
from .source_spec import HttpSource, Source, StdioSource
from .sources import ServerInfo, SourceSession, ToolResult
from .tool_info import ToolInfo

__all__ = [
    "ConnectionLostError",
    "FingerprintError",
    "HttpSource",
    "ServerInfo",
    "SessionClosedError",
    "Source",
    "SourceError",
    "SourcePool",
    "SourceProtocolError",
    "SourceSession",
    "SourceSpecError",
    "SourceUnreachableError",
    "StdioSource",
    "ToolArgumentsError",
    "ToolCallError",
    "ToolCallFailedError",
    "ToolCallRejectedError",
    "ToolCallTimeoutError",
    "ToolInfo",
    "ToolNotFoundError",
    "ToolResult",
    "ToolResultInvalidError",
    "contract_fingerprint",
    "full_fingerprint",
    "strip_annotations",
]
