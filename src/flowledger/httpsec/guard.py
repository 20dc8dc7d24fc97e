"""What every request passes before a server's application sees it.

`Guard` wraps an ASGI application (the MCP endpoint, the dashboard). For each HTTP
request, in this order:

1. the Host and Origin checks (`flowledger.httpsec.origins.HostPolicy`);
2. the body limit: a ``Content-Length`` over ``max_body`` is refused at once, and a body
   sent without one (chunked) is read up to ``max_body`` bytes and refused as soon as it
   is longer. Only a body within the limit is handed on, whole, so an oversized request
   never reaches the application: 413, and nothing was parsed or run.

A refusal is answered by the server's own ``respond`` function (a JSON-RPC error for
the MCP server, an error page for the dashboard) with the `Refusal`'s status and
message, which the server may adapt. The body the guard read is what the application
receives; it can also take it with `request_body` without reading it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .origins import Check, HostPolicy

__all__ = ["DEFAULT_MAX_BODY", "Guard", "Refusal", "Respond", "request_body"]

#: The default body limit of both servers (1 MiB).
DEFAULT_MAX_BODY: Final = 1 << 20
_BODY: Final = "flowledger.httpsec.body"


@dataclass(frozen=True)
class Refusal:
    """Why the guard refused a request: ``check`` is ``host``, ``origin``, ``size`` or
    ``length`` (a Content-Length that is no number)."""

    check: str
    status: int
    message: str


Respond = Callable[[Scope, Refusal], Response]

_ORIGIN_REFUSALS: Final = {
    Check.HOST: Refusal("host", 421, "this server answers only to a loopback host name"),
    Check.ORIGIN: Refusal("origin", 403, "cross-origin request refused"),
}


def request_body(scope: Scope) -> bytes:
    """The body `Guard` read for this request (``b""`` for none)."""
    body = scope.get(_BODY)
    if not isinstance(body, bytes):
        raise RuntimeError("request_body needs the request to pass through Guard first")
    return body


class Guard:
    """ASGI middleware applying the checks of the module doc before ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        loopback: bool,
        respond: Respond,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 0:
            raise ValueError(f"max_body must be a whole number of bytes, not {max_body!r}")
        self.app = app
        self.policy = HostPolicy(loopback)
        self.max_body = max_body
        self._respond = respond
        self._too_large = Refusal("size", 413, f"the request body is over {max_body} bytes")

    async def _refuse(self, refusal: Refusal, scope: Scope, receive: Receive, send: Send) -> None:
        await self._respond(scope, refusal)(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        check = self.policy.refusal(headers)
        if check is not None:
            await self._refuse(_ORIGIN_REFUSALS[check], scope, receive, send)
            return
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                refusal = Refusal("length", 400, "the Content-Length header is not a number")
                await self._refuse(refusal, scope, receive, send)
                return
            if int(length) > self.max_body:
                await self._refuse(self._too_large, scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before its body was complete: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await self._refuse(self._too_large, scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        scope[_BODY] = body
        whole: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay() -> Message:
            if whole:
                return whole.pop()
            return await receive()

        await self.app(scope, replay, send)
