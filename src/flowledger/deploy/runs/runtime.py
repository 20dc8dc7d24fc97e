"""The run-time context of a compiled artifact's tasks.

A compiled artifact's tasks are shared by every copy of its definition (one per
database it is bound to), so what they need at run time is found through a context
variable: the `Runtime` of the definition whose segment is executing (`active`). It
holds the sources the artifact was compiled with, one `SourcePool` per executing graph
run, what a deployment pinned for the run (contracts, sources, annotations), and the
tool intents and trace in the ledger of the run's checkpoints. A resume's readiness
check may open the run's pool before the segment starts (`holding`, `held_pool`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar

from ... import storage
from ..sources.pool import SourcePool
from ..sources.spec import Source
from .intents import ToolIntents
from .trace import RunTrace

__all__ = ["Runtime", "SourceRef", "active", "held_pool", "holding"]

# A dependency's source, or what gives it when a tool node connects (a deployment's
# binding resolves its secrets then, in the executing process).
SourceRef = Source | Callable[[], Source]


class Runtime:
    """What tasks need at run time: sources, one pool per executing graph run, and the
    intents and trace, kept in the ledger of the run's checkpoints."""

    def __init__(self, sources: Mapping[str, SourceRef], ledger: storage.Ledger, timeout: float):
        self.sources = dict(sources)
        self.ledger = ledger
        self.intents = ToolIntents(ledger)
        self.trace = RunTrace(ledger)
        self.connect_timeout = timeout
        self.pools: dict[str, SourcePool] = {}
        self.refusals: dict[str, Exception] = {}
        self.contracts: dict[str, Mapping[str, Mapping[str, str]]] = {}
        self.run_sources: dict[str, Mapping[str, SourceRef]] = {}
        self.repeatable: dict[str, Mapping[str, Mapping[str, bool]]] = {}

    def over(self, ledger: storage.Ledger) -> Runtime:
        return Runtime(self.sources, ledger, self.connect_timeout)

    @asynccontextmanager
    async def segment(
        self,
        graph_run_id: str,
        refusal: Exception | None = None,
        contracts: Mapping[str, Mapping[str, str]] | None = None,
        sources: Mapping[str, SourceRef] | None = None,
        repeatable: Mapping[str, Mapping[str, bool]] | None = None,
    ) -> AsyncIterator[None]:
        """While a segment of the run executes here: its source pool, and this runtime as
        the one its tasks use (the tasks are shared by every copy of the definition).
        With ``refusal``, the segment's first node raises it (so the run fails); with
        ``contracts`` (dependency -> tool -> contract fingerprint), a tool whose listed
        contract differs is not called (`ToolContractChangedError`); ``sources``
        (dependency -> source) override the compiled sources for this run;
        ``repeatable`` (dependency -> tool -> read-only or idempotent, as pinned) replaces
        the annotations of the live listing in retry and routing decisions."""
        held = held_pool(graph_run_id)
        # a resume's segment uses the pool its check opened (`ArtifactDefinition.resuming`
        # closes it); any other segment opens its own
        pool = held if held is not None else SourcePool(connect_timeout=self.connect_timeout)
        self.pools[graph_run_id] = pool
        if refusal is not None:
            self.refusals[graph_run_id] = refusal
        if contracts is not None:
            self.contracts[graph_run_id] = contracts
        if sources is not None:
            self.run_sources[graph_run_id] = sources
        if repeatable is not None:
            self.repeatable[graph_run_id] = repeatable
        token = _ACTIVE.set(self)
        try:
            yield
        finally:
            _ACTIVE.reset(token)
            self.refusals.pop(graph_run_id, None)
            self.contracts.pop(graph_run_id, None)
            self.run_sources.pop(graph_run_id, None)
            self.repeatable.pop(graph_run_id, None)
            self.pools.pop(graph_run_id, None)
            self.intents.forget(graph_run_id)
            if held is None:
                await pool.close()

    async def before_call(self, graph_run_id: str, dependency: str) -> None:
        """Wait until a call of the run to ``dependency`` may go: a registered source
        with a call rate limit reserves a place first (`registry.rates`)."""
        chosen = self.run_sources.get(graph_run_id, {}).get(dependency)
        gate = getattr(chosen, "before_call", None)
        if gate is not None:
            await gate()

    def pool(self, graph_run_id: str) -> SourcePool:
        pool = self.pools.get(graph_run_id)
        if pool is None:  # `segment` opens one for every run it executes, and closes it
            raise RuntimeError(f"run {graph_run_id} executes outside a segment of its definition")
        return pool


_ACTIVE: ContextVar[Runtime] = ContextVar("flowledger_deploy_runtime")
# The run whose resume is under way in this context, and the pool its check may open.
_HELD: ContextVar[tuple[str, SourcePool] | None] = ContextVar(
    "flowledger_deploy_held_pool", default=None
)


def held_pool(graph_run_id: str) -> SourcePool | None:
    """The pool a resume of ``graph_run_id`` under way in this context opened (inside
    `holding`), or None."""
    found = _HELD.get()
    return found[1] if found is not None and found[0] == graph_run_id else None


@contextmanager
def holding(graph_run_id: str, pool: SourcePool) -> Iterator[None]:
    """While a resume of ``graph_run_id`` is under way here: ``pool`` is the one its
    check opens sessions in and its segment then uses."""
    token = _HELD.set((graph_run_id, pool))
    try:
        yield
    finally:
        _HELD.reset(token)


def active() -> Runtime:
    """The runtime of the segment executing in this context."""
    try:
        return _ACTIVE.get()
    except LookupError:
        raise RuntimeError("an artifact's nodes run only through its ArtifactDefinition") from None
