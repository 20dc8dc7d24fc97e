"""OpenTelemetry traces of runs, segments, super-steps, vertices, tool calls and commits.

Off by default, and then free: every instrumented place checks the module flag
`ENABLED` first, and nothing here imports :mod:`opentelemetry` until `enable` is called.
`enable` takes a tracer provider (an SDK ``TracerProvider`` with the operator's
exporter), or uses OpenTelemetry's global one; `enable_from_environment` is what the
long-running commands call (``FLOWLEDGER_TRACES=otlp``, see docs/observability.md).

One run reads as one trace: when its record is created (`run_root`), a ``flowledger.run``
span is recorded and its W3C ``traceparent`` is stored in the run record; every later
segment - in this process or another - is a child of that context (`segment`).

Spans carry identifiers, names, counts and outcomes only (`Attributes`); never state,
inputs, payloads, tool arguments or results, nor exception messages (which may quote
them): a failure is recorded as its class name (``error.type``).

**Spans inside a segment are recorded directly.** The OpenTelemetry SDK spends about
30 µs starting and ending one span (sampler, `BoundedAttributes`, its lock, a second copy
into a ``ReadableSpan``), more than a tenth of a small durable step, and a step records two.
So when the provider is the SDK's ``TracerProvider``, a span whose parent is a sampled span
(the step, vertex, commit and tool call spans, whose parent is the segment or one of
them) is built as the ``ReadableSpan`` the SDK would have built and handed to the
provider's span processors when it ends. Its ids come from the provider's id generator,
its trace flags and trace state are its parent's (the decision a parent-based sampler,
the default, makes); the tracer's sampler is not asked again, processors' ``on_start`` is
not called and the SDK's own span-count metrics do not count it. The run and segment
spans, which start a trace or continue a stored one, go through the tracer as usual, and
with any other provider every span does (docs/observability.md#how-spans-are-recorded).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from .switches import otlp_requested

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = [
    "ENABLED",
    "TRACEPARENT",
    "Attributes",
    "Recording",
    "commit_spans",
    "current_segment",
    "disable",
    "enable",
    "enable_from_environment",
    "in_segment",
    "run_root",
    "segment",
    "span",
]

Attributes = Mapping[str, str | int | bool]


class Recording(Protocol):
    """What callers may do with a span they are given: add attributes (an SDK span and
    a directly recorded one both do)."""

    def set_attribute(self, key: str, value: str | int | bool) -> None: ...

    def set_attributes(self, attributes: Attributes) -> None: ...

    def get_span_context(self) -> Any: ...


ENABLED: bool = False
"""Whether spans are recorded; instrumented hot paths check only this."""

TRACEPARENT: Final = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
"""A stored W3C trace context (version 00), as `run_root` writes it."""

_tracer: Tracer | None = None
_otel: Any = None  # (opentelemetry.context, opentelemetry.trace), bound by `enable`
_direct: _Direct | None = None  # set when the provider is the SDK's (module docstring)
_commits = False
_segment: ContextVar[span | None] = ContextVar("flowledger_trace_segment", default=None)


def enable(tracer_provider: TracerProvider | None = None, *, commits: bool = False) -> None:
    """Record spans through ``tracer_provider`` (default: OpenTelemetry's global provider,
    which an application or ``opentelemetry-instrument`` configures). ``commits`` adds a
    span per checkpoint commit (off by default: one per durable append)."""
    global ENABLED, _tracer, _commits, _otel, _direct
    from opentelemetry import context, trace

    from .. import __version__

    _otel = (context, trace)
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    _tracer = provider.get_tracer("flowledger", __version__)
    _direct = _Direct.of(_tracer, __version__)
    _commits = commits
    ENABLED = True


def disable() -> None:
    """Stop recording spans (the provider and its exporters are the caller's to shut down)."""
    global ENABLED, _tracer, _commits, _direct
    ENABLED = False
    _tracer = None
    _direct = None
    _commits = False


def enable_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Configure tracing from ``FLOWLEDGER_TRACES``: unset or ``none`` leaves it off;
    ``otlp`` installs an SDK provider exporting over OTLP/HTTP (endpoint, headers and
    resource from the standard ``OTEL_*`` variables); ``FLOWLEDGER_TRACE_COMMITS=1``
    adds commit spans. Returns whether tracing is on. `ValueError` names an unknown
    value; `RuntimeError` says which extra is missing."""
    env = os.environ if environ is None else environ
    if not otlp_requested(env, "FLOWLEDGER_TRACES"):
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise RuntimeError(
            "FLOWLEDGER_TRACES=otlp needs the otel extra: pip install 'flowledger[otel]'"
        ) from exc
    import atexit

    from opentelemetry import trace

    provider = SdkTracerProvider()  # resource: OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    atexit.register(provider.shutdown)  # flush what is batched when the command ends
    # global too: the MCP SDK's own client and server spans join the same traces
    trace.set_tracer_provider(provider)
    enable(provider, commits=env.get("FLOWLEDGER_TRACE_COMMITS", "") == "1")
    return True


def commit_spans() -> bool:
    """Whether a span is recorded per checkpoint commit."""
    return ENABLED and _commits


def in_segment() -> bool:
    """Whether the current context is inside a ``flowledger.segment`` span."""
    return _segment.get() is not None


def current_segment() -> Recording | None:
    """The innermost ``flowledger.segment`` span of the current context (None outside
    one): the parent the engine names for its step spans, which spares looking the
    current span up in OpenTelemetry's context."""
    return _segment.get()


@contextlib.contextmanager
def segment(kind: str, attributes: Attributes, traceparent: str | None) -> Iterator[Recording]:
    """A ``flowledger.segment`` span (``kind``: start, resume, adoption), a child of the
    run's stored ``traceparent`` when there is one (then linked to the current span, if
    any: what asked for the segment), else of the current span. Spans of steps and
    vertices inside it are its descendants. Only call it when `ENABLED`."""
    parent = links = None
    if traceparent:
        parent = _otel[1].get_current_span(_context_of(traceparent))  # the stored span
        # what asked for this segment (an MCP request, a CLI command's span) is linked
        invoker = _otel[1].get_current_span().get_span_context()
        if invoker.is_valid:
            links = [_otel[1].Link(invoker)]
    started = span("flowledger.segment", {**attributes, "flowledger.segment.kind": kind}, parent)
    started._links = links
    with started as current:
        token = _segment.set(started)
        try:
            yield current
        finally:
            _segment.reset(token)


def run_root(attributes: Attributes) -> str | None:
    """Record the ``flowledger.run`` span of a run being created (a child of the current
    span, e.g. an MCP request's) and return its W3C ``traceparent`` for the run record;
    None when tracing is off."""
    if not ENABLED:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    with span("flowledger.run", attributes):
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
    found = carrier.get("traceparent")
    return found if found is not None and TRACEPARENT.fullmatch(found) else None


def _context_of(traceparent: str) -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


class span:  # lower case: used like a function, ``with tracing.span(...) as recorded:``
    """A span named ``name``, a child of ``parent`` (a span this module gave) or else of
    the current span; ``current`` makes it the current span for the ``with`` block.

    A span whose children all name it as their ``parent`` need not be current: that
    saves a context attach and detach per span (the engine's step span).

    Only use it when `ENABLED`. An exception leaving the block marks the span as an
    error with ``error.type`` (the class name; its message is never recorded) and
    ``flowledger.outcome`` ``failed``; a cancellation only sets the outcome ``stopped``.

    A class, not a generator context manager, because the engine opens two per
    super-step. Recorded directly (module docstring), it is the span itself: it keeps
    the attributes until the block ends, then hands the finished span to the
    processors. Either way it remembers its trace id, flags and state once known, so
    that its children need not read them through OpenTelemetry's properties."""

    __slots__ = (
        "_above",
        "_attributes",
        "_current",
        "_links",
        "_name",
        "_parent",
        "_span",
        "_start",
        "_status",
        "_token",
        "_trace",
        "context",
    )

    def __init__(
        self,
        name: str,
        attributes: Attributes,
        parent: Recording | None = None,
        *,
        current: bool = True,
    ) -> None:
        self._name = name
        self._attributes: Any = attributes
        self._parent = parent
        self._links: Any = None
        self._current = current
        self._token: Any = None
        self.context: Any = None
        # (trace id, trace flags, trace state) once known to be sampled: children may
        # then be recorded directly, with these
        self._trace: tuple[int, Any, Any] | None = None

    def __enter__(self) -> Recording:
        direct = _direct
        if direct is not None and self._links is None:
            parent = self._parent
            if type(parent) is span:  # ours: its trace and decision are at hand
                trace, above = parent._trace, parent.context
            else:
                trace, above = _sampled(parent)
            if trace is not None:
                # the parent's flags and trace state, as a parent-based sampler decides;
                # 0 is the invalid span id: the generator itself draws again
                span_id = direct.new_span_id() or direct.ids.generate_span_id()
                self.context = direct.span_context(trace[0], span_id, False, trace[1], trace[2])
                self._trace = trace
                self._above = above
                self._span: Any = self
                self._attributes = dict(self._attributes)
                self._status = direct.unset
                if self._current:
                    api = _otel[1]
                    self._token = _otel[0].attach(
                        api.set_span_in_context(api.NonRecordingSpan(self.context))
                    )
                self._start = time.time_ns()
                return self
        return self._through_tracer()

    def _through_tracer(self) -> Recording:
        """Start the span through the tracer (not recorded directly)."""
        tracer = _tracer
        if tracer is None:  # disabled meanwhile: a span that records nothing
            from opentelemetry.trace import INVALID_SPAN

            self._span = INVALID_SPAN
            return INVALID_SPAN
        context, trace = _otel
        parent = self._parent
        if parent is not None and not isinstance(parent, trace.Span):  # one of ours
            parent = trace.NonRecordingSpan(parent.get_span_context())
        started = self._span = tracer.start_span(
            self._name,
            context=None if parent is None else trace.set_span_in_context(parent),
            attributes=self._attributes,
            links=self._links,
            record_exception=False,  # an exception's message may quote state or arguments
            set_status_on_exception=False,
        )
        found = self.context = started.get_span_context()
        if found.is_valid and found.trace_flags.sampled:
            self._trace = (found.trace_id, found.trace_flags, found.trace_state)
        if self._current:
            self._token = context.attach(trace.set_span_in_context(started))
        return started

    def __exit__(self, kind: type[BaseException] | None, error: object, tb: object) -> None:
        token = self._token
        if token is not None:
            _otel[0].detach(token)
        recorded = self._span
        if kind is not None:
            _mark_failed(recorded, kind)
        if recorded is not self:
            recorded.end()
            return
        direct = _direct
        if direct is None:  # disabled meanwhile
            return
        if direct.multi is not None and direct.multi._span_processors is not direct.known:
            direct.learn()  # a processor was added to the provider since
        finished = direct.readable(  # positionally, in the order `_Direct.of` checked
            self._name,
            self.context,
            self._above,
            direct.resource,
            self._attributes,
            (),  # events
            (),  # links
            direct.internal,
            None,  # instrumentation_info: deprecated for the scope below
            self._status,
            self._start,
            time.time_ns(),
            direct.scope,
        )
        for receive in direct.receivers:
            receive(finished)

    # -- what callers do with a span recorded directly -------------------------------------

    def set_attribute(self, key: str, value: str | int | bool) -> None:
        self._attributes[key] = value

    def set_attributes(self, attributes: Attributes) -> None:
        self._attributes.update(attributes)

    def set_status(self, code: Any) -> None:
        from opentelemetry.trace import Status

        self._status = Status(code)

    def get_span_context(self) -> Any:
        return self.context


def _sampled(parent: Recording | None) -> tuple[tuple[int, Any, Any] | None, Any]:
    """(trace id, flags, state) of ``parent`` (else of the current span) if it is a
    valid sampled span, else None; and its span context."""
    api = _otel[1]
    above = (api.get_current_span() if parent is None else parent).get_span_context()
    if above.is_valid and above.trace_flags.sampled:
        return (above.trace_id, above.trace_flags, above.trace_state), above
    return None, above


def _mark_failed(recorded: Any, kind: type[BaseException]) -> None:
    """What an exception leaving a span's block records on it (`span`)."""
    if issubclass(kind, asyncio.CancelledError):
        # cut short (a cancel, a lost lease, a shutdown): not a failure of the work
        recorded.set_attribute("flowledger.outcome", "stopped")
        return
    from opentelemetry.trace import StatusCode

    recorded.set_attribute("flowledger.outcome", "failed")
    recorded.set_attribute("error.type", kind.__qualname__)
    recorded.set_status(StatusCode.ERROR)


class _Direct:
    """What recording a span directly needs from an SDK tracer: its span processor (the
    provider's processors), resource and id generator, which the SDK's ``Tracer`` keeps
    as public attributes.

    A finished span is handed to each of the provider's processors (`receivers`)
    rather than to the provider's ``SynchronousMultiSpanProcessor``, and to a
    ``BatchSpanProcessor`` through its batch's ``emit``: what the processor's ``on_end``
    does with a sampled span after reading its context through three properties, and
    every span recorded directly is sampled. That hand-over was a quarter of what a span
    cost (docs/benchmarks.md#traces). Likewise span ids come from ``random.getrandbits``
    when the id generator is the SDK's ``RandomIdGenerator``, which draws them there."""

    __slots__ = (
        "ids",
        "internal",
        "known",
        "multi",
        "new_span_id",
        "processor",
        "readable",
        "receivers",
        "resource",
        "scope",
        "span_context",
        "unset",
    )

    def __init__(self, tracer: Any, version: str) -> None:
        import functools
        import random

        from opentelemetry.sdk.trace import ReadableSpan, SynchronousMultiSpanProcessor
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, Status

        self.processor: Any = tracer.span_processor
        self.resource: Any = tracer.resource
        self.ids: Any = tracer.id_generator
        self.new_span_id: Callable[[], int] = (
            functools.partial(random.getrandbits, 64)
            if type(self.ids) is RandomIdGenerator
            else self.ids.generate_span_id
        )
        self.readable = ReadableSpan
        self.scope = InstrumentationScope("flowledger", version)
        self.span_context = SpanContext
        self.internal = SpanKind.INTERNAL
        self.unset = Status()
        # the provider's own multi-processor: its tuple of processors is replaced when
        # one is added, so `known` tells whether `receivers` is still current
        self.multi: Any = (
            self.processor
            if type(self.processor) is SynchronousMultiSpanProcessor
            and isinstance(getattr(self.processor, "_span_processors", None), tuple)
            else None
        )
        self.known: Any = None
        self.receivers: tuple[Callable[[Any], None], ...] = (self.processor.on_end,)
        if self.multi is not None:
            self.learn()

    def learn(self) -> None:
        """Read the provider's processors again (`receivers`)."""
        processors = self.multi._span_processors
        self.receivers = tuple(_receiver(p) for p in processors)
        self.known = processors

    @classmethod
    def of(cls, tracer: Any, version: str) -> _Direct | None:
        """The parts of ``tracer`` if it is the SDK's and its ``ReadableSpan`` takes the
        parameters `span` passes, else None (spans then go through ``tracer``
        itself: a proxy, a no-op, another implementation or an SDK that changed)."""
        try:
            from opentelemetry.sdk.trace import ReadableSpan
            from opentelemetry.sdk.trace import Tracer as SdkTracer
        except ImportError:  # the API alone is installed
            return None
        if type(tracer) is not SdkTracer:  # a subclass may record spans its own way
            return None
        if tuple(inspect.signature(ReadableSpan).parameters) != _READABLE_SPAN_PARAMETERS:
            return None
        return cls(tracer, version)


def _receiver(processor: Any) -> Callable[[Any], None]:
    """What a sampled finished span is handed to: a ``BatchSpanProcessor``'s batch
    (``emit``, what its ``on_end`` calls for a sampled span), any other's ``on_end``."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if type(processor) is BatchSpanProcessor:
        emit = getattr(getattr(processor, "_batch_processor", None), "emit", None)
        if callable(emit):
            return cast("Callable[[Any], None]", emit)
    return cast("Callable[[Any], None]", processor.on_end)


_READABLE_SPAN_PARAMETERS: Final = (
    "name",
    "context",
    "parent",
    "resource",
    "attributes",
    "events",
    "links",
    "kind",
    "instrumentation_info",
    "status",
    "start_time",
    "end_time",
    "instrumentation_scope",
)
