"""`CapabilityCatalog`: the tool listings of registered sources, kept fresh, and searched.

**The listing cache is the registry's last probe** (`SourceRegistry.last_probe`): the
same record ``flowledger source probe NAME`` and ``source_probe`` write, with every
tool's schemas, hints and fingerprints. A source's listing is

* ``fresh``: probed successfully, of the source's current revision, at most ``ttl``
  seconds ago (default `DEFAULT_TTL`, one hour);
* otherwise *due*, and refreshed when it is asked for (a probe now), where the door may
  start processes (`SourceAccess.launch`): then ``refreshed``, or, if the source does
  not answer, ``unreachable`` with the error, keeping its last good listing (a failed
  refresh is not recorded over it). A source that failed is not asked again for
  ``retry_after`` seconds (default 60), so a dead server does not make every question
  wait for its timeout;
* on a door that starts nothing (a read-only server) a due listing is not refreshed: it
  is answered from the cache as ``stale`` (or ``unlisted`` when there is none).

``refresh`` (``capability_list {refresh: true}``) makes every listing asked for due,
except one probed (or failed) less than ``min_refresh`` seconds ago (default 10): a
client that asks in a loop starts at most one probe per source in that time.

One refresh per source at a time: concurrent askers (of any session served by this
process) share one probe, and a probe is bounded by ``probe_timeout`` (to connect, and
again to list). Probes run with the source's declared secrets, like every probe of the
registry: a listing is the same for every session.

**Search** ranks the tools of the asked-for listings with `RankedIndex` (see
`ranking`): one index per set of listings (the sources a session sees, as listed now),
built off the event loop when first asked for and kept for the `MAX_INDEXES` sets
used last; a listing whose revision or tool fingerprints change makes a new set.

`catalog_for(store)` gives the one catalog of a database in this process (so the
sessions of an HTTP server share refreshes and the index); it holds no reference to
the store: every method reads the registry it is given.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ... import storage
from ..sources.errors import clip
from ..sources.tool_info import ToolInfo
from .errors import RegistryCorruptError, RegistryError
from .ranking import IndexedTool, RankedIndex
from .store import Probe, RegisteredSource, SourceRegistry

__all__ = [
    "DEFAULT_MIN_REFRESH",
    "DEFAULT_PROBE_TIMEOUT",
    "DEFAULT_RETRY_AFTER",
    "DEFAULT_TTL",
    "CapabilityCatalog",
    "Found",
    "Listing",
    "ListingStatus",
    "NoListingError",
    "catalog_for",
    "generation_of",
]

DEFAULT_TTL: Final = 3600.0
DEFAULT_PROBE_TIMEOUT: Final = 10.0
DEFAULT_RETRY_AFTER: Final = 60.0
DEFAULT_MIN_REFRESH: Final = 10.0
MAX_INDEXES: Final = 16

ListingStatus = Literal["fresh", "refreshed", "stale", "unreachable", "unlisted"]


@dataclass(frozen=True)
class Listing:
    """What the catalog knows of one source's tools now."""

    source: str
    revision: int  # the source's current revision
    probe: Probe | None  # its last good listing (possibly of an older revision)
    status: ListingStatus
    error: str | None = None  # why the last refresh failed (unreachable, unlisted)

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        return () if self.probe is None else self.probe.tools

    def tool(self, name: str) -> ToolInfo | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def to_json(self) -> dict[str, Any]:
        probe = self.probe
        return {
            "source": self.source,
            "revision": self.revision,
            "status": self.status,
            "listed_revision": None if probe is None else probe.revision,
            "probed_at": None if probe is None else probe.probed_at,
            "age_seconds": None if probe is None else round(probe.age_seconds(), 1),
            "tools": len(self.tools),
            "error": self.error,
        }


class NoListingError(RegistryError):
    """A source has no tool listing to answer from (never probed successfully, and not
    refreshed now: it did not answer, or this door starts nothing)."""

    code = "listing_unavailable"

    def __init__(self, listing: Listing) -> None:
        why = listing.error or "this server starts and contacts no source"
        super().__init__(listing.source, f"source {listing.source!r} has no tool listing ({why})")
        self.listing = listing


@dataclass(frozen=True)
class Found:
    """One search or listing result."""

    source: str
    tool: ToolInfo
    score: float | None


@dataclass(frozen=True)
class _Failure:
    at: float  # time.monotonic()
    revision: int
    error: str


@dataclass(frozen=True)
class _Built:
    index: RankedIndex
    tools: tuple[tuple[str, ToolInfo], ...]  # by ordinal
    sources: tuple[str, ...]


class CapabilityCatalog:
    """Listings kept fresh and searched (see the module). Times are in seconds."""

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_TTL,
        probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
        retry_after: float = DEFAULT_RETRY_AFTER,
        min_refresh: float = DEFAULT_MIN_REFRESH,
    ) -> None:
        for name, value in (("ttl", ttl), ("probe_timeout", probe_timeout)):
            if not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds")
        if retry_after < 0 or min_refresh < 0:
            raise ValueError("retry_after and min_refresh must not be negative")
        self.ttl = ttl
        self.probe_timeout = probe_timeout
        self.retry_after = retry_after
        self.min_refresh = min_refresh
        self._good: dict[str, Probe] = {}  # last good listing seen, by source
        self._failures: dict[str, _Failure] = {}
        self._inflight: dict[str, asyncio.Task[Probe]] = {}
        self._indexes: OrderedDict[str, _Built] = OrderedDict()  # by generation, LRU
        self._building: dict[str, asyncio.Task[_Built]] = {}
        self.probes_started = 0  # how many probes this catalog started (for tests, bench)

    # -- listings -----------------------------------------------------------------------

    async def listing(
        self,
        registry: SourceRegistry,
        registered: RegisteredSource,
        *,
        environ: Mapping[str, str],
        launch: bool,
        refresh: bool = False,
    ) -> Listing:
        """The listing of ``registered`` (a source the caller may see), refreshed first
        if it is due and ``launch`` allows."""
        (found,) = await self.listings(
            registry, [registered], environ=environ, launch=launch, refresh=refresh
        )
        return found

    async def listings(
        self,
        registry: SourceRegistry,
        sources: Sequence[RegisteredSource],
        *,
        environ: Mapping[str, str],
        launch: bool,
        refresh: bool = False,
    ) -> list[Listing]:
        """`listing` of each of ``sources``, in their order; the due ones are refreshed
        in parallel."""
        found: list[Listing | None] = []
        due: list[tuple[int, RegisteredSource, Probe | None]] = []
        for item in sources:
            answer, good = await self._cached(registry, item, launch=launch, refresh=refresh)
            if answer is None:
                due.append((len(found), item, good))
            found.append(answer)
        if due:
            refreshed = await asyncio.gather(
                *(self._refreshed(registry, item, good, environ) for _, item, good in due)
            )
            for (place, _, _), answer in zip(due, refreshed, strict=True):
                found[place] = answer
        return [answer for answer in found if answer is not None]

    async def _cached(
        self, registry: SourceRegistry, registered: RegisteredSource, *, launch: bool, refresh: bool
    ) -> tuple[Listing | None, Probe | None]:
        """The listing answered without a probe, or ``None`` when one is to be made; and
        the last good probe."""
        name, revision = registered.name, registered.revision
        good = await self._last_good(registry, name)
        age = None if good is None else good.age_seconds()
        due = good is None or good.revision != revision or age is None or age > self.ttl
        if refresh and age is not None and age >= self.min_refresh:
            due = True
        if not due:
            return Listing(name, revision, good, "fresh"), good
        if not launch:
            return Listing(name, revision, good, "stale" if good is not None else "unlisted"), good
        failure = self._failures.get(name)
        if failure is not None and failure.revision == revision:
            waited = time.monotonic() - failure.at
            if waited < (self.min_refresh if refresh else self.retry_after):
                return self._failed(name, revision, good, failure.error), good
        return None, good

    async def _refreshed(
        self,
        registry: SourceRegistry,
        registered: RegisteredSource,
        good: Probe | None,
        environ: Mapping[str, str],
    ) -> Listing:
        name, revision = registered.name, registered.revision
        probe = await self._refresh(registry, name, environ)
        if probe.ok:
            return Listing(name, revision, probe, "refreshed")
        return self._failed(name, revision, good, probe.error or "no answer")

    @staticmethod
    def _failed(name: str, revision: int, good: Probe | None, error: str) -> Listing:
        return Listing(
            name, revision, good, "unreachable" if good is not None else "unlisted", error
        )

    async def _last_good(self, registry: SourceRegistry, name: str) -> Probe | None:
        """The registry's last probe if it answered, else the last good one seen here
        (an operator's failed probe does not hide what the source listed before). A
        damaged probe record counts as none: the listing is due, and the next probe
        writes a good record over it."""
        try:
            recorded = await registry.last_probe(name)
        except RegistryCorruptError:
            recorded = None
        if recorded is not None and recorded.ok:
            known = self._good.get(name)
            if known is None or known.probed_at <= recorded.probed_at:
                self._good[name] = recorded
                return recorded
            return known
        return self._good.get(name)

    async def _refresh(
        self, registry: SourceRegistry, name: str, environ: Mapping[str, str]
    ) -> Probe:
        """Probe ``name`` once for every concurrent asker (shielded: an asker that goes
        away does not cancel the others' probe)."""
        task = self._inflight.get(name)
        if task is None:
            task = asyncio.get_running_loop().create_task(
                self._probe(registry, name, dict(environ)), name=f"catalog refresh {name}"
            )
            self._inflight[name] = task
            task.add_done_callback(lambda done: self._forget(name, done))
        return await asyncio.shield(task)

    def _forget(self, name: str, task: asyncio.Task[Probe]) -> None:
        if self._inflight.get(name) is task:
            del self._inflight[name]
        _retrieve(task)

    async def _probe(
        self, registry: SourceRegistry, name: str, environ: Mapping[str, str]
    ) -> Probe:
        self.probes_started += 1
        try:
            registered = await registry.enabled(name)
        except RegistryError as exc:
            return Probe(0, "", False, clip(str(exc)), None, ())
        try:
            # the session bounds each of connect and listing; this bounds the whole
            async with asyncio.timeout(2 * self.probe_timeout + 5):
                probe = await registry.probe(
                    name, environ, seconds=self.probe_timeout, keep_good=True
                )
        except TimeoutError:
            probe = Probe(
                registered.revision, "", False, "no answer within the probe timeout", None, ()
            )
        except (RegistryError, storage.StorageError) as exc:
            probe = Probe(registered.revision, "", False, clip(str(exc)), None, ())
        if probe.ok:
            self._failures.pop(name, None)
            self._good[name] = probe
        else:
            self._failures[name] = _Failure(
                time.monotonic(), registered.revision, probe.error or "no answer"
            )
        return probe

    # -- search -------------------------------------------------------------------------

    async def search(
        self,
        listings: Sequence[Listing],
        query: str,
        *,
        offset: int,
        limit: int,
        generation: str | None = None,
    ) -> tuple[list[Found], int]:
        """The tools of ``listings`` ranked for ``query`` (from ``offset``, at most
        ``limit``), and how many match in all. ``generation``: `generation_of`
        ``listings``, if the caller has it already."""
        listed = [item for item in listings if item.probe is not None]
        if generation is None or len(listed) != len(listings):
            generation = generation_of(listed)
        built = await self._index(listed, generation)
        hits, total = built.index.search(query, built.sources, offset=offset, limit=limit)
        found = [
            Found(source, tool, hit.score)
            for hit in hits
            for source, tool in [built.tools[hit.ordinal]]
        ]
        return found, total

    async def _index(self, listings: Sequence[Listing], generation: str) -> _Built:
        """The index of exactly ``listings``: made once for each set of listings (the
        sources one session sees), kept for the `MAX_INDEXES` sets used last. Nothing of
        a source a session may not see is in its index: not its tools, and not its
        words' statistics, which would move the scores."""
        built = self._indexes.get(generation)
        if built is None:
            task = self._building.get(generation)
            if task is None:
                task = asyncio.get_running_loop().create_task(self._build(listings))
                self._building[generation] = task
                task.add_done_callback(lambda done: self._built_one(generation, done))
            built = await asyncio.shield(task)
            self._indexes[generation] = built
        self._indexes.move_to_end(generation)
        while len(self._indexes) > MAX_INDEXES:
            self._indexes.popitem(last=False)
        return built

    def _built_one(self, generation: str, task: asyncio.Task[_Built]) -> None:
        self._building.pop(generation, None)
        _retrieve(task)

    @staticmethod
    async def _build(listings: Sequence[Listing]) -> _Built:
        tools = tuple(
            (item.source, tool)
            for item in sorted(listings, key=lambda i: i.source)
            for tool in sorted(item.tools, key=lambda t: t.name)
        )
        indexed = [
            IndexedTool(
                source=name,
                tool=tool.name,
                title=tool.title or "",
                description=tool.description or "",
                params=tuple(_properties(tool)),
            )
            for name, tool in tools
        ]
        # building takes tens of milliseconds for a thousand tools: not on the event loop
        index = await asyncio.to_thread(RankedIndex, indexed)
        return _Built(index, tools, tuple(sorted(item.source for item in listings)))


def generation_of(listings: Iterable[Listing]) -> str:
    """A digest of what ``listings`` list: each source, the revision its listing is of,
    and its tools' full fingerprints (a refresh that finds the same tools keeps it)."""
    digest = hashlib.sha256()
    for item in sorted(listings, key=lambda i: i.source):
        digest.update(f"{item.source}\0{_listed(item.probe)}\0".encode())
    return digest.hexdigest()[:24]


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a shared task's failure as seen: its askers may all have gone away (each got
    it, or was cancelled), and a failure nobody retrieved is logged as a bug."""
    if not task.cancelled():
        task.exception()


def _properties(tool: ToolInfo) -> list[str]:
    properties = tool.input_schema.get("properties")
    return [str(name) for name in properties] if isinstance(properties, Mapping) else []


_LISTED: Final[dict[int, tuple[Probe, str]]] = {}  # by id(probe), holding the probe
_MAX_LISTED: Final = 4096


def _listed(probe: Probe | None) -> str:
    """The digest of one probe's listing, computed once per `Probe` object (the registry
    hands out the same object while its record is unchanged)."""
    if probe is None:
        return ""
    known = _LISTED.get(id(probe))
    if known is not None and known[0] is probe:
        return known[1]
    digest = hashlib.sha256(str(probe.revision).encode())
    for tool in probe.tools:
        digest.update(tool.full_fingerprint.encode())
    if len(_LISTED) >= _MAX_LISTED:
        _LISTED.clear()
    _LISTED[id(probe)] = probe, digest.hexdigest()
    return _LISTED[id(probe)][1]


# One catalog per database and event loop in this process. A database is its URL, but
# a memory store is private to its `Store`: keyed by its KV object (weakly, so a closed
# one's catalog goes with it).
_BY_URL: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, CapabilityCatalog]] = (
    weakref.WeakKeyDictionary()
)
_BY_KV: weakref.WeakKeyDictionary[storage.KV, CapabilityCatalog] = weakref.WeakKeyDictionary()


def catalog_for(store: storage.Store) -> CapabilityCatalog:
    """The catalog of ``store``'s database in this process (created with the defaults)."""
    if store.url.startswith("memory:"):
        found = _BY_KV.get(store.kv)
        if found is None:
            found = _BY_KV[store.kv] = CapabilityCatalog()
        return found
    by_url = _BY_URL.setdefault(asyncio.get_running_loop(), {})
    found = by_url.get(store.url)
    if found is None:
        found = by_url[store.url] = CapabilityCatalog()
    return found
