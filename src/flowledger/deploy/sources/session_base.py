"""`SessionBase`: what a session of a non-MCP source (Python functions, OpenAPI operations)
shares with the others: its source and label, the two timeouts, the server it reports
once open, and a life of one `open` and any number of `close` calls.

A subclass implements `open` (calling `_opening` first) and `close` (calling `_closing`),
and says when it `is_open`; the pool and every caller use it as they use an MCP
`SourceSession`. ``errlog`` is accepted for the pool's sake: these sources have no
server process whose stderr could go anywhere.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, Protocol, Self, TextIO, TypeVar

from .errors import SessionClosedError
from .session import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, ServerInfo

__all__ = ["SessionBase"]


class _Labelled(Protocol):
    @property
    def label(self) -> str: ...


S = TypeVar("S", bound=_Labelled)


class SessionBase(ABC, Generic[S]):
    def __init__(
        self,
        source: S,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        errlog: TextIO | None = None,
    ) -> None:
        if not connect_timeout > 0 or not call_timeout > 0:
            raise ValueError("connect_timeout and call_timeout must be positive")
        self._source = source
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._server_info: ServerInfo | None = None
        self._opened = False
        self._closed = False

    @property
    def source(self) -> S:
        return self._source

    @property
    def label(self) -> str:
        return self._source.label

    @property
    @abstractmethod
    def is_open(self) -> bool: ...

    @property
    def server_info(self) -> ServerInfo:
        if self._server_info is None or self._closed:
            raise SessionClosedError(self.label)
        return self._server_info

    def _opening(self) -> None:
        """The start of `open`: a session opens once, and never after it was closed."""
        if self._opened or self._closed:
            raise RuntimeError(f"{type(self).__name__} opens only once")
        self._opened = True

    def _closing(self) -> None:
        self._closed = True

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
