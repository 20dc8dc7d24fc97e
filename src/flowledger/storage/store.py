"""`Store`: the four primitives behind one URL, and `open_store`.

URLs:

* ``memory://`` - a fresh, private in-process store (the test oracle);
* ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` - the
  embedded default. Query options: ``synchronous`` (``FULL``, the default, or
  ``NORMAL``/``OFF``), ``busy_timeout`` (milliseconds, default 5000).
* ``postgresql://user@host:port/dbname`` (or ``postgres://``) - many processes
  on many machines. Query options: ``schema`` (default ``flowledger``),
  ``pool_min``, ``pool_max``, ``connect_timeout`` (seconds), and libpq's own
  connection keywords (``sslmode``, ``application_name``, ...). Needs the
  ``postgres`` extra (psycopg and psycopg-pool).

Use it as ``async with open_store(url) as store:`` or ``store = await
open_store(url)`` followed by ``await store.close()``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

from .blobs import Blobs
from .integrity import Integrity, Unchecked
from .kv import KV
from .lease import Leaser
from .ledger import Ledger
from .memory import MemoryBlobs, MemoryGate, MemoryKV, MemoryLeaseBackend, MemoryLedger
from .wakeups import LocalWakeups, Wakeups

__all__ = ["Store", "StoreOpener", "UnsupportedURLError", "open_store"]


class UnsupportedURLError(ValueError):
    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        super().__init__(f"cannot open store {url!r}: {reason}")


_SECRET_OPTIONS = frozenset({"password", "sslpassword", "listen_url"})


def redact_url(url: str) -> str:
    """``url`` with its passwords (in the user info or the query) masked, for messages."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparsable URL>"
    shown = url
    if password is not None:
        userinfo, _, hostinfo = parts.netloc.rpartition("@")
        shown = shown.replace(parts.netloc, f"{userinfo.partition(':')[0]}:***@{hostinfo}", 1)
    if parts.query:
        query = "&".join(
            f"{key}=***" if equals and unquote(key) in _SECRET_OPTIONS else part
            for part in parts.query.split("&")
            for key, equals, _value in [part.partition("=")]
        )
        shown = shown.replace(f"?{parts.query}", f"?{query}", 1)
    return shown


async def _nothing() -> None:
    return None


@dataclass(eq=False)
class Store:
    """KV, Blobs, Ledger and Leaser over one backend."""

    url: str
    kv: KV
    blobs: Blobs
    ledger: Ledger
    leases: Leaser
    read_only: bool = False  # opened for reading only: nothing may be written
    # What the backend can say about its own structures (`integrity`); a store put
    # together from primitives by hand trusts every miss.
    integrity: Integrity = field(default_factory=Unchecked)
    # Who is woken by `waking` writes and `notify` (see `wakeups`); a store put together
    # from primitives by hand gets private in-process wake-ups its KV does not ring.
    wakeups: Wakeups = field(default_factory=lambda: LocalWakeups(object()))
    _close_backend: Callable[[], Awaitable[None]] = field(default=_nothing, repr=False)
    _closed: bool = field(default=False, repr=False)

    async def close(self) -> None:
        """Free this store's leases, then close the backend. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self.wakeups.close()
        await self.leases.close()
        await self._close_backend()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class StoreOpener:
    """What `open_store` returns: await it, or use it as an async context manager."""

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.url = url
        self.read_only = read_only
        self._store: Store | None = None

    async def _open(self) -> Store:
        return await _connect(self.url, read_only=self.read_only)

    def __await__(self) -> Generator[Any, None, Store]:
        return self._open().__await__()

    async def __aenter__(self) -> Store:
        self._store = await self._open()
        return self._store

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._store is not None:
            await self._store.close()


def open_store(url: str, *, read_only: bool = False) -> StoreOpener:
    """Open the store named by ``url`` (see the module docstring for the forms).

    With ``read_only`` (for commands that only read) an SQLite database must already
    exist (`StoreNotFoundError`: ``no database at PATH``) and is opened without creating,
    migrating or writing anything, also in a read-only directory; ``memory://`` gives an
    empty store; PostgreSQL opens as usual (the server's permissions govern). The
    store's ``read_only`` says which it is."""
    if not isinstance(url, str):
        raise TypeError(f"store URL must be a str, not {type(url).__name__}")
    return StoreOpener(url, read_only=read_only)


async def _connect(url: str, *, read_only: bool = False) -> Store:
    scheme = urlsplit(url).scheme
    if scheme == "memory":
        if url.rstrip("/") != "memory:":
            raise UnsupportedURLError(url, "memory:// takes no path or options")
        gate = MemoryGate()
        backend = MemoryLeaseBackend(gate)
        leases = Leaser(backend)
        primitives = (
            MemoryKV(gate, backend),
            MemoryBlobs(gate, backend),
            MemoryLedger(gate, backend),
            leases,
        )
        return Store(
            url,
            *primitives,
            read_only=read_only,
            integrity=Unchecked("none (an in-process memory store)"),
            wakeups=gate.wakeups,
            _close_backend=gate.close,
        )
    if scheme == "sqlite":
        from .sqlite import connect_sqlite

        return await connect_sqlite(url, read_only=read_only)
    if scheme in ("postgresql", "postgres"):
        try:
            from .postgres import connect_postgres
        except ImportError as exc:
            raise UnsupportedURLError(
                redact_url(url),
                f"the postgres backend needs psycopg and psycopg-pool "
                f"(pip install 'flowledger[postgres]'): {exc}",
            ) from exc
        return await connect_postgres(url)
    raise UnsupportedURLError(
        redact_url(url), "the scheme must be memory, sqlite, postgresql or postgres"
    )
