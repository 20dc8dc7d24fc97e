"""The MCP server's resources: the JSON Schemas of the document formats a model writes
(`flowledger.deploy.schemas.SCHEMAS`), at ``flowledger://schemas/<name>``
(``artifact``, ``deployment``, ``source``), as ``application/schema+json`` text.

They are the same for every session and read nothing from the database: a tenant of an
HTTP server learns the formats from them and nothing else. Any other URI is refused with
``INVALID_PARAMS`` (the protocol's "resource not found") naming the URIs there are; the
URI is not echoed beyond a bounded quote.
"""

from __future__ import annotations

import json
from typing import Final

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..deploy.schemas import SCHEMAS, SCHEME, schema_uri

__all__ = ["MIME_TYPE", "SCHEME", "list_resources", "read_resource", "schema_uri"]

MIME_TYPE: Final = "application/schema+json"
_MAX_QUOTED: Final = 64


def list_resources() -> list[types.Resource]:
    return [
        types.Resource(
            uri=schema_uri(item.name),
            name=f"{item.name}-schema",
            title=f"JSON Schema of {item.format}",
            description=item.description,
            mime_type=MIME_TYPE,
        )
        for item in SCHEMAS.values()
    ]


def read_resource(uri: str) -> types.ReadResourceResult:
    """The schema at ``uri``; any other URI raises `MCPError` (``INVALID_PARAMS``)."""
    name = uri[len(SCHEME) :] if uri.startswith(SCHEME) else None
    found = SCHEMAS.get(name) if name is not None else None
    if found is None:
        known = ", ".join(schema_uri(item) for item in SCHEMAS)
        quoted = repr(uri[:_MAX_QUOTED]) + ("..." if len(uri) > _MAX_QUOTED else "")
        raise MCPError(types.INVALID_PARAMS, f"no resource {quoted}: this server has {known}")
    text = json.dumps(found.build(), ensure_ascii=False, separators=(",", ":"))
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type=MIME_TYPE, text=text)]
    )
