"""OpenAPI sources over the HTTP MCP server, through the SDK client, with two bearer
tokens, on a server that even allows inline sources (the most a tenant is given):

* no tenant can name a document, a URL or a base URL: ``source_probe`` with an
  ``openapi`` spec and a deployment binding one inline are refused, and a probe, an
  inspection or a call of a registered OpenAPI source its session may not see are
  refused, and the service (which counts every request) is never asked anything;
* the session the operator granted the source calls its read-only operation with
  ``capability_call``, with the operator's credential, and only then is the service
  asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.mcp import session_for_token
from flowledger.storage import open_store

from ..mcp.conftest import error_text, http_client, http_server, payload
from .openapi_service import item_service
from .test_catalog import code_of

TOKEN_A = "token-a-openapi-0123456789"
TOKEN_B = "token-b-openapi-0123456789"
SESSION_A = session_for_token(TOKEN_A)
SESSION_B = session_for_token(TOKEN_B)


async def test_no_tenant_names_a_document_or_url_and_granted_ones_call_operations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ITEMS_KEY", "k-mcp")
    url = f"sqlite:///{tmp_path / 'openapi.db'}"
    with item_service() as service:
        spec = {"document": f"{service.url}/openapi.json", "base_url": service.url}
        async with open_store(url) as store:
            await SourceRegistry.over(store).add(
                {
                    "format": "flowledger.source/v1",
                    "name": "items",
                    "openapi": {**spec, "auth": {"header": "X-Key", "secret": "key"}},
                    "secrets": {"key": {"env": "ITEMS_KEY"}},
                    "sessions": [SESSION_A],
                }
            )
        tokens = {TOKEN_A: SESSION_A, TOKEN_B: SESSION_B}
        async with (
            http_server(url, tokens=tokens, allow_inline_sources=True) as served,
            http_client(served, TOKEN_A) as a,
            http_client(served, TOKEN_B) as b,
        ):
            for client in (a, b):
                inline = await client.call_tool("source_probe", {"openapi": spec})
                assert "openapi" in error_text(inline), error_text(inline)
                saved = await client.call_tool(
                    "deployment_save",
                    {
                        "document": {
                            "format": "flowledger.deployment/v1",
                            "name": "items_dep",
                            "artifact": {"name": "items_flow", "version": "1"},
                            "sources": {"items": {"openapi": spec, "allow_tools": ["listItems"]}},
                        }
                    },
                )
                assert "sources.items.openapi" in error_text(saved)
            hidden = await b.call_tool("source_probe", {"source": "items"})
            assert "source 'items' is not registered" in error_text(hidden)
            for tool, arguments in (
                ("capability_inspect", {"source": "items", "tool": "listItems"}),
                ("capability_call", {"source": "items", "tool": "listItems", "arguments": {}}),
            ):
                refused = await b.call_tool(tool, arguments)
                assert code_of(error_text(refused)) == "source_missing", tool
            seen = payload(await b.call_tool("capability_list", {}))
            assert seen["sources"] == []
            assert service.requests == []

            called = payload(
                await a.call_tool(
                    "capability_call",
                    {"source": "items", "tool": "listItems", "arguments": {"limit": 2}},
                )
            )
            assert (called["outcome"], called["structured_content"]) == ("ok", {"result": []})
            assert ("GET", "/items") in service.requests
            assert service.keys[service.requests.index(("GET", "/items"))] == "k-mcp"
            assert "k-mcp" not in str(called)
