"""Tracing with OpenTelemetry (the ``jobtrail[otel]`` extra; docs/postgres.md), following the
messaging semantic conventions.

* ``send(queue)`` — a PRODUCER span ``send <queue>`` around an enqueue (one per call of
  ``enqueue``, one for a whole ``enqueue_many``); ``carrier()`` inside it is the W3C
  ``traceparent`` (and ``tracestate``) that is stored with each task it creates: in the
  ``trace`` entry of the task's creating transition (``data``), written in the insert itself, so
  tracing adds no statement to an enqueue.
* ``process(...)`` — a CONSUMER span ``process <queue>`` around each attempt's handler. The
  first attempt is a child of the stored context (the request's trace continues in the
  worker); a later attempt starts a new trace with a link to it (a retry is its own unit of
  work, minutes or hours later). A failure sets the error status, ``error.type`` and
  ``jobtrail.error.category``.

Nothing is imported, and nothing happens, unless ``opentelemetry-api`` is installed; with the
API but no SDK configured the spans are OpenTelemetry's no-op ones and nothing is stored.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

SYSTEM = "jobtrail"
#: the key of the stored context in the creating transition's data
KEY = "trace"

_available: bool | None = None
#: a tracer provider set by ``use_provider`` (tests, or an application that does not set the
#: global one); ``None``: OpenTelemetry's global provider
_provider: Any = None


def available() -> bool:
    """True when ``opentelemetry-api`` is installed (checked once, without importing it)."""
    global _available
    if _available is None:
        try:
            _available = importlib.util.find_spec("opentelemetry.trace") is not None
        except (ImportError, ValueError):  # not installed, or its import blocked
            _available = False
    return _available


def use_provider(provider: Any) -> None:
    """Trace with ``provider`` instead of the global tracer provider (``None``: the global
    one again)."""
    global _provider, _recording_at
    _provider = provider
    _recording_at = float("-inf")  # look again at the next claim


def _tracer() -> Any:
    """The tracer of jobtrail's spans, or ``None`` when no tracer provider is configured: then
    OpenTelemetry's global provider is its proxy (or the no-op one), every span it gives is a
    no-op one, and not making them saves ~9 us per enqueue and per attempt."""
    from opentelemetry import trace

    global _tracer_of
    provider = _provider
    if provider is None:
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return None
    kept = _tracer_of
    if kept is not None and kept[0] is provider:
        return kept[1]
    # an SDK provider makes a new Tracer at every call (its scope, sampler and processors):
    # one per provider, made once
    tracer = provider.get_tracer("jobtrail")
    _tracer_of = (provider, tracer)
    return tracer


#: the provider ``_tracer`` last served and its tracer
_tracer_of: tuple[Any, Any] | None = None


@contextmanager
def send(queue: str, *, count: int = 1) -> Iterator[Any]:
    """The PRODUCER span of one enqueue (``None`` inside when tracing is off)."""
    tracer = _tracer() if available() else None
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
    }
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    with tracer.start_as_current_span(
        f"send {queue}", kind=SpanKind.PRODUCER, attributes=attributes
    ) as span:
        yield span if span.is_recording() else None


def carrier() -> dict[str, str] | None:
    """The current span's context as W3C trace-context headers, or ``None`` when there is no
    recording span (tracing off): what is stored with a task."""
    if not available():
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    span = trace.get_current_span()
    if not span.get_span_context().is_valid or not span.is_recording():
        return None
    headers: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(headers)
    return headers or None


def sent(span: Any, task_id: str, kind: str) -> None:
    """Name the task an enqueue's span created (the first, for a batch)."""
    if span is not None:
        span.set_attribute("jobtrail.task.id", task_id)
        span.set_attribute("jobtrail.task.kind", kind)


class Processing:
    """The CONSUMER span of one attempt; ``failed`` records an exception on it."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def failed(self, exc: BaseException, category: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self.span.set_attribute("error.type", type(exc).__qualname__)
        self.span.set_attribute("jobtrail.error.category", category)
        self.span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))


@contextmanager
def process(
    *, queue: str, task_id: str, kind: str, attempt: int, stored: Mapping[str, Any] | None
) -> Iterator[Processing | None]:
    """The CONSUMER span of one attempt (``None`` inside when tracing is off). ``stored`` is
    the context kept with the task (``carrier()`` at its enqueue), if any."""
    tracer = _tracer() if available() else None
    if tracer is None:
        yield None
        return
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parent = otel_context.Context()  # never the worker thread's own context
    links: list[Any] = []
    if stored:
        headers = {str(k): str(v) for k, v in stored.items()}
        remote = TraceContextTextMapPropagator().extract(headers)
        remote_span = trace.get_current_span(remote).get_span_context()
        if remote_span.is_valid:
            if attempt <= 1:
                parent = remote
            else:
                links.append(Link(remote_span))
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "jobtrail.task.id": task_id,
        "jobtrail.task.kind": kind,
        "jobtrail.attempt": attempt,
    }
    with tracer.start_as_current_span(
        f"process {queue}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield Processing(span) if span.is_recording() else None


#: ``recording()``'s last answer and when it was found (a worker asks at every claim round)
_recording = False
_recording_at = float("-inf")
#: seconds ``recording()`` keeps its answer: a provider configured meanwhile is seen that soon
RECHECK = 0.25


def recording() -> bool:
    """True when an SDK tracer provider is configured: the worker then reads the stored
    contexts of what it claims (one statement per claim round). The answer is kept for
    ``RECHECK`` seconds (the probe span costs a worker of short tasks a few percent of its CPU
    when made at every round); ``use_provider`` makes it look again at once."""
    global _recording, _recording_at
    now = time.monotonic()
    if now - _recording_at < RECHECK:
        return _recording
    _recording, _recording_at = _probe(), now
    return _recording


def _probe() -> bool:
    if not available():
        return False
    # No provider set: the global one is the API's proxy (``_tracer`` is None). Otherwise a
    # probe that is never ended is never exported: a configured SDK gives a valid context even
    # to a span its sampler drops (then the stored context of a sampled enqueue still decides,
    # through a parent-based sampler); a no-op provider gives the invalid one.
    tracer = _tracer()
    if tracer is None:
        return False
    span = tracer.start_span("jobtrail.probe")
    return bool(span.is_recording() or span.get_span_context().is_valid)
