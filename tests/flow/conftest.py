"""Shared fixtures and helpers for the flow conformance suite (flow-spec §8).

* ``store``: every runtime test runs on the in-memory checkpoint store and on the ledger
  adapter over SQLite and over PostgreSQL (``tests/_postgres.py``).
* ``Cnt`` / `tag`: the reference fixture ``cnt {vals, n}`` with the standard "tag" vertex:
  its selector reads ``n``, its task returns its tag, its reducer appends the tag to
  ``vals`` and increments ``n``. `Calls` counts executions and records what selectors saw.
* `Recorder`: hooks that log every event in order.
* `FaultyStore`: a checkpoint store wrapper that fails chosen operations.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.flow import Checkpoint
from flowledger.storage import open_store

from .._postgres import postgres_url

STORES = ["memory", "ledger", "ledger-postgres"]


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A checkpoint store: in-memory, or the ledger adapter on a fresh SQLite file or on a
    fresh PostgreSQL schema (skipped without a server, failing instead when CI=true)."""
    if request.param == "memory":
        yield flow.MemoryCheckpointStore()
        return
    if request.param == "ledger-postgres":
        with postgres_url() as url:
            async with open_store(url) as storage:
                yield flow.LedgerCheckpointStore(storage.ledger)
        return
    async with open_store(f"sqlite:///{tmp_path}/f.db") as storage:
        yield flow.LedgerCheckpointStore(storage.ledger)


# -- the counter state and the "tag" vertex ------------------------------------------------


@dataclass
class Cnt:
    vals: list[str] = field(default_factory=list)
    n: int = 0


class Calls:
    """Executions per vertex, in order, with the selector value each execution saw."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()
        self.order: list[str] = []
        self.seen: dict[str, list[Any]] = defaultdict(list)
        self.keys: dict[str, list[str]] = defaultdict(list)

    def hit(self, vertex: str, value: Any = None) -> None:
        self.count[vertex] += 1
        self.order.append(vertex)
        self.seen[vertex].append(value)
        self.keys[vertex].append(flow.run_info().idempotency_key)


def append_tag(state: Cnt, out: str) -> None:
    state.vals.append(out)
    state.n += 1


def tag(
    graph: flow.Graph[Any],
    vertex: str,
    calls: Calls | None = None,
    *,
    body: Callable[[int], Any] | None = None,
    **options: Any,
) -> None:
    """Add the standard tag vertex; ``body(n)`` (sync, may raise or interrupt) runs first."""

    async def task(n: int) -> str:
        if calls is not None:
            calls.hit(vertex, n)
        if body is not None:
            body(n)
        return vertex

    graph.add_vertex(vertex, task, select=lambda s: s.n, reduce=append_tag, **options)


def chain(
    vertices: Sequence[str],
    store: Any = None,
    calls: Calls | None = None,
    *,
    graph_id: str = "cnt",
    version: str = "0",
) -> flow.Runner[Cnt]:
    """A compiled chain of tag vertices: first is entry, last is finish."""
    graph: flow.Graph[Cnt] = flow.Graph(graph_id, state=Cnt)
    for vertex in vertices:
        tag(graph, vertex, calls)
    for source, target in itertools.pairwise(vertices):
        graph.add_edge(source, target)
    return graph.compile(entry=vertices[0], finish=vertices[-1], store=store, version=version)


def fan(
    store: Any = None, calls: Calls | None = None, **bodies: Callable[[int], Any]
) -> tuple[flow.Graph[Cnt], flow.Runner[Cnt]]:
    """``v -> {a, b} -> fin`` of tag vertices; ``bodies`` optionally run inside a vertex."""
    graph: flow.Graph[Cnt] = flow.Graph("fan", state=Cnt)
    for vertex in ("v", "a", "b", "fin"):
        tag(graph, vertex, calls, body=bodies.get(vertex))
    graph.add_edge("v", "a")
    graph.add_edge("v", "b")
    graph.add_edge("a", "fin")
    graph.add_edge("b", "fin")
    return graph, graph.compile(entry="v", finish="fin", store=store)


def pauser(info: Any = "approve?", seen: list[Any] | None = None) -> Callable[[int], Any]:
    """A body that interrupts with ``info`` until re-run by a resume with a payload; the
    payload it then receives is appended to ``seen``."""

    def body(_: int) -> None:
        payload = flow.interrupt(info)
        if seen is not None:
            seen.append(payload)

    return body


# -- hooks -------------------------------------------------------------------------------

EVENTS = (
    "on_run_start",
    "on_run_finish",
    "on_vertex_start",
    "on_vertex_finish",
    "on_edge",
    "on_step",
    "on_checkpoint",
    "on_interrupt",
    "on_halt",
)


class Recorder:
    """Hooks that append ``(event, args)`` to ``events``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, tuple[Any, ...]]] = []

    def _callback(self, event: str) -> Callable[..., None]:
        def callback(*args: Any) -> None:
            self.events.append((event, args))

        return callback

    @property
    def hooks(self) -> flow.Hooks:
        return flow.Hooks(**{event: self._callback(event) for event in EVENTS})

    def of(self, event: str) -> list[tuple[Any, ...]]:
        return [args for name, args in self.events if name == event]

    def names(self) -> list[str]:
        return [name for name, _ in self.events]


# -- stores ------------------------------------------------------------------------------


class InjectedFault(Exception):
    """The failure a `FaultyStore` raises."""


class FaultyStore:
    """Wraps a checkpoint store; the ``fail_append``-th append call fails (before writing,
    or after it is durable when ``after_write``); ``fail_latest`` makes `latest` fail."""

    def __init__(
        self,
        inner: Any,
        *,
        fail_append: int | None = None,
        after_write: bool = False,
        error: BaseException | None = None,
    ) -> None:
        self.inner = inner
        self.fail_append = fail_append
        self.after_write = after_write
        self.error = error
        self.fail_latest = False
        self.appends = 0
        self.batches: list[list[int]] = []

    def _fault(self, op: str) -> BaseException:
        if self.error is not None:
            return self.error
        return flow.StoreError(op, InjectedFault(f"injected {op} failure"))

    async def append(self, checkpoints: Sequence[Checkpoint]) -> None:
        self.appends += 1
        if self.appends == self.fail_append and not self.after_write:
            raise self._fault("append")
        await self.inner.append(checkpoints)
        self.batches.append([cp.revision for cp in checkpoints])
        if self.appends == self.fail_append:
            raise self._fault("append")

    async def latest(self, run_id: str) -> Checkpoint:
        if self.fail_latest:
            raise self._fault("latest")
        result: Checkpoint = await self.inner.latest(run_id)
        return result

    async def history(
        self, run_id: str, *, after: int = -1, limit: int | None = None
    ) -> list[Checkpoint]:
        result: list[Checkpoint] = await self.inner.history(run_id, after=after, limit=limit)
        return result


async def inject(store: Any, run_id: str, **changes: Any) -> Checkpoint:
    """Append a modified copy of ``run_id``'s latest checkpoint as the next revision.

    ``changes`` replace checkpoint fields; ``run`` may be a dict of run-record changes."""
    latest: Checkpoint = await store.latest(run_id)
    run_changes = changes.pop("run", {})
    cp = latest.copy()
    cp = replace(cp, **changes)
    cp.run = replace(cp.run, revision=latest.run.revision + 1, **run_changes)
    await store.append([cp])
    return cp
