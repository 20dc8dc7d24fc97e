"""Python and built-in sources over the HTTP MCP server, through the SDK client, with two
bearer tokens, on a server that even allows inline sources (the most a tenant is given):

* no tenant can name a module: ``source_probe`` with a ``python`` spec, a deployment
  binding one inline, and a probe or call of a registered Python source its session may
  not see are all refused, and the module (which writes a marker file when imported) is
  never imported;
* the session the operator granted the source calls its read-only function with
  ``capability_call`` (only then is the module imported), and every session calls the
  built-in transforms."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowledger.deploy.registry.store import SourceRegistry
from flowledger.mcp import session_for_token
from flowledger.storage import open_store

from ..mcp.conftest import error_text, http_client, http_server, payload
from .test_catalog import code_of

TOKEN_A = "token-a-python-0123456789"
TOKEN_B = "token-b-python-0123456789"
SESSION_A = session_for_token(TOKEN_A)
SESSION_B = session_for_token(TOKEN_B)


@pytest.fixture
def marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A module on ``sys.path`` that appends to a marker file when it is imported."""
    name = f"fl_marked_{uuid.uuid4().hex[:10]}"
    marker = tmp_path / "imported"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            with open({str(marker)!r}, "a") as _marker:
                _marker.write("imported\\n")

            def add_up(a: int, b: int) -> int:
                return a + b
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, marker
    sys.modules.pop(name, None)


async def test_no_tenant_names_a_module_and_granted_ones_call_functions(
    tmp_path: Path, marked: tuple[str, Path]
) -> None:
    module, marker = marked
    url = f"sqlite:///{tmp_path / 'python.db'}"
    async with open_store(url) as store:
        registry = SourceRegistry.over(store)
        await registry.add(
            {
                "format": "flowledger.source/v1",
                "name": "calc",
                "python": {"module": module, "read_only": ["add_up"]},
                "sessions": [SESSION_A],
            }
        )
        await registry.add({"format": "flowledger.source/v1", "name": "std", "builtin": {}})
    tokens = {TOKEN_A: SESSION_A, TOKEN_B: SESSION_B}
    async with (
        http_server(url, tokens=tokens, allow_inline_sources=True) as served,
        http_client(served, TOKEN_A) as a,
        http_client(served, TOKEN_B) as b,
    ):
        for client in (a, b):
            inline = await client.call_tool("source_probe", {"python": {"module": module}})
            assert "python" in error_text(inline), error_text(inline)
            saved = await client.call_tool(
                "deployment_save",
                {
                    "document": {
                        "format": "flowledger.deployment/v1",
                        "name": "calc_dep",
                        "artifact": {"name": "calc_flow", "version": "1"},
                        "sources": {
                            "calc": {"python": {"module": module}, "allow_tools": ["add_up"]}
                        },
                    }
                },
            )
            assert "sources.calc.python" in error_text(saved)
        hidden = await b.call_tool("source_probe", {"source": "calc"})
        assert "source 'calc' is not registered" in error_text(hidden)
        for tool, arguments in (
            ("capability_inspect", {"source": "calc", "tool": "add_up"}),
            ("capability_call", {"source": "calc", "tool": "add_up", "arguments": {"a": 1}}),
        ):
            refused = await b.call_tool(tool, arguments)
            assert code_of(error_text(refused)) == "source_missing", tool
        seen = payload(await b.call_tool("capability_list", {}))
        assert {s["source"] for s in seen["sources"]} == {"std"}
        assert not marker.exists() and module not in sys.modules

        called = payload(
            await a.call_tool(
                "capability_call",
                {"source": "calc", "tool": "add_up", "arguments": {"a": 2, "b": 3}},
            )
        )
        assert (called["outcome"], called["structured_content"]) == ("ok", {"result": 5})
        assert marker.read_text() == "imported\n"
        for client in (a, b):
            templated = payload(
                await client.call_tool(
                    "capability_call",
                    {
                        "source": "std",
                        "tool": "template",
                        "arguments": {"text": "hi {{who}}", "values": {"who": "you"}},
                    },
                )
            )
            assert templated["structured_content"] == {"result": "hi you"}
