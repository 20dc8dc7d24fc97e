"""A small real HTTP service of the tests' own that serves its own OpenAPI document.

`ItemService` is a Starlette app under uvicorn, in a thread, on 127.0.0.1 and an
ephemeral port: ``GET /openapi.json`` (the document, which a test may change:
`ItemService.document`), ``GET /items`` (``listItems``: the items, optionally the first
``limit``; read-only), ``POST /items`` (``addItem``: appends ``body.name``, answers the
new item with status 201), ``GET /items/{item_id}`` (``getItem``; 404 when there is no
such item), ``GET /broken`` (``broken``: answers JSON its document says it will not).
`ItemService.serving` False makes the document answer 503.
Every request is counted (`requests`, by method and path) and its ``X-Key`` header
(`keys`) and query string (`queries`) recorded (where a source sends its credential),
so tests can see what reached the service.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

ITEM = {
    "type": "object",
    "required": ["id", "name"],
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
}


def item_document(version: str = "3.1.0") -> dict[str, Any]:
    """The service's OpenAPI document (3.0 or 3.1: the same operations)."""
    return {
        "openapi": version,
        "info": {"title": "Items", "version": "1.0"},
        "paths": {
            "/items": {
                "get": {
                    "operationId": "listItems",
                    "summary": "List the items.",
                    "parameters": [
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "integer", "minimum": 1},
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "The items.",
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "type": "array",
                                        "items": {"$ref": "#/components/schemas/Item"},
                                    }
                                }
                            },
                        }
                    },
                },
                "post": {
                    "operationId": "addItem",
                    "summary": "Add an item.",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/New"}}
                        },
                    },
                    "responses": {
                        "201": {
                            "description": "The new item.",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/Item"}
                                }
                            },
                        }
                    },
                },
            },
            "/items/{item_id}": {
                "get": {
                    "operationId": "getItem",
                    "parameters": [
                        {
                            "name": "item_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "integer"},
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "The item.",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/Item"}
                                }
                            },
                        },
                        "404": {"description": "No such item."},
                    },
                }
            },
            "/broken": {
                "get": {
                    "operationId": "broken",
                    "responses": {
                        "200": {
                            "description": "Says an item; answers something else.",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/Item"}
                                }
                            },
                        }
                    },
                }
            },
        },
        "components": {
            "schemas": {
                "Item": copy.deepcopy(ITEM),
                "New": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"type": "string", "minLength": 1}},
                    "additionalProperties": False,
                },
            }
        },
    }


class ItemService:
    """The service's state: its document, its items and what reached it."""

    def __init__(self, version: str = "3.1.0") -> None:
        self.document = item_document(version)
        self.items: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self.keys: list[str | None] = []
        self.queries: list[str] = []
        self.url = ""
        self.serving = True  # False: the document answers 503

    def count(self, method: str, path: str) -> int:
        return sum(1 for seen in self.requests if seen == (method, path))

    def app(self) -> Starlette:
        async def openapi(request: Request) -> Response:
            if not self.serving:
                return JSONResponse({"detail": "down for maintenance"}, status_code=503)
            return JSONResponse(self.document)

        async def items(request: Request) -> Response:
            if request.method == "POST":
                body = await request.json()
                item = {"id": len(self.items) + 1, "name": body["name"]}
                self.items.append(item)
                return JSONResponse(item, status_code=201)
            limit = request.query_params.get("limit")
            shown = self.items if limit is None else self.items[: int(limit)]
            return JSONResponse(shown)

        async def one(request: Request) -> Response:
            wanted = request.path_params["item_id"]
            for item in self.items:
                if str(item["id"]) == wanted:
                    return JSONResponse(item)
            return JSONResponse({"detail": f"no item {wanted}"}, status_code=404)

        async def broken(request: Request) -> Response:
            return JSONResponse({"id": "not a number"})

        async def root(request: Request) -> Response:
            return Response(status_code=204)

        app = Starlette(
            routes=[
                Route("/", root, methods=["GET", "HEAD"]),
                Route("/openapi.json", openapi),
                Route("/items", items, methods=["GET", "POST"]),
                Route("/items/{item_id}", one),
                Route("/broken", broken),
            ]
        )

        async def counted(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.requests.append((scope["method"], scope["path"]))
                headers = dict(scope.get("headers") or [])
                key = headers.get(b"x-key")
                self.keys.append(None if key is None else key.decode())
                self.queries.append(scope.get("query_string", b"").decode())
            await app(scope, receive, send)

        return counted  # type: ignore[return-value]


@contextmanager
def item_service(version: str = "3.1.0") -> Iterator[ItemService]:
    """`ItemService` listening on 127.0.0.1 (its ``url``) until the block ends."""
    service = ItemService(version)
    config = uvicorn.Config(service.app(), host="127.0.0.1", port=0, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    for _ in range(2000):  # a hang deadline, not a timing bound
        if server.started:
            break
        threading.Event().wait(0.01)
    assert server.started, "the item service did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    service.url = f"http://127.0.0.1:{port}"
    try:
        yield service
    finally:
        server.should_exit = True
        thread.join(20)
