"""The process's metrics registry mirrored as OpenTelemetry metrics (exported over OTLP).

There is one registry (`flowledger.observability.metrics`, ``prometheus_client``'s); this
module gives an OpenTelemetry meter an instrument for each of its metrics, named, described
and labelled as there, so the two never disagree and no second list of names exists:

* counters and gauges become *observable* instruments whose callbacks read the registry's
  values when the OpenTelemetry reader collects (nothing extra per count);
* histograms become OpenTelemetry histograms with the registry's buckets, fed by each
  observation (the OpenTelemetry SDK has no observable histogram);
* census gauges (``flowledger_runs_unfinished``) take their census when the reader collects
  on a thread of its own (the periodic exporter's), on the event loop that registered the
  census; collected on that loop itself, they report the last census taken.

`mirror` takes a meter provider (an SDK ``MeterProvider`` with the operator's readers);
`mirror_from_environment` is what the command line calls (``FLOWLEDGER_METRICS=otlp``,
docs/observability.md). Nothing here imports :mod:`opentelemetry` until then.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from . import metrics
from .switches import otlp_requested

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

__all__ = ["mirror", "mirror_from_environment"]

#: How long a collection waits for a census on the event loop (a census is a few key
#: listings; a loop that does not answer by then is reported with its last census).
_CENSUS_WAIT = 10.0


def mirror(meter_provider: MeterProvider | None = None) -> None:
    """Turn metrics on (`metrics.enable`: the ``prometheus`` extra is needed) and mirror
    the registry through ``meter_provider`` (default: OpenTelemetry's global one).
    Idempotent per process: a second call replaces the mirror."""
    from opentelemetry import metrics as otel

    from .. import __version__

    metrics.enable()
    provider = meter_provider if meter_provider is not None else otel.get_meter_provider()
    metrics.set_mirror(_Mirror(provider.get_meter("flowledger", __version__)))


def mirror_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Configure the mirror from ``FLOWLEDGER_METRICS``: unset or ``none`` leaves it off;
    ``otlp`` exports every ``OTEL_METRIC_EXPORT_INTERVAL`` ms (default 60 s) over OTLP/HTTP
    (endpoint, headers and resource from the standard ``OTEL_*`` variables). Returns
    whether it is on. `ValueError` names an unknown value; `RuntimeError` says which extra
    is missing (``otel`` for the SDK and exporter, ``prometheus`` for the registry)."""
    env = os.environ if environ is None else environ
    if not otlp_requested(env, "FLOWLEDGER_METRICS"):
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    except ImportError as exc:
        raise RuntimeError(
            "FLOWLEDGER_METRICS=otlp needs the otel extra: pip install 'flowledger[otel]'"
        ) from exc
    try:
        metrics.enable()
    except metrics.MetricsUnavailableError as exc:
        raise RuntimeError(f"FLOWLEDGER_METRICS=otlp: {exc}") from None
    import atexit

    reader = PeriodicExportingMetricReader(OTLPMetricExporter())
    provider = SdkMeterProvider(metric_readers=[reader])  # resource: OTEL_SERVICE_NAME, ...
    atexit.register(provider.shutdown)  # a last export when the command ends
    mirror(provider)
    return True


class _Mirror:
    """The OpenTelemetry instruments of the registry's metrics (`metrics.Mirror`)."""

    def __init__(self, meter: Any) -> None:
        self._meter = meter
        self._histograms: dict[int, tuple[Any, tuple[str, ...]]] = {}
        self._censuses: set[str] = set()
        for metric in metrics.collectors():
            self._add(metric)

    def _add(self, metric: Any) -> None:
        # prometheus_client offers a metric's name, text, type and label names only as
        # these attributes (describe() leaves the label names out)
        name, doc, labels = metric._name, metric._documentation, tuple(metric._labelnames)
        unit = "s" if name.endswith("_seconds") else ""
        kind = metric._type
        if kind == "histogram":
            bounds = [float(b) for b in metric._upper_bounds if b != float("inf")]
            instrument = self._meter.create_histogram(
                name, unit=unit, description=doc, explicit_bucket_boundaries_advisory=bounds
            )
            self._histograms[id(metric)] = (instrument, labels)
        elif kind == "counter":
            read = _reader(metric, name + "_total")
            self._meter.create_observable_counter(name, [read], unit=unit, description=doc)
        else:
            read = _reader(metric, name)
            self._meter.create_observable_gauge(name, [read], unit=unit, description=doc)

    def observed(self, histogram: Any, labels: tuple[str, ...], value: float) -> None:
        found = self._histograms.get(id(histogram))
        if found is not None:
            instrument, names = found
            instrument.record(value, dict(zip(names, labels, strict=True)))

    def census_added(
        self, gauge: Any, census: metrics.Census, loop: asyncio.AbstractEventLoop | None
    ) -> None:
        name = gauge._name
        if name in self._censuses:
            return  # registered again: the callback reads the current one (`census_of`)
        self._censuses.add(name)
        labels = tuple(gauge._labelnames)
        last = _reader(gauge, name)

        def read(options: CallbackOptions) -> Iterable[Observation]:
            current = metrics.census_of(name)
            counts = None if current is None else _census_now(*current)
            if counts is None:  # removed, or not from another thread: the last census
                return last(options)
            from opentelemetry.metrics import Observation

            return [
                Observation(count, dict(zip(labels, values, strict=True)))
                for values, count in counts.items()
            ]

        self._meter.create_observable_gauge(name, [read], description=gauge._documentation)


def _reader(metric: Any, sample: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    """A callback observing ``metric``'s samples named ``sample``, one per label set."""

    def read(options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        return [
            Observation(s.value, dict(s.labels))
            for family in metric.collect()
            for s in family.samples
            if s.name == sample
        ]

    return read


def _census_now(
    census: metrics.Census, loop: asyncio.AbstractEventLoop | None
) -> Mapping[tuple[str, ...], float] | None:
    """``census()`` taken on ``loop`` from another thread; None if that cannot be done
    here (no loop running, or this is its thread) or it did not answer in time."""
    if loop is None or not loop.is_running():
        return None
    try:
        if asyncio.get_running_loop() is loop:
            return None
    except RuntimeError:
        pass
    future = asyncio.run_coroutine_threadsafe(_taken(census), loop)
    try:
        return future.result(timeout=_CENSUS_WAIT)
    except Exception:
        future.cancel()
        return None


async def _taken(census: metrics.Census) -> Mapping[tuple[str, ...], float]:
    return await census()
