"""The step and commit latency histograms are folded (`flowledger.observability.metrics`):
observations are queued and counted into the library's ``Histogram`` when the registry is
collected or when `metrics.FOLD_AT` wait. What a scrape shows must be what one ``observe``
per value would have shown, every observation made before the scrape included, and the
OpenTelemetry mirror must still receive each of them."""

from __future__ import annotations

import asyncio
import random
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowledger import flow
from flowledger.observability import metrics
from flowledger.storage import open_store

from ._scrape import Samples, parse, value

pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry, Histogram, generate_latest

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


def _without_created(registry: CollectorRegistry) -> list[str]:
    """The exposition's lines, the creation time (which differs) left out."""
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if "_created" not in line]


@pytest.mark.parametrize("counted", [True, False], ids=["counted", "observed"])
def test_a_fold_shows_what_one_observe_per_value_shows(
    counted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not counted:  # a prometheus_client keeping its counts otherwise: observe each
        monkeypatch.setattr(metrics, "_bounds_counted", lambda histogram: None)
    folded_registry, observed_registry = CollectorRegistry(), CollectorRegistry()
    folded = metrics._Folded(
        Histogram("x_seconds", "Some latency.", registry=None, buckets=BUCKETS),
        folded_registry,
    )
    observed = Histogram("x_seconds", "Some latency.", registry=observed_registry, buckets=BUCKETS)
    chosen = random.Random(30)
    # every bound exactly (a value equal to a bound is counted in that bucket), just
    # above each, zero, past the last bound, and many in between: sums that round
    edges = [b for bound in BUCKETS for b in (float(bound), float(bound) + 1e-9)]
    values = [*edges, 0.0, 61.0, 1e6] + [chosen.uniform(0, 2) ** 3 for _ in range(700)]
    chosen.shuffle(values)
    for batch in (values[:5], values[5:300], values[300:]):  # three scrapes
        for seconds in batch:
            folded.pending.append(seconds)
            observed.observe(seconds)
        assert _without_created(folded_registry) == _without_created(observed_registry)
    assert not folded.pending


def test_a_process_nobody_scrapes_holds_fewer_than_fold_at_observations() -> None:
    metrics.enable()
    before = parse(asyncio.run(metrics.exposition()).decode())
    waiting = metrics._live.steps.pending if metrics._live is not None else None
    assert waiting is not None and not waiting  # the scrape folded them
    for _ in range(metrics.FOLD_AT - 1):
        metrics.step_finished(0.5)
    assert len(waiting) == metrics.FOLD_AT - 1
    metrics.step_finished(0.5)
    assert not waiting  # the FOLD_AT-th folded them all
    registry = metrics.registry()
    assert registry is not None
    count = registry.get_sample_value("flowledger_step_seconds_count")
    assert count == value(before, "flowledger_step_seconds_count") + metrics.FOLD_AT


def test_observations_from_threads_are_all_counted_while_others_fold() -> None:
    metrics.enable()
    before = parse(asyncio.run(metrics.exposition()).decode())
    per_thread, threads = 3 * metrics.FOLD_AT + 7, 4
    go = threading.Barrier(threads + 1)

    def observe() -> None:
        go.wait()
        for _ in range(per_thread):
            metrics.commit_finished(0.003)

    workers = [threading.Thread(target=observe) for _ in range(threads)]
    for worker in workers:
        worker.start()
    go.wait()
    while any(worker.is_alive() for worker in workers):
        parse(asyncio.run(metrics.exposition()).decode())  # scrapes fold meanwhile
    for worker in workers:
        worker.join()
    after = parse(asyncio.run(metrics.exposition()).decode())

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("flowledger_commit_seconds_count") == per_thread * threads
    assert moved("flowledger_commit_seconds_bucket", le="0.0025") == 0
    assert moved("flowledger_commit_seconds_bucket", le="0.005") == per_thread * threads


@dataclass
class Count:
    n: int = 0


async def test_a_scrape_during_a_run_sees_every_step_and_commit_before_it(tmp_path: Path) -> None:
    metrics.enable()
    seen: dict[int, Samples] = {}

    async def tick(state: Count) -> dict[str, int]:
        seen[state.n] = parse((await metrics.exposition()).decode())
        return {"n": state.n + 1}

    graph = flow.Graph("folded", state=Count)
    graph.add_vertex("tick", tick)
    graph.add_vertex("stop", tick)
    graph.add_route("tick", targets=["tick", "stop"], pick=lambda s: "tick" if s.n < 5 else "stop")
    async with open_store(f"sqlite:///{tmp_path / 'f.db'}") as storage:
        runner = graph.compile(
            entry="tick", finish="stop", store=flow.LedgerCheckpointStore(storage.ledger)
        )
        before = parse((await metrics.exposition()).decode())
        done = await runner.run(Count())
    assert done.run.status is flow.RunStatus.COMPLETED
    assert sorted(seen) == [0, 1, 2, 3, 4, 5]
    for step, samples in seen.items():
        # at step k, steps 0..k-1 have ended, each with its commit, after the seed's
        steps = value(samples, "flowledger_step_seconds_count")
        commits = value(samples, "flowledger_commit_seconds_count")
        assert steps - value(before, "flowledger_step_seconds_count") == step
        assert commits - value(before, "flowledger_commit_seconds_count") == step + 1
        assert value(samples, "flowledger_step_seconds_bucket", le="+Inf") == steps


def test_the_mirror_records_each_folded_observation_as_the_registry_counts_it() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from flowledger.observability import otel_metrics

    reader = InMemoryMetricReader()
    otel_metrics.mirror(MeterProvider(metric_readers=[reader]))
    try:
        before = parse(asyncio.run(metrics.exposition()).decode())
        values = [0.0004, 0.001, 0.0011, 0.7, 0.7, 45.0, 90.0]
        for seconds in values:
            metrics.step_finished(seconds)
        after = parse(asyncio.run(metrics.exposition()).decode())
        points: dict[str, Any] = {
            m.name: m.data.data_points[0]
            for r in reader.get_metrics_data().resource_metrics
            for s in r.scope_metrics
            for m in s.metrics
            if m.name == "flowledger_step_seconds"
        }
    finally:
        metrics.set_mirror(None)
    mirrored = points["flowledger_step_seconds"]
    assert mirrored.count == len(values)
    assert mirrored.sum == pytest.approx(sum(values))
    # per bucket, what the mirror saw equals what the registry counted since it began
    cumulative = 0
    for bound, count in zip(mirrored.explicit_bounds, mirrored.bucket_counts, strict=False):
        cumulative += count
        le = str(float(bound))
        name = "flowledger_step_seconds_bucket"
        assert value(after, name, le=le) - value(before, name, le=le) == cumulative
