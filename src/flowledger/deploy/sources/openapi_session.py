"""A session with an OpenAPI source: the interface `SourceSession` offers for MCP servers
(``open``, ``list_tools``, ``tool``, ``call_tool``, ``close``, ``server_info``), over the
operations of an OpenAPI document called with httpx, so the pool, tool nodes, probes,
the capability catalog and revalidation need nothing of their own for it.

Opening reads the document (a file, or a ``GET`` of its URL), validates it with
``openapi-spec-validator`` (3.0 or 3.1 only), lists its operations (`operation_tools`)
and asks the base URL once (``HEAD``; any answer, even an error status, means it is
there), all within the connect timeout. A document that cannot be read, or a base URL
that does not answer, is `SourceUnreachableError` (a run pinned to it is blocked with
``source_unreachable``); a document that is not valid is `OpenApiDocumentError`. The
listing is kept per document digest, so a session (one segment of a run, one probe or
one check) parses and validates a document only when its bytes changed.

The server info is the document's ``info`` (title, version), its OpenAPI version as the
protocol, and the SHA-256 of its bytes as ``document`` (pinned with the run).

A call sends one request to ``base_url`` + the operation's path (redirects are not
followed: the credential goes to the base URL only). A 2xx answer is the result (its
JSON checked against the output schema); any other status is a result with
``is_error`` saying the status and at most `MAX_ERROR_BODY_CHARS` of the body. A
connection that cannot be made is ``unavailable`` (nothing was sent), no answer in time
``timeout``, a connection lost after the request may have been sent ``outcome_unknown``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TextIO, TypeAlias

import httpx2 as httpx
import yaml

from .errors import (
    OpenApiDocumentError,
    OpenApiExtraMissingError,
    SessionClosedError,
    SourceUnreachableError,
    ToolArgumentsError,
    ToolCallFailedError,
    ToolCallTimeoutError,
    ToolNotFoundError,
    ToolResultInvalidError,
    clip,
)
from .openapi_spec import OpenApiSource, document_label
from .openapi_tools import OpenApiOperation, operation_tools
from .session import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, ServerInfo, ToolResult
from .session_base import SessionBase
from .tool_info import ToolInfo

__all__ = ["MAX_DOCUMENT_BYTES", "MAX_RESPONSE_BYTES", "OpenApiSession"]

MAX_DOCUMENT_BYTES: Final = 8 * 1024 * 1024
MAX_RESPONSE_BYTES: Final = 4 * 1024 * 1024
MAX_ERROR_BODY_CHARS: Final = 1000


_Listing: TypeAlias = tuple[ServerInfo, dict[str, tuple[OpenApiOperation, Any, Any]]]
#: Listings by (label, document, digest, selection), the oldest dropped first. Keyed by
#: digest, not bytes: a cache of documents' bytes would hold up to 8 MiB an entry.
_listings: OrderedDict[tuple[str, str, str, tuple[str, ...] | None], _Listing] = OrderedDict()
_listings_lock = threading.Lock()
MAX_LISTINGS: Final = 32


def _listing(
    label: str, shown: str, digest: str, data: bytes, selected: tuple[str, ...] | None
) -> _Listing:
    """`_parse`, once per digest and selection in this process."""
    key = (label, shown, digest, selected)
    with _listings_lock:
        found = _listings.get(key)
        if found is not None:
            _listings.move_to_end(key)
            return found
    made = _parse(label, shown, digest, data, selected)
    with _listings_lock:
        _listings[key] = made
        while len(_listings) > MAX_LISTINGS:
            _listings.popitem(last=False)
    return made


def _parse(
    label: str, shown: str, digest: str, data: bytes, selected: tuple[str, ...] | None
) -> _Listing:
    """Parse, validate and list a document."""
    try:  # the `openapi` extra, imported only where a document is read
        from openapi_spec_validator import validate
    except ImportError:
        raise OpenApiExtraMissingError(label) from None

    try:
        document = json.loads(data) if data.lstrip()[:1] in (b"{", b"[") else None
        if document is None:
            document = yaml.safe_load(data)
    except (ValueError, yaml.YAMLError) as exc:
        raise OpenApiDocumentError(label, shown, f"it is not JSON or YAML: {exc}") from None
    if not isinstance(document, dict):
        raise OpenApiDocumentError(label, shown, "it is not an object")
    version = str(document.get("openapi", ""))
    if not version.startswith(("3.0.", "3.1.")):
        raise OpenApiDocumentError(
            label, shown, f"openapi is {version or 'missing'}; 3.0.x or 3.1.x is supported"
        )
    try:
        validate(document)
    except Exception as exc:  # OpenAPIValidationError, a reference that cannot be resolved
        raise OpenApiDocumentError(label, shown, str(exc)) from None
    operations = operation_tools(label, document, selected)
    info = document.get("info") or {}
    server = ServerInfo(
        str(info.get("title")) if info.get("title") is not None else None,
        str(info.get("version")) if info.get("version") is not None else None,
        None,
        f"openapi/{version}",
        document=digest,
    )
    return server, {
        name: (op, op.arguments_validator(), op.output_validator())
        for name, op in operations.items()
    }


class OpenApiSession(SessionBase[OpenApiSource]):
    """Operations of ``source.document`` as tools (see the module). ``errlog`` is
    accepted for the pool's sake and unused."""

    def __init__(
        self,
        source: OpenApiSource,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        errlog: TextIO | None = None,
    ) -> None:
        super().__init__(
            source, connect_timeout=connect_timeout, call_timeout=call_timeout, errlog=errlog
        )
        self._client: httpx.AsyncClient | None = None
        self._tools: dict[str, tuple[OpenApiOperation, Any, Any]] | None = None

    @property
    def is_open(self) -> bool:
        return self._tools is not None and not self._closed

    async def _document(self, client: httpx.AsyncClient) -> bytes:
        where = self._source.document
        shown = document_label(where)
        if not where.startswith(("http://", "https://")):
            try:
                data = await asyncio.to_thread(Path(where).read_bytes)
            except OSError as exc:
                raise SourceUnreachableError(
                    self.label, f"the document {shown} cannot be read: {exc.strerror or exc}"
                ) from None
        else:
            try:
                response = await client.get(where)
                data = response.content
            except httpx.HTTPError as exc:
                raise SourceUnreachableError(
                    self.label, f"the document {shown} cannot be fetched: {_describe(exc)}"
                ) from None
            if response.status_code != 200:
                raise SourceUnreachableError(
                    self.label, f"the document {shown} answered HTTP {response.status_code}"
                )
        if len(data) > MAX_DOCUMENT_BYTES:
            raise SourceUnreachableError(
                self.label, f"the document {shown} is larger than {MAX_DOCUMENT_BYTES} bytes"
            )
        return data

    async def open(self) -> None:
        """Read and list the document and reach the base URL, within the connect
        timeout (see the module)."""
        self._opening()
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(self._call_timeout, connect=self._connect_timeout),
            follow_redirects=False,
        )
        try:
            async with asyncio.timeout(self._connect_timeout):
                data = await self._document(client)
                digest = "sha256:" + hashlib.sha256(data).hexdigest()
                shown = document_label(self._source.document)
                server, tools = await asyncio.to_thread(
                    _listing, self.label, shown, digest, data, self._source.operations
                )
                try:
                    await client.head(self._source.base_url)
                except httpx.HTTPError as exc:
                    raise SourceUnreachableError(
                        self.label, f"the base URL does not answer: {_describe(exc)}"
                    ) from None
        except TimeoutError:
            await client.aclose()
            raise SourceUnreachableError(
                self.label, f"reading its document took longer than {self._connect_timeout:g}s"
            ) from None
        except BaseException:
            await client.aclose()
            raise
        self._client, self._server_info, self._tools = client, server, tools

    async def close(self) -> None:
        """Close the HTTP client. Idempotent."""
        self._closing()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _listed(self) -> dict[str, tuple[OpenApiOperation, Any, Any]]:
        if self._closed or self._tools is None:
            raise SessionClosedError(self.label)
        return self._tools

    async def list_tools(
        self,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the same interface as SourceSession
    ) -> tuple[ToolInfo, ...]:
        """Every operation as a tool, in name order."""
        return tuple(operation.info for operation, _, _ in self._listed().values())

    async def tool(self, name: str) -> ToolInfo:
        """The listing entry of ``name``, or `ToolNotFoundError`."""
        tools = self._listed()
        found = tools.get(name)
        if found is None:
            raise ToolNotFoundError(self.label, name, tuple(tools))
        return found[0].info

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the bound is part of the contract
    ) -> ToolResult:
        """Send operation ``name``'s request with ``arguments`` within ``timeout`` seconds
        (default: the session's call timeout); see the module for what comes back."""
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise ToolArgumentsError(self.label, name, "arguments must be a JSON object")
        tools = self._listed()
        found = tools.get(name)
        if found is None:
            raise ToolNotFoundError(self.label, name, tuple(tools))
        operation, arguments_validator, output_validator = found
        path, query, headers, body = operation.request(
            self.label, arguments or {}, arguments_validator
        )
        for header, value in headers.items():
            if any(c in value for c in "\r\n\0"):
                raise ToolArgumentsError(
                    self.label, name, f"header {header} would contain CR, LF or NUL"
                )
        auth = self._source.auth
        if auth is not None and auth.where == "header":
            headers[auth.name] = auth.value
        elif auth is not None:
            query.append((auth.name, auth.value))
        url = self._source.base_url.rstrip("/") + path
        limit = self._call_timeout if timeout is None else timeout
        client = self._client
        assert client is not None
        params: list[tuple[str, str | int | float | bool | None]] = list(query)
        request = client.build_request(
            operation.method,
            url,
            params=params,
            headers=headers,
            content=None if body is None else json.dumps(body, separators=(",", ":")).encode(),
        )
        if body is not None:
            request.headers["content-type"] = "application/json"
        try:
            async with asyncio.timeout(limit):
                response = await client.send(request, stream=True)
                try:
                    data = await _bounded(response)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise ToolCallTimeoutError(self.label, name, limit) from None
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise SourceUnreachableError(
                self.label, f"the base URL does not answer: {_describe(exc)}"
            ) from None
        except httpx.TimeoutException:
            raise ToolCallTimeoutError(self.label, name, limit) from None
        except _TooLarge:
            raise ToolResultInvalidError(
                self.label, name, f"the response is larger than {MAX_RESPONSE_BYTES} bytes"
            ) from None
        except httpx.HTTPError as exc:
            raise ToolCallFailedError(self.label, name, self._hidden(_describe(exc))) from None
        status = response.status_code
        if not 200 <= status < 300:
            text = self._hidden(data.decode("utf-8", "replace"))
            shown = text[:MAX_ERROR_BODY_CHARS] + ("…" if len(text) > MAX_ERROR_BODY_CHARS else "")
            reason = response.reason_phrase
            message = f"HTTP {status}{' ' + reason if reason else ''}" + (
                f": {shown}" if shown else ""
            )
            return ToolResult(({"type": "text", "text": message},), None, is_error=True)
        return operation.result(self.label, status, data, output_validator)

    def _hidden(self, text: str) -> str:
        """``text`` without the credential's value (a service may echo a request)."""
        auth = self._source.auth
        return text.replace(auth.value, "***") if auth is not None and auth.value else text


class _TooLarge(Exception):
    pass


async def _bounded(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {clip(text)}" if text else type(exc).__name__
