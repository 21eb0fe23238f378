"""Tracing on both backends, with the OpenTelemetry SDK's in-memory exporter: a
PRODUCER span per enqueue whose context is stored with the task, a CONSUMER span per attempt
(the first a child of that context, later ones new traces linked to it), the messaging
attributes, and the error status and category of a failed attempt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import jobtrail
from jobtrail.core import tracing
from jobtrail.model.errors import TransientError

from .support import drain


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        yield provider, exporter
    finally:
        tracing.use_provider(None)
        provider.shutdown()


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def test_the_first_attempt_continues_the_trace_of_the_enqueue(
    app: jobtrail.App, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans

    @app.task("mail", queue="emails")
    def mail(ctx: Any, payload: Any) -> None:
        pass

    with provider.get_tracer("test").start_as_current_span("POST /signup") as request:
        task = app.enqueue("mail", {"to": "a@example.com"})
    drain(app, task.id)
    assert app.get(task.id).state == "succeeded"

    [send] = named(exporter, "send ")
    [process] = named(exporter, "process ")
    assert send.name == "send emails" and send.kind is SpanKind.PRODUCER
    assert send.parent is not None
    assert send.parent.span_id == request.get_span_context().span_id
    assert dict(send.attributes or {}) == {
        "messaging.system": "jobtrail",
        "messaging.destination.name": "emails",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "jobtrail.task.id": task.id,
        "jobtrail.task.kind": "mail",
    }
    assert process.name == "process emails" and process.kind is SpanKind.CONSUMER
    assert process.parent is not None and process.parent.is_remote
    assert process.parent.span_id == send.context.span_id
    assert process.context.trace_id == request.get_span_context().trace_id
    assert list(process.links) == []
    assert dict(process.attributes or {}) == {
        "messaging.system": "jobtrail",
        "messaging.destination.name": "emails",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "jobtrail.task.id": task.id,
        "jobtrail.task.kind": "mail",
        "jobtrail.attempt": 1,
    }
    assert process.status.status_code is StatusCode.UNSET
    # the context is stored with the task: in its creating transition, for anyone to read
    [created] = [t for t in app.transitions(task.id) if t.reason == "enqueued"]
    stored = created.data["trace"]
    assert stored["traceparent"].split("-")[1:3] == [
        format(send.context.trace_id, "032x"),
        format(send.context.span_id, "016x"),
    ]


def test_retries_are_new_traces_linked_to_the_enqueue_and_failures_are_errors(
    app: jobtrail.App, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    _, exporter = spans
    calls: list[int] = []

    @app.task("flaky", max_attempts=3, backoff_base=0.0, backoff_cap=0.0)
    def flaky(ctx: Any, payload: Any) -> None:
        calls.append(ctx.attempt)
        if len(calls) < 3:
            raise TransientError("provider busy", category="rate_limited")

    task = app.enqueue("flaky")
    drain(app, task.id)
    assert app.get(task.id).state == "succeeded"

    [send] = named(exporter, "send default")
    assert send.parent is None  # enqueued outside any trace: the send span is a root
    attempts = sorted(named(exporter, "process default"), key=lambda s: s.start_time or 0)
    assert [dict(s.attributes or {})["jobtrail.attempt"] for s in attempts] == [1, 2, 3]
    first, *later = attempts
    assert first.parent is not None and first.parent.span_id == send.context.span_id
    assert first.context.trace_id == send.context.trace_id
    for span in later:
        assert span.parent is None
        assert span.context.trace_id != send.context.trace_id
        [link] = span.links
        assert (link.context.trace_id, link.context.span_id) == (
            send.context.trace_id,
            send.context.span_id,
        )
    for span in attempts[:2]:
        assert span.status.status_code is StatusCode.ERROR
        assert dict(span.attributes or {})["jobtrail.error.category"] == "rate_limited"
        assert dict(span.attributes or {})["error.type"] == "TransientError"
    assert attempts[2].status.status_code is StatusCode.UNSET
    assert "jobtrail.error.category" not in dict(attempts[2].attributes or {})


def test_a_batch_enqueue_is_one_send_span_every_task_continues(
    app: jobtrail.App, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    _, exporter = spans

    @app.task("k")
    def k(ctx: Any, payload: Any) -> None:
        pass

    @app.task("async_k", max_attempts=1)  # one attempt: its span is the one to look at
    async def async_k(ctx: Any, payload: Any) -> None:
        raise ValueError("bad input")

    tasks = app.enqueue_many([{"kind": "k", "payload": n} for n in range(3)])
    keyed = app.enqueue_many([{"kind": "async_k", "idempotency_key": "a"}])
    app.run_worker(burst=True, poll_interval=0.02)
    plain, with_key = named(exporter, "send ")
    assert dict(plain.attributes or {})["messaging.batch.message_count"] == 3
    assert dict(plain.attributes or {})["jobtrail.task.id"] == tasks[0].id
    processed = {
        dict(s.attributes or {})["jobtrail.task.id"]: s for s in named(exporter, "process")
    }
    assert set(processed) == {t.id for t in tasks} | {keyed[0].id}
    for task in tasks:
        parent = processed[task.id].parent
        assert parent is not None and parent.span_id == plain.context.span_id
    failed = processed[keyed[0].id]  # an async handler's span, and its failure
    assert failed.parent is not None and failed.parent.span_id == with_key.context.span_id
    assert failed.status.status_code is StatusCode.ERROR
    assert dict(failed.attributes or {})["error.type"] == "ValueError"


def test_without_a_tracer_nothing_is_stored(app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx: Any, payload: Any) -> None:
        pass

    task = app.enqueue("k")
    drain(app, task.id)
    [created] = [t for t in app.transitions(task.id) if t.reason == "enqueued"]
    assert "trace" not in created.data
    with app._driver.transaction(write=False) as tx:
        assert app._driver.trace_contexts(tx, ids=app._driver._list([int(task.id)])) == []


def test_without_the_extra_nothing_is_imported(tmp_path: Path) -> None:
    """A process where ``opentelemetry`` cannot be imported enqueues and works as always."""
    script = textwrap.dedent(
        """
        import importlib.abc, json, sys

        class NoOtel(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(f"No module named {name!r}")
                return None

        sys.meta_path.insert(0, NoOtel())
        import jobtrail

        app = jobtrail.App(sys.argv[1])
        app.migrate()

        @app.task("k")
        def k(ctx, payload):
            pass

        task = app.enqueue("k")
        app.enqueue_many([{"kind": "k"}])
        done = app.run_worker(burst=True, poll_interval=0.02)
        print(json.dumps({
            "done": done,
            "state": app.get(task.id).state,
            "imported": sorted(m for m in sys.modules if m.startswith("opentelemetry")),
        }))
        """
    )
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    out = subprocess.run(
        [sys.executable, "-c", script, url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "error"},
        check=True,
    )
    assert json.loads(out.stdout) == {"done": 2, "state": "succeeded", "imported": []}
