"""A store seeded with tasks in many states, for the dashboard tests (pages and browser)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import jobtrail
from jobtrail.core import transition
from jobtrail.store.base import Claim


@dataclass
class Seeded:
    app: jobtrail.App
    succeeded: str
    dead: str
    dead_other: str
    leased: str
    later: str
    cancelled: str
    parent: str
    keyed: str
    tenant_task: str


def seed(app: jobtrail.App) -> Seeded:
    @app.task("publish_note", max_attempts=1)
    def publish_note(ctx: jobtrail.Context, payload: dict[str, object]) -> dict[str, str]:
        ctx.step("upload_images", lambda: {"images": 2})
        receipt = ctx.effect("submit_body", lambda key: {"post_id": "p-1", "key": key})
        ctx.emit("note.published", {"post": receipt["post_id"]})
        if payload.get("fail"):
            raise jobtrail.PermanentError("token revoked", category="unauthorized")
        return {"ok": "yes"}

    @app.task("flaky", max_attempts=1)
    def flaky(ctx: jobtrail.Context, payload: object) -> None:
        raise jobtrail.PermanentError("bad input", category="invalid_input")

    @app.task("slow", queue="slowq", lease_seconds=3600.0)
    def slow(ctx: jobtrail.Context, payload: object) -> None:  # pragma: no cover
        pass

    @app.periodic("*/5 * * * *", kind="tick")
    def tick(ctx: jobtrail.Context, payload: object) -> None:
        pass

    @app.sink("note.published")
    def sink(message_id: object, topic: str, payload: object) -> None:
        pass

    ok = app.enqueue("publish_note", {"body": "hello"}, idempotency_key="note-42")
    dead = app.enqueue("publish_note", {"body": "bye", "fail": True})
    dead_other = app.enqueue("flaky", {"x": 1})
    parent = app.enqueue_workflow(
        "pipeline",
        children=[("publish_note", {"body": "a"}), ("publish_note", {"body": "b"})],
        sequential=True,
    )
    tenant_task = app.enqueue("publish_note", {"body": "t"}, tenant="acme")
    app.run_worker(queues=["default"], burst=True)
    app.dispatch_outbox()
    later = app.enqueue("publish_note", {"body": "later"}, delay=3600)
    cancelled = app.enqueue("publish_note", {"body": "no"}, delay=3600)
    app.cancel(cancelled.id, by="alice", note="wrong note")
    leased = app.enqueue("slow", {"n": 1})
    with app._driver.transaction() as tx:
        rows = transition.claim(
            app._driver,
            tx,
            Claim(owner="web-1:412:7f3a", queues=["slowq"], kinds=["slow"], limit=1, version="1.0"),
        )
    assert [str(r["id"]) for r in rows] == [leased.id]
    app.schedule_due()  # first sight of the schedule: it starts at its next window
    # simulate 30 minutes of downtime: catch_up=1 runs the newest missed window, skips the rest
    back = app._driver.encode_time(app.db_now() - timedelta(minutes=30))
    with app._driver.transaction() as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        mark = "?" if app._driver.dialect == "sqlite" else "%s"
        conn.execute(
            f"UPDATE jobtrail_cron_schedules SET anchor_at = {mark} WHERE kind = {mark}",  # noqa: S608
            (back, "tick"),
        )
    app.schedule_due()
    return Seeded(
        app=app,
        succeeded=ok.id,
        dead=dead.id,
        dead_other=dead_other.id,
        leased=leased.id,
        later=later.id,
        cancelled=cancelled.id,
        parent=parent.id,
        keyed=ok.id,
        tenant_task=tenant_task.id,
    )


class Served:
    """The dashboard of ``app`` in a real uvicorn server on a free loopback port (a thread)."""

    def __init__(self, app: jobtrail.App, authorize: object = None) -> None:
        import socket
        import threading
        import time

        import uvicorn

        from jobtrail.web.dashboard import create_dashboard_app

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        web = create_dashboard_app(app, authorize=authorize)  # type: ignore[arg-type]
        config = uvicorn.Config(
            web, host="127.0.0.1", port=self.port, log_level="warning", ws="none", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the dashboard server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
