"""What calling an OpenAPI operation as a capability costs over a plain HTTP call.

    .venv/bin/python bench/openapi_capability.py [--calls 1000] [--warmup 50] [--json]

A small Starlette service under uvicorn (in a thread of this process, on 127.0.0.1)
serves its own OpenAPI 3.1 document and two operations: ``GET /items?limit=N``
(``listItems``, ten items) and ``POST /items`` (``addItem``, echoes the new item). Each is
called ``--calls`` times with a plain ``httpx2.AsyncClient`` (the request built by hand,
the JSON body parsed) and through `OpenApiSession.call_tool` (what a tool node calls
through the run's pool), alternated call by call with the order flipped every pair, so
machine noise lands on both alike. Reported per operation: median and p99 of each, the
overhead at the median and at the p99, and the median of the paired differences.

What the overhead contains: the tool lookup, validating the arguments against the input
schema (jsonschema), building the request from the parameters, reading the body with a
size bound, parsing it, validating it against the output schema, and building the
`ToolResult` (structured content plus its JSON text). The service's own time and the
loopback round trip are in both columns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from flowledger.deploy.sources.openapi_session import OpenApiSession
from flowledger.deploy.sources.openapi_spec import OpenApiSource

ITEM = {
    "type": "object",
    "required": ["id", "name"],
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
}
DOCUMENT = {
    "openapi": "3.1.0",
    "info": {"title": "Bench items", "version": "1"},
    "paths": {
        "/items": {
            "get": {
                "operationId": "listItems",
                "parameters": [
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}}
                ],
                "responses": {
                    "200": {
                        "description": "items",
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
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {"name": {"type": "string"}},
                            }
                        }
                    },
                },
                "responses": {
                    "201": {
                        "description": "the item",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Item"}}
                        },
                    }
                },
            },
        }
    },
    "components": {"schemas": {"Item": ITEM}},
}
ITEMS = [{"id": n, "name": f"item {n}"} for n in range(1, 11)]


def _app() -> Starlette:
    async def openapi(request: Request) -> Response:
        return JSONResponse(DOCUMENT)

    async def items(request: Request) -> Response:
        if request.method == "POST":
            body = await request.json()
            return JSONResponse({"id": 11, "name": body["name"]}, status_code=201)
        return JSONResponse(ITEMS[: int(request.query_params.get("limit", "10"))])

    async def root(request: Request) -> Response:
        return Response(status_code=204)

    return Starlette(
        routes=[
            Route("/", root, methods=["GET", "HEAD"]),
            Route("/openapi.json", openapi),
            Route("/items", items, methods=["GET", "POST"]),
        ]
    )


def _wait_started(server: uvicorn.Server) -> None:
    for _ in range(3000):  # a hang deadline
        if server.started:
            return
        time.sleep(0.01)
    raise RuntimeError("the bench service did not start")


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_us": statistics.median(samples),
        "p99_us": percentile(samples, 0.99),
        "mean_us": statistics.fmean(samples),
    }


async def _pair(
    plain: Callable[[], Awaitable[Any]],
    capability: Callable[[], Awaitable[Any]],
    calls: int,
    warmup: int,
) -> dict[str, Any]:
    async def timed(call: Callable[[], Awaitable[Any]]) -> float:
        started = time.perf_counter_ns()
        await call()
        return (time.perf_counter_ns() - started) / 1e3

    for _ in range(warmup):
        await timed(plain)
        await timed(capability)
    plain_us: list[float] = []
    capability_us: list[float] = []
    for i in range(calls):
        if i % 2 == 0:
            plain_us.append(await timed(plain))
            capability_us.append(await timed(capability))
        else:
            capability_us.append(await timed(capability))
            plain_us.append(await timed(plain))
    theirs, ours = summary(plain_us), summary(capability_us)
    return {
        "plain": theirs,
        "capability": ours,
        "overhead_median_us": ours["median_us"] - theirs["median_us"],
        "overhead_p99_us": ours["p99_us"] - theirs["p99_us"],
        "overhead_paired_median_us": statistics.median(
            mine - other for mine, other in zip(capability_us, plain_us, strict=True)
        ),
    }


async def measure(calls: int, warmup: int) -> dict[str, Any]:
    server = uvicorn.Server(uvicorn.Config(_app(), host="127.0.0.1", port=0, log_level="error"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    await asyncio.to_thread(_wait_started, server)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    try:
        source = OpenApiSource(f"{url}/openapi.json", url)
        async with OpenApiSession(source) as session, httpx2.AsyncClient() as client:

            async def list_plain() -> None:
                answer = await client.get(f"{url}/items", params={"limit": 5})
                assert answer.status_code == 200 and len(answer.json()) == 5

            async def list_capability() -> None:
                result = await session.call_tool("listItems", {"limit": 5})
                assert result.structured_content is not None
                assert len(result.structured_content["result"]) == 5

            async def add_plain() -> None:
                answer = await client.post(f"{url}/items", json={"name": "pear"})
                assert answer.status_code == 201 and answer.json()["name"] == "pear"

            async def add_capability() -> None:
                result = await session.call_tool("addItem", {"body": {"name": "pear"}})
                assert result.structured_content == {"id": 11, "name": "pear"}

            results = {
                "listItems (GET, 5 items)": await _pair(list_plain, list_capability, calls, warmup),
                "addItem (POST, JSON body)": await _pair(add_plain, add_capability, calls, warmup),
            }
    finally:
        server.should_exit = True
        thread.join(20)
    return {
        "calls": calls,
        "operations": results,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="measured calls each way")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured calls first")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    options = parser.parse_args()
    result = asyncio.run(measure(options.calls, options.warmup))
    if options.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{result['calls']} calls each way, python {result['python']}, {result['machine']}, "
        f"load {result['load']:.1f}\n"
    )
    print(
        "| operation | plain httpx2 median / p99 µs | capability median / p99 µs | "
        "overhead at the median / p99 µs | paired median µs |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, row in result["operations"].items():
        print(
            f"| {label} | {row['plain']['median_us']:.0f} / {row['plain']['p99_us']:.0f} | "
            f"{row['capability']['median_us']:.0f} / {row['capability']['p99_us']:.0f} | "
            f"{row['overhead_median_us']:.0f} / {row['overhead_p99_us']:.0f} | "
            f"{row['overhead_paired_median_us']:.0f} |"
        )


if __name__ == "__main__":
    main()
