"""OpenAPI capability sources through the Python API (`OpenApiSession`, the registry's
documents), against the tests' own real HTTP service (openapi_service.py) and documents
written to files: operations become tools with schemas from parameters, body and 2xx
JSON (3.0 schemas converted, component references kept as ``$defs``); calls send what
the document says, to the base URL only, with the operator's credential; everything that
can go wrong is a typed error or an error result, and a refused call sends nothing."""

from __future__ import annotations

import copy
import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy import ArtifactValidationError
from flowledger.deploy.deployments.document import validate_deployment
from flowledger.deploy.registry.document import validate_source
from flowledger.deploy.sources.connect import session_for
from flowledger.deploy.sources.errors import (
    OpenApiDocumentError,
    OpenApiExtraMissingError,
    OpenApiOperationError,
    SourceSpecError,
    SourceUnreachableError,
    ToolArgumentsError,
    ToolNotFoundError,
    ToolResultInvalidError,
)
from flowledger.deploy.sources.openapi_session import OpenApiSession
from flowledger.deploy.sources.openapi_spec import OpenApiAuth, OpenApiSource

from .openapi_service import item_document, item_service


def _write(tmp_path: Path, document: dict[str, Any], name: str = "doc.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_operations_are_tools_and_calls_reach_the_base_url_only(tmp_path: Path) -> None:
    document = item_document("3.0.3")
    schemas = document["components"]["schemas"]
    # 3.0 specifics, a recursive component, and a servers entry that is never used
    schemas["Item"]["properties"]["note"] = {"type": "string", "nullable": True, "example": "x"}
    schemas["Item"]["properties"]["parent"] = {"$ref": "#/components/schemas/Item"}
    schemas["New"]["properties"]["score"] = {
        "type": "number",
        "minimum": 0,
        "exclusiveMinimum": True,
    }
    document["servers"] = [{"url": f"http://127.0.0.1:{_closed_port()}"}]
    with item_service() as service:
        auth = OpenApiAuth("query", "key", "items_key", "q-secret")
        source = OpenApiSource(_write(tmp_path, document), service.url, auth=auth)
        assert "q-secret" not in repr(source) + json.dumps(source.identity())
        async with session_for(source) as session:
            assert isinstance(session, OpenApiSession)
            assert session.server_info.protocol_version == "openapi/3.0.3"
            tools = {tool.name: tool for tool in await session.list_tools()}
            assert list(tools) == ["addItem", "broken", "getItem", "listItems"]
            add = tools["addItem"]
            assert (add.read_only, add.idempotent, add.title) == (False, False, "Add an item.")
            body = add.input_schema["properties"]["body"]
            assert body["properties"]["score"] == {"type": "number", "exclusiveMinimum": 0}
            item = add.output_schema
            assert item is not None and item["type"] == "object"
            assert item["properties"]["note"] == {"type": ["string", "null"], "examples": ["x"]}
            assert item["properties"]["parent"] == {"$ref": "#/$defs/Item"}
            assert "Item" in item["$defs"]
            listing = tools["listItems"].output_schema
            assert listing is not None and listing["required"] == ["result"]

            made = await session.call_tool("addItem", {"body": {"name": "pear", "score": 2}})
            assert made.structured_content == {"id": 1, "name": "pear"}
            listed = await session.call_tool("listItems", {"limit": 1})
            assert listed.structured_content == {"result": [{"id": 1, "name": "pear"}]}
            missing = await session.call_tool("getItem", {"item_id": 9})
            assert missing.is_error and missing.text == 'HTTP 404 Not Found: {"detail":"no item 9"}'
            with pytest.raises(ToolResultInvalidError) as invalid:
                await session.call_tool("broken", {})
            assert invalid.value.failure_kind == "invalid_result"
            before = len(service.requests)
            for bad in ({"body": {"name": ""}}, {"body": {"name": "x"}, "extra": 1}, {}):
                with pytest.raises(ToolArgumentsError):
                    await session.call_tool("addItem", bad)
            with pytest.raises(ToolNotFoundError):
                await session.call_tool("deleteItem", {})
            assert len(service.requests) == before  # nothing was sent
        assert service.items == [{"id": 1, "name": "pear"}]
        assert all(path != "/openapi.json" for _, path in service.requests)  # a file document
        calls = [q for (_, path), q in zip(service.requests, service.queries, strict=True)
                 if path != "/"]  # fmt: skip
        assert calls == ["key=q-secret", "limit=1&key=q-secret", "key=q-secret", "key=q-secret"]
        assert ("POST", "/items") in service.requests


async def test_path_values_stay_one_segment_and_credentials_stay_hidden(tmp_path: Path) -> None:
    document = item_document()
    document["paths"]["/items/{item_id}"]["get"]["parameters"][0]["schema"] = {"type": "string"}
    with item_service() as service:
        auth = OpenApiAuth("header", "X-Key", "items_key", "h-secret")
        source = OpenApiSource(f"{service.url}/openapi.json", service.url, auth=auth)
        service.document = document
        async with OpenApiSession(source) as session:
            for value in ("..", "../openapi.json", "1/../../broken", "."):
                answer = await session.call_tool("getItem", {"item_id": value})
                assert answer.is_error and answer.text.startswith("HTTP 404")
        paths = [path for _, path in service.requests]
        assert paths.count("/openapi.json") == 1 and "/broken" not in paths
        assert "/items/../openapi.json" in paths  # one segment, its slashes encoded
        assert set(service.keys[2:]) == {"h-secret"}


async def test_what_cannot_be_read_listed_or_reached_is_a_typed_error(tmp_path: Path) -> None:
    port = _closed_port()
    good = _write(tmp_path, item_document())
    cases: list[tuple[OpenApiSource, type[Exception], str]] = [
        (
            OpenApiSource(str(tmp_path / "absent.json"), "http://127.0.0.1:1"),
            SourceUnreachableError,
            "cannot be read",
        ),
        (
            OpenApiSource(good, f"http://127.0.0.1:{port}"),
            SourceUnreachableError,
            "the base URL does not answer",
        ),
        (
            OpenApiSource(f"http://127.0.0.1:{port}/openapi.json", "http://127.0.0.1:1"),
            SourceUnreachableError,
            "cannot be fetched",
        ),
    ]
    swagger = {"swagger": "2.0", "info": {"title": "t", "version": "1"}, "paths": {}}
    no_info = {"openapi": "3.1.0", "paths": {}}
    for index, (bad, message) in enumerate(((swagger, "3.0.x or 3.1.x"), (no_info, "info"))):
        written = _write(tmp_path, bad, f"bad{index}.json")
        cases.append((OpenApiSource(written, "http://127.0.0.1:1"), OpenApiDocumentError, message))
    cookie = item_document()
    cookie["paths"]["/items"]["get"]["parameters"].append(
        {"name": "sid", "in": "cookie", "required": True, "schema": {"type": "string"}}
    )
    cases.append(
        (
            OpenApiSource(_write(tmp_path, cookie, "cookie.json"), "http://127.0.0.1:1"),
            OpenApiOperationError,
            "cookie parameter 'sid'",
        )
    )
    for source, kind, message in cases:
        with pytest.raises(kind, match=message) as raised:
            async with OpenApiSession(source, connect_timeout=10):
                pass
        assert raised.value.code in (
            "source_unreachable",
            "openapi_document_invalid",
            "openapi_operation_unsupported",
        )
    # a chosen operation that is fine is listed without the unsupported one
    with item_service() as service:
        chosen = OpenApiSource(_write(tmp_path, cookie, "c2.json"), service.url, ("getItem",))
        async with OpenApiSession(chosen) as session:
            assert [tool.name for tool in await session.list_tools()] == ["getItem"]


def test_specs_and_documents_are_checked_with_places() -> None:
    for bad, message in (
        (lambda: OpenApiSource("relative.json", "http://h"), "absolute path or a URL"),
        (lambda: OpenApiSource("/d.json", "ftp://h"), "http:// or https://"),
        (lambda: OpenApiSource("/d.json", "http://u:p@h"), "must not carry credentials"),
        (lambda: OpenApiSource("/d.json", "http://h", ("a", "a")), "operationId twice"),
        (
            lambda: OpenApiSource(
                "/d.json", "http://h", None, OpenApiAuth("header", "X", "s", "a\nb")
            ),
            "CR, LF or NUL",
        ),
    ):
        with pytest.raises(SourceSpecError, match=message):
            bad()

    def issues(**fields: Any) -> list[tuple[str, str]]:
        document = {"format": "flowledger.source/v1", "name": "items", **fields}
        with pytest.raises(ArtifactValidationError) as refused:
            validate_source(document)
        return [(issue.place, issue.code) for issue in refused.value.issues]

    spec = {"document": "/srv/items.json", "base_url": "http://items:8080"}
    assert issues(openapi={**spec, "auth": {"header": "X", "query": "k", "secret": "s"}}) == [
        ("openapi.auth", "bad_binding")
    ]
    assert issues(openapi={**spec, "auth": {"header": "X", "secret": "s"}}) == [
        ("secrets", "secret_undeclared")
    ]
    reserved = issues(
        openapi={**spec, "auth": {"header": "X", "secret": "FLOWLEDGER_TOKEN"}},
        secrets={"FLOWLEDGER_TOKEN": {}},
    )
    assert ("openapi.auth.secret", "secret_reserved") in reserved
    assert issues(openapi={**spec, "document": "items.json"}) == [("openapi", "bad_source")]
    assert issues(openapi=spec, builtin={}) == [("$", "bad_binding")]
    assert issues(openapi={**spec, "operations": ["a", "a"]}) == [
        ("openapi.operations", "duplicate")
    ]
    kept = validate_source(
        {
            "format": "flowledger.source/v1",
            "name": "items",
            "openapi": {**spec, "auth": {"query": "api_key", "secret": "k"}},
            "secrets": {"k": {"env": "ITEMS_KEY"}},
        }
    )
    assert kept.kind == "openapi"
    assert kept.identity() == {
        "transport": "openapi",
        "document": "/srv/items.json",
        "base_url": "http://items:8080",
        "operations": None,
        "auth": {"query": "api_key", "secret": "k"},
        "secrets": ["k"],
    }
    assert kept.missing_secret("s", {}) == (
        "k",
        "whose variable ITEMS_KEY is not set in this process",
    )
    concrete = kept.concrete({"k": "v"})
    assert isinstance(concrete, OpenApiSource) and concrete.auth is not None
    assert concrete.auth.value == "v"
    with pytest.raises(ArtifactValidationError) as inline:
        validate_deployment(
            {
                "format": "flowledger.deployment/v1",
                "name": "items_dep",
                "artifact": {"name": "items_flow", "version": "1"},
                "sources": {"items": {"openapi": copy.deepcopy(spec), "allow_tools": ["x"]}},
            }
        )
    assert [(i.place, i.code) for i in inline.value.issues] == [
        ("sources.items.openapi", "field_unknown")
    ]


async def test_a_service_gone_after_opening_is_unavailable_and_nothing_was_sent() -> None:
    with item_service() as service:
        session = OpenApiSession(OpenApiSource(f"{service.url}/openapi.json", service.url))
        await session.open()
    try:
        with pytest.raises(SourceUnreachableError, match="the base URL does not answer") as gone:
            await session.call_tool("addItem", {"body": {"name": "late"}})
        assert (gone.value.failure_kind, gone.value.outcome_unknown) == ("unavailable", False)
    finally:
        await session.close()
    assert service.items == []


async def test_without_the_openapi_extra_a_document_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The validator is the `openapi` extra: without it, opening a source says to install
    it (openapi_extra_missing) instead of failing on an import."""
    document = item_document()
    document["info"]["title"] = "not read before"  # a digest no listing is cached under
    source = OpenApiSource(_write(tmp_path, document), "http://127.0.0.1:1")
    monkeypatch.setitem(sys.modules, "openapi_spec_validator", None)  # import fails
    with pytest.raises(OpenApiExtraMissingError, match=r"flowledger\[openapi\]") as raised:
        async with OpenApiSession(source, connect_timeout=10):
            pass
    assert raised.value.code == "openapi_extra_missing"
