"""The outbox (``ctx.emit``, sinks), on both backends."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import jobtrail
from jobtrail import PermanentError, TransientError

from ._effects_support import WAIT, burst, reasons


def deliver_until(app: jobtrail.App, task_id: str, timeout: float = WAIT) -> list[dict[str, Any]]:
    """Call ``dispatch_outbox`` until every message of the task is delivered (a failed delivery
    is due again after a random delay of at most ``0.5 * 2**attempts`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        app.dispatch_outbox()
        messages = app.outbox(task_id)
        if messages and all(m["state"] == "delivered" for m in messages):
            return messages
        if time.monotonic() > deadline:
            raise AssertionError(f"not delivered in time: {messages}")
        time.sleep(0.02)


def test_emit_commits_with_success_and_is_delivered_to_the_sink(app: jobtrail.App) -> None:
    received: list[tuple[int, str, Any]] = []

    @app.sink("note.published")
    def on_published(message_id: int, topic: str, payload: Any) -> None:
        received.append((message_id, topic, payload))

    @app.sink("note.audit")
    def on_audit(message_id: int, topic: str, payload: Any) -> None:
        received.append((message_id, topic, payload))

    @app.task("publish")
    def publish(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.emit("note.published", {"note": payload["note"], "tags": ["a", "b"]})
        ctx.emit("note.audit", "published")

    task = app.enqueue("publish", {"note": 7})
    burst(app)
    assert app.get(task.id).state == "succeeded"

    messages = app.outbox(task.id)
    assert [(m["topic"], m["payload"]) for m in messages] == [
        ("note.published", {"note": 7, "tags": ["a", "b"]}),
        ("note.audit", "published"),
    ]
    assert all(m["state"] == "delivered" and m["attempts"] == 1 for m in messages)
    assert all(m["delivered_at"] is not None for m in messages)
    assert sorted(received) == sorted((m["id"], m["topic"], m["payload"]) for m in messages)
    assert app.dispatch_outbox() == 0  # nothing left: no second delivery
    assert len(received) == 2


def test_emit_from_a_failed_attempt_is_never_written(app: jobtrail.App) -> None:
    received: list[Any] = []
    app.sink("*")(lambda message_id, topic, payload: received.append(payload))

    @app.task("emits_then_fails", max_attempts=1)
    def emits_then_fails(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.emit("note.published", {"never": True})
        raise PermanentError("bad input", category="invalid_input")

    @app.task("emits_per_attempt", backoff_base=0)
    def emits_per_attempt(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.emit("note.attempt", {"attempt": ctx.attempt})
        if ctx.attempt == 1:
            raise TransientError("flaky", category="unavailable")

    failed = app.enqueue("emits_then_fails")
    retried = app.enqueue("emits_per_attempt")
    burst(app)

    assert app.get(failed.id).state == "dead"
    assert app.outbox(failed.id) == []
    assert reasons(app, retried.id)[-3:] == ["retry_scheduled", "claimed", "completed"]
    messages = app.outbox(retried.id)
    assert [(m["topic"], m["payload"], m["state"]) for m in messages] == [
        ("note.attempt", {"attempt": 2}, "delivered")
    ]
    assert received == [{"attempt": 2}]


def test_a_failing_sink_leaves_the_message_delivering_until_it_is_fixed(
    app: jobtrail.App,
) -> None:
    broken = [True]
    received: list[tuple[int, Any]] = []

    @app.sink("note.published")
    def flaky_sink(message_id: int, topic: str, payload: Any) -> None:
        if broken[0]:
            raise ConnectionError("consumer down")
        received.append((message_id, payload))

    @app.task("publish")
    def publish(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.emit("note.published", {"n": 1})

    task = app.enqueue("publish")
    burst(app)
    assert app.get(task.id).state == "succeeded"  # delivery is after the commit, separately

    [message] = app.outbox(task.id)
    assert message["state"] == "pending" and message["delivered_at"] is None
    assert message["attempts"] >= 1
    assert "consumer down" in (message["last_error"] or "")
    text = app.explain(task.id)
    assert "1 delivering, 0 delivered" in text
    assert f"#{message['id']} note.published: delivering" in text
    assert received == []

    broken[0] = False
    [done] = deliver_until(app, task.id)
    assert done["attempts"] > message["attempts"]
    assert received == [(message["id"], {"n": 1})]
    assert f"#{message['id']} note.published: delivered" in app.explain(task.id)


class Recorder(BaseHTTPRequestHandler):
    """Answers 500 to the first POST, then 200; records every request."""

    requests: list[tuple[dict[str, str], Any]]

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append((dict(self.headers), json.loads(body)))  # type: ignore[attr-defined]
        status = 500 if len(self.server.requests) == 1 else 200  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_consumer() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT)


def test_the_http_sink_retries_with_backoff_and_sends_an_idempotency_key(
    app: jobtrail.App, http_consumer: ThreadingHTTPServer
) -> None:
    host, port = http_consumer.server_address[:2]
    app.http_sink("note.published", f"http://{host}:{port}/hook", timeout=5)

    @app.task("publish")
    def publish(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.emit("note.published", {"note": "hello"})

    task = app.enqueue("publish")
    burst(app)
    [done] = deliver_until(app, task.id)
    requests = http_consumer.requests  # type: ignore[attr-defined]
    assert len(requests) == 2  # the 500, then the 200
    assert done["attempts"] == 2
    bodies = [body for _, body in requests]
    assert (
        bodies == [{"id": done["id"], "topic": "note.published", "payload": {"note": "hello"}}] * 2
    )
    keys = [headers.get("Idempotency-Key") for headers, _ in requests]
    assert keys[0] is not None and keys == [keys[0]] * 2  # the same key on every attempt
    assert str(done["id"]) in keys[0]
    assert all(h.get("Content-Type") == "application/json" for h, _ in requests)


def test_messages_committed_before_a_crash_are_delivered_by_another_dispatcher(
    store: Any,
) -> None:
    """Crash between the commit and the delivery: the first App has no sink (so nothing is
    delivered); a second App on the same store with a sink delivers exactly the committed
    rows."""
    first = store.app()

    @first.task("publish")
    def publish(ctx: jobtrail.Context, payload: Any) -> None:
        for i in range(payload["n"]):
            ctx.emit("note.published", {"i": i})

    a = first.enqueue("publish", {"n": 2})
    b = first.enqueue("publish", {"n": 1})
    burst(first)
    assert [first.get(t.id).state for t in (a, b)] == ["succeeded", "succeeded"]
    pending = first.outbox(a.id) + first.outbox(b.id)
    assert [(m["state"], m["attempts"]) for m in pending] == [("pending", 0)] * 3
    assert "2 delivering, 0 delivered" in first.explain(a.id)

    second = store.app()
    received: list[tuple[int, str, Any]] = []
    second.sink("note.published")(lambda i, topic, payload: received.append((i, topic, payload)))
    assert second.dispatch_outbox() == 3
    assert sorted(received) == sorted((m["id"], m["topic"], m["payload"]) for m in pending)
    assert [m["payload"] for m in pending] == [{"i": 0}, {"i": 1}, {"i": 0}]
    delivered = second.outbox(a.id) + second.outbox(b.id)
    assert [(m["state"], m["attempts"]) for m in delivered] == [("delivered", 1)] * 3
    assert second.dispatch_outbox() == 0
    assert len(received) == 3
