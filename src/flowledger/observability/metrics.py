"""Prometheus metrics of one process: one registry, filled by instrumentation points.

The instrumentation points (`run_started`, `step_finished`, `tool_called`, ...) are
called from every layer. Until `enable` is called they return at once: one global
read and a comparison, nothing imported. `enable` imports ``prometheus_client`` (the
optional ``prometheus`` extra: ``pip install 'flowledger[prometheus]'``) and creates the
process's one `CollectorRegistry` with the metrics of docs/observability.md; without the
extra it raises `MetricsUnavailableError`, naming the extra.

Label values are bounded: statuses, outcomes, reasons, definition names, and the
logical source and tool names an artifact declares. Never a run id, an input, a state,
a payload, a tool's arguments or its result: what a metric says is counts and times.

The gauges of runs "now" are computed when the registry is scraped (`exposition`), by
the *censuses* a host registers (`add_census`): each returns label values and counts,
and may read the database (one prefix listing of keys, see `flowledger.cli.worker`),
so a scrape costs what its censuses cost, not a read of every run.

The step and commit latency histograms are *folded*: an observation is queued (a deque
append, no lock), and the queue is folded into the library's ``Histogram`` whenever the
registry is collected (a scrape, `exposition`, ``registry.get_sample_value``) and whenever
`FOLD_AT` observations wait; so a scrape sees every observation made before it, the
exposition is the ``Histogram``'s own, and a process nobody scrapes holds at most
`FOLD_AT` numbers per histogram. Folding counts a batch into the ``Histogram``'s bucket
and sum values once per bucket instead of one ``observe`` per step: ``observe`` takes a
lock and calls five Python functions, which on a one-vertex step was most of what metrics
cost (docs/benchmarks.md#traces).
"""

from __future__ import annotations

import asyncio
import threading
from bisect import bisect_right
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from functools import reduce
from operator import add
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:  # the optional extra is imported by `enable` only
    from prometheus_client import CollectorRegistry

__all__ = [
    "CONTENT_TYPE",
    "EXTRA",
    "FOLD_AT",
    "Census",
    "MetricsUnavailableError",
    "Mirror",
    "add_census",
    "census_of",
    "collectors",
    "commit_finished",
    "enable",
    "enable_if_available",
    "enabled",
    "exposition",
    "fence_refused",
    "lease_acquired",
    "lease_lost",
    "registry",
    "remove_census",
    "retention_deleted",
    "revalidated",
    "run_adopted",
    "run_executing",
    "run_finished",
    "run_started",
    "set_mirror",
    "step_finished",
    "tool_called",
]

#: The optional extra that provides ``prometheus_client``.
EXTRA: Final = "prometheus"
#: The Prometheus text exposition format (version 0.0.4), as ``prometheus_client`` writes it.
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

#: Latency buckets (seconds) shared by steps, commits and tool calls: 1 ms to 1 min.
_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

#: How many observations of a folded histogram may wait before they are folded unasked.
FOLD_AT: Final = 256

#: A census: an async function returning ``{label values: count}`` for one gauge.
Census = Callable[[], Awaitable[Mapping[tuple[str, ...], float]]]


class Mirror(Protocol):
    """Another exporter of this registry (`flowledger.observability.otel_metrics`): told of
    each histogram observation, and of each census (with the loop it was registered on)."""

    def observed(self, histogram: Any, labels: tuple[str, ...], value: float) -> None: ...

    def census_added(
        self, gauge: Any, census: Census, loop: asyncio.AbstractEventLoop | None
    ) -> None: ...


class MetricsUnavailableError(RuntimeError):
    """Metrics were asked for, and ``prometheus_client`` cannot be imported."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(
            f"metrics need the optional '{EXTRA}' extra (prometheus_client): "
            f"pip install 'flowledger[{EXTRA}]' ({type(cause).__name__}: {cause})"
        )


class _Folded:
    """A ``Histogram`` without labels whose observations are queued (`pending`) and
    folded into it when the registry collects this collector, or by whoever queues the
    `FOLD_AT`-th (module docstring). Registered in the registry in its place: the
    registry's samples are the ``Histogram``'s, folded first.

    Folding counts into the ``Histogram``'s bucket and sum values (``_buckets``,
    ``_sum``: what its ``observe`` increments); a ``prometheus_client`` that keeps them
    otherwise gets one ``observe`` per queued value instead."""

    __slots__ = ("_lock", "_upper", "histogram", "pending")

    def __init__(self, histogram: Any, registry: CollectorRegistry) -> None:
        self.histogram = histogram
        self.pending: deque[float] = deque()
        self._lock = threading.Lock()
        self._upper = _bounds_counted(histogram)
        registry.register(self)

    def fold(self) -> None:
        """Count every queued observation into the ``Histogram``: one increment per
        bucket that received some, and the sum added value by value (the floats
        ``observe`` would have summed, in the same order)."""
        with self._lock:
            pending = self.pending
            waiting = len(pending)  # appends that come meanwhile wait for the next fold
            if not waiting:
                return
            popleft = pending.popleft
            values = [popleft() for _ in range(waiting)]
            histogram, upper = self.histogram, self._upper
            if upper is None:
                for value in values:
                    histogram.observe(value)
                return
            # left to right, as repeated ``observe`` would (not ``sum``, which may
            # compensate rounding and so differ in the last digits)
            histogram._sum.set(reduce(add, values, histogram._sum.get()))
            values.sort()
            below = 0  # values counted in lower buckets
            for bucket, bound in zip(histogram._buckets, upper, strict=True):
                # ``observe`` counts a value in the first bucket whose bound is >= it
                reached = bisect_right(values, bound)
                if reached > below:
                    bucket.inc(reached - below)
                    below = reached

    def collect(self) -> Any:
        self.fold()
        return self.histogram.collect()

    def describe(self) -> Any:
        return self.histogram.describe()


def _bounds_counted(histogram: Any) -> list[float] | None:
    """The upper bounds of ``histogram``'s buckets if it keeps its counts as `_Folded`
    folds into (a value per bucket and one for the sum, with ``inc``, ``get`` and
    ``set``), else None."""
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    if not isinstance(bounds, list) or not isinstance(buckets, list):
        return None
    if len(bounds) != len(buckets) or not all(hasattr(b, "inc") for b in buckets):
        return None
    if not all(hasattr(total, name) for name in ("get", "set")):
        return None
    return [float(bound) for bound in bounds]


@dataclass(frozen=True)
class _Instruments:
    registry: CollectorRegistry
    runs_started: Any
    runs_finished: Any
    runs_adopted: Any
    runs_executing: Any
    steps: _Folded
    commits: _Folded
    leases_acquired: Any
    leases_lost: Any
    fence_refusals: Any
    tool_calls: Any
    tool_seconds: Any
    revalidations: Any
    retention_deleted: Any
    census_gauges: dict[str, Any]
    censuses: list[tuple[str, Census, asyncio.AbstractEventLoop | None]]


_live: _Instruments | None = None
_mirror: Mirror | None = None
_enabling = threading.Lock()


def _build() -> _Instruments:
    try:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
    except ImportError as exc:
        raise MetricsUnavailableError(exc) from None
    registry = CollectorRegistry(auto_describe=True)

    def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
        return Counter(name, doc, labels, registry=registry)

    def histogram(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
        return Histogram(name, doc, labels, registry=registry, buckets=_BUCKETS)

    def folded(name: str, doc: str) -> _Folded:
        return _Folded(Histogram(name, doc, registry=None, buckets=_BUCKETS), registry)

    return _Instruments(
        registry=registry,
        runs_started=counter(
            "flowledger_runs_started",
            "Runs this process started (pending to running).",
            ("definition",),
        ),
        runs_finished=counter(
            "flowledger_runs_finished",
            "Runs this process brought to a terminal status.",
            ("definition", "status"),
        ),
        runs_adopted=counter(
            "flowledger_runs_adopted",
            "Running runs this process continued from another owner's last checkpoint.",
        ),
        runs_executing=Gauge(
            "flowledger_runs_executing",
            "Runs this process executes now.",
            registry=registry,
        ),
        steps=folded("flowledger_step_seconds", "Duration of one super-step, its commit included."),
        commits=folded(
            "flowledger_commit_seconds", "Duration of one checkpoint commit (a ledger append)."
        ),
        leases_acquired=counter("flowledger_leases_acquired", "Leases this process acquired."),
        leases_lost=counter(
            "flowledger_leases_lost",
            "Leases this process lost without releasing them (expired, taken, broken).",
            ("reason",),
        ),
        fence_refusals=counter(
            "flowledger_fence_refusals",
            "Writes refused because their lease grant was no longer current.",
        ),
        tool_calls=counter(
            "flowledger_tool_calls",
            "Tool calls of deployed runs.",
            ("source", "tool", "outcome"),
        ),
        tool_seconds=histogram(
            "flowledger_tool_call_seconds",
            "Duration of tool calls of deployed runs.",
            ("source", "tool"),
        ),
        revalidations=counter(
            "flowledger_revalidations",
            "Checks of a deployed run's pinned dependencies before it resumes.",
            ("result",),
        ),
        retention_deleted=counter(
            "flowledger_retention_deleted_runs",
            "Finished runs retention passes of this process deleted.",
            ("status",),
        ),
        census_gauges={},
        censuses=[],
    )


def enable() -> CollectorRegistry:
    """Turn metrics on for this process (idempotent) and return its registry;
    `MetricsUnavailableError` without the ``prometheus`` extra."""
    global _live
    with _enabling:
        if _live is None:
            _live = _build()
        return _live.registry


def enabled() -> bool:
    return _live is not None


def registry() -> CollectorRegistry | None:
    """The process's registry, or ``None`` while metrics are off."""
    return None if _live is None else _live.registry


def add_census(name: str, doc: str, labels: tuple[str, ...], census: Census) -> None:
    """A gauge ``name`` set from ``census()`` at each `exposition` (metrics must be on).
    Registering a name again replaces its census (a server restarted in one process)."""
    live = _live
    if live is None:
        raise RuntimeError("add_census needs metrics enabled first")
    if name not in live.census_gauges:
        from prometheus_client import Gauge

        live.census_gauges[name] = Gauge(name, doc, labels, registry=live.registry)
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    live.censuses[:] = [entry for entry in live.censuses if entry[0] != name]
    live.censuses.append((name, census, loop))
    if _mirror is not None:
        _mirror.census_added(live.census_gauges[name], census, loop)


def remove_census(name: str) -> None:
    """Stop taking census ``name`` (what it reads is closing); its gauge shows nothing
    until the name is registered again."""
    live = _live
    if live is None:
        return
    live.censuses[:] = [entry for entry in live.censuses if entry[0] != name]
    gauge = live.census_gauges.get(name)
    if gauge is not None:
        gauge.clear()


def census_of(name: str) -> tuple[Census, asyncio.AbstractEventLoop | None] | None:
    """The census registered as ``name`` and the event loop it was registered on."""
    live = _live
    found = [] if live is None else [(c, loop) for n, c, loop in live.censuses if n == name]
    return found[0] if found else None


def collectors() -> list[Any]:
    """The registry's metrics (``prometheus_client`` objects), census gauges left out
    (`Mirror.census_added` names them); metrics must be on."""
    live = _live
    if live is None:
        raise RuntimeError("collectors needs metrics enabled first")
    skipped = ("registry", "census_gauges", "censuses")
    found = [getattr(live, f.name) for f in fields(live) if f.name not in skipped]
    return [metric.histogram if type(metric) is _Folded else metric for metric in found]


def set_mirror(mirror: Mirror | None) -> None:
    """Tell ``mirror`` of every histogram observation and census from now on (and of the
    censuses registered already); None stops it. Metrics must be on."""
    global _mirror
    live = _live
    if live is None:
        raise RuntimeError("set_mirror needs metrics enabled first")
    _mirror = mirror
    if mirror is not None:
        for name, census, loop in list(live.censuses):
            mirror.census_added(live.census_gauges[name], census, loop)


async def exposition() -> bytes:
    """The registry in the Prometheus text format, censuses taken now."""
    live = _live
    if live is None:
        raise RuntimeError("metrics are off: call flowledger.observability.metrics.enable()")
    from prometheus_client import generate_latest

    for name, census, _ in list(live.censuses):
        gauge = live.census_gauges[name]
        counts = await census()
        gauge.clear()  # a label set absent now (no paused runs left) is not stale
        for labels, value in counts.items():
            (gauge.labels(*labels) if labels else gauge).set(value)
    return bytes(generate_latest(live.registry))


# -- instrumentation points: each returns at once while metrics are off ------------------------


def run_started(definition: str) -> None:
    if _live is not None:
        _live.runs_started.labels(definition).inc()


def run_finished(definition: str, status: str) -> None:
    if _live is not None:
        _live.runs_finished.labels(definition, status).inc()


def run_adopted() -> None:
    if _live is not None:
        _live.runs_adopted.inc()


def run_executing(delta: int) -> None:
    """``+1`` when this process begins executing a run, ``-1`` when it stops."""
    if _live is not None:
        _live.runs_executing.inc(delta)


def step_finished(seconds: float) -> None:
    if _live is not None:
        _observe_folded(_live.steps, seconds)


def commit_finished(seconds: float) -> None:
    if _live is not None:
        _observe_folded(_live.commits, seconds)


def _observe_folded(folded: _Folded, seconds: float) -> None:
    """Queue ``seconds`` for the next fold (folding now if `FOLD_AT` wait); the mirror
    records it at once."""
    pending = folded.pending
    pending.append(seconds)
    if len(pending) >= FOLD_AT:
        folded.fold()
    if _mirror is not None:
        _mirror.observed(folded.histogram, (), seconds)


def lease_acquired() -> None:
    if _live is not None:
        _live.leases_acquired.inc()


def lease_lost(reason: str) -> None:
    if _live is not None:
        _live.leases_lost.labels(reason.replace(" ", "_")).inc()


def fence_refused() -> None:
    if _live is not None:
        _live.fence_refusals.inc()


def tool_called(source: str, tool: str, outcome: str, seconds: float) -> None:
    if _live is not None:
        _live.tool_calls.labels(source, tool, outcome).inc()
        _live.tool_seconds.labels(source, tool).observe(seconds)
        if _mirror is not None:
            _mirror.observed(_live.tool_seconds, (source, tool), seconds)


def revalidated(result: str) -> None:
    if _live is not None:
        _live.revalidations.labels(result).inc()


def retention_deleted(status: str, runs: int) -> None:
    if _live is not None and runs:
        _live.retention_deleted.labels(status).inc(runs)


def enable_if_available() -> bool:
    """`enable` if the extra is installed (servers that offer ``/metrics`` call it when
    they start); whether metrics are on."""
    try:
        enable()
    except MetricsUnavailableError:
        return False
    return True
