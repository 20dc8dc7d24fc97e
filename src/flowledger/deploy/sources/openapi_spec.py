"""Where an OpenAPI capability lives: the operations of an OpenAPI 3.0 / 3.1 document,
called over HTTP against a base URL the operator chose.

An `OpenApiSource` is immutable and hashable like the other specs (`SourcePool` keys its
sessions by it). It is constructed only from the operator's source registry (an
``openapi:`` entry of a ``flowledger.source/v1`` document): a deployment's inline binding
has no such field, so no tenant can make this process read a document or send a request
to a URL of its choosing. The document's own ``servers`` are never used: requests go to
``base_url`` only.

``document`` is an absolute file path or an ``http(s)`` URL; ``operations`` limits which
operations (by ``operationId``) are tools (``None``: every operation that has an id).
``auth`` sends a credential with every call, in a header or a query parameter of the
given name; its value is the secret's (the spec holds the value, equality includes it,
``repr``, `label` and `identity` show the name only).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

from .errors import SourceSpecError, clip

__all__ = ["OPERATION_PATTERN", "OpenApiAuth", "OpenApiSource", "document_label"]

#: An ``operationId`` a source may list (what a tool name may be).
OPERATION_PATTERN: Final = r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$"
_OPERATION: Final = re.compile(OPERATION_PATTERN)
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}")
_QUERY_NAME: Final = re.compile(r"[A-Za-z0-9_.\-\[\]]{1,128}")


def _url_label(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def document_label(document: str) -> str:
    """How messages show a document: its path, or its URL without credentials or query."""
    if document.startswith(("http://", "https://")):
        return _url_label(document)
    return document


def _check_url(label: str, field: str, url: Any) -> str:
    if not isinstance(url, str) or not url:
        raise SourceSpecError(label, f"{field} must be a non-empty URL")
    if any(c.isspace() or ord(c) < 0x20 or c == "\x7f" for c in url):
        raise SourceSpecError(label, f"{field} contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError as exc:
        raise SourceSpecError(label, f"{field} is malformed: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SourceSpecError(label, f"{field} must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise SourceSpecError(label, f"{field} must not carry credentials (use auth)")
    return url


@dataclass(frozen=True, repr=False)
class OpenApiAuth:
    """A credential sent with every call: header or query parameter ``name`` = ``value``
    (the value of secret ``secret``)."""

    where: Literal["header", "query"]
    name: str
    secret: str
    value: str

    def __repr__(self) -> str:
        return f"OpenApiAuth({self.where} {self.name} from secret {self.secret})"


@dataclass(frozen=True, repr=False)
class OpenApiSource:
    """Operations of the OpenAPI document ``document`` called against ``base_url``."""

    document: str
    base_url: str
    operations: tuple[str, ...] | None = None
    auth: OpenApiAuth | None = None

    def __post_init__(self) -> None:
        document = self.document
        if not isinstance(document, str) or not document or "\0" in document:
            raise SourceSpecError("openapi", "document must be a file path or a URL")
        if document.startswith(("http://", "https://")):
            _check_url("openapi", "document", document)
        elif not PurePosixPath(document).is_absolute():
            raise SourceSpecError(
                "openapi", f"document {clip(document, 80)} must be an absolute path or a URL"
            )
        _check_url("openapi", "base_url", self.base_url)
        label = self.label
        operations = self.operations
        if operations is not None:
            if isinstance(operations, str) or not isinstance(operations, Sequence):
                raise SourceSpecError(label, "operations must be a list of operationIds")
            for name in operations:
                if not isinstance(name, str) or not _OPERATION.fullmatch(name):
                    raise SourceSpecError(
                        label, f"operations: {clip(repr(name), 60)} is not an operationId"
                    )
            if len(set(operations)) != len(operations):
                raise SourceSpecError(label, "operations lists an operationId twice")
            object.__setattr__(self, "operations", tuple(sorted(operations)))
        auth = self.auth
        if auth is not None:
            pattern = _HEADER_NAME if auth.where == "header" else _QUERY_NAME
            if auth.where not in ("header", "query") or not pattern.fullmatch(auth.name):
                raise SourceSpecError(label, f"auth {auth.where} name is not valid")
            if any(c in auth.value for c in "\r\n\0"):
                raise SourceSpecError(
                    label, f"the value of secret {auth.secret} contains CR, LF or NUL"
                )

    def __repr__(self) -> str:
        return (
            f"OpenApiSource(document={document_label(self.document)!r}, "
            f"base_url={self.label!r}, operations={self.operations!r}, auth={self.auth!r})"
        )

    @property
    def label(self) -> str:
        """How messages name this source: ``openapi:BASE_URL`` (no query, no credentials)."""
        return "openapi:" + clip(_url_label(self.base_url), 110)

    def identity(self) -> dict[str, Any]:
        """JSON for pins and probes: document, base URL, operations, where the credential
        goes and the secret's *name*, never its value."""
        return {
            "transport": "openapi",
            "document": document_label(self.document),
            "base_url": _url_label(self.base_url),
            "operations": None if self.operations is None else list(self.operations),
            "auth": None
            if self.auth is None
            else {self.auth.where: self.auth.name, "secret": self.auth.secret},
        }
