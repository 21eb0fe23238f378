"""Live workers on both backends: a running worker's heartbeat row and what it
shows (``app.workers()``, ``GET /api/workers`` with its tenant rule), a stopped worker gone,
a silent one forgotten after its ``stale_after``, and ``explain`` of a due task that no live
worker takes. (A SIGKILLed worker process: ``tests/integration/test_live_workers_crash.py``.)"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import pytest

import jobtrail
from jobtrail.worker import Worker, WorkerOptions

from ._http_support import auth, client
from .support import OWNER_RE, db_now, live_worker, wait_for


def blocking(app: jobtrail.App, *kinds: str, queue: str = "default") -> threading.Event:
    """Register ``kinds`` with a handler that runs until the returned event is set."""
    release = threading.Event()

    def hold(ctx: Any, payload: Any) -> None:
        release.wait(30)

    for kind in kinds:
        app.task(kind, queue=queue)(hold)
    return release


def test_a_running_worker_is_listed_with_its_fields_until_it_stops(store: Any) -> None:
    app = store.app(version="v7")
    release = blocking(app, "a")
    blocking(app, "b", queue="other")
    assert app.workers() == []
    task = app.enqueue("a", tenant="t1")
    before = db_now(app)
    handle = app.start_worker(concurrency=3, queues=["other", "default"])
    try:
        (w,) = wait_for(
            lambda: [w for w in app.workers() if w.tasks == [task.id]],
            timeout=10,
            what="the worker listed holding its task",
        )
        assert OWNER_RE.match(w.id) and w.id == app.get(task.id).lease_owner
        assert (w.host, w.pid) == (socket.gethostname(), os.getpid())
        assert w.id.startswith(f"{w.host}:{w.pid}:")
        assert w.version == "v7" and w.concurrency == 3
        assert w.queues == ["default", "other"] and w.kinds == ["a", "b"]
        assert before <= w.started_at <= w.last_seen_at <= db_now(app)
        assert isinstance(jobtrail.Worker, type) and isinstance(w, jobtrail.Worker)
        out = w.to_dict()
        assert out["tasks"] == [task.id] and out["started_at"].endswith("Z")
        assert set(out) == {
            "id",
            "host",
            "pid",
            "version",
            "queues",
            "kinds",
            "concurrency",
            "started_at",
            "last_seen_at",
            "tasks",
        }
    finally:
        release.set()
        handle.stop()
    assert app.workers() == []  # a stopped worker removes its row
    assert app.get(task.id).state == "succeeded"


def test_a_worker_that_goes_silent_is_forgotten_after_its_stale_after(store: Any) -> None:
    app = store.app()
    quiet = live_worker(app, "gone:1:aa", stale_after=1.0)
    (first,) = app.workers()
    assert first.id == "gone:1:aa" and first.tasks == []
    # Not listed once its last beat is older than its stale_after, by the database clock.
    gone = wait_for(lambda: app.workers() == [], timeout=10, what="the silent worker forgotten")
    assert gone and (db_now(app) - first.last_seen_at).total_seconds() >= 1.0
    # The next beat of any worker deletes its row: when it comes back it is a new row (a new
    # start), not the old one revived.
    live_worker(app, "other:2:bb")
    quiet.beat(force=True)
    listed = {w.id: w for w in app.workers()}
    assert set(listed) == {"gone:1:aa", "other:2:bb"}
    assert listed["gone:1:aa"].started_at > first.started_at


def test_bad_worker_options_are_refused_before_it_starts(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    with pytest.raises(ValueError, match="stale_after .* at least twice beat_interval"):
        WorkerOptions(queues=["default"], beat_interval=5, stale_after=6)
    with pytest.raises(ValueError, match="beat_interval"):
        WorkerOptions(queues=["default"], beat_interval=0)
    with pytest.raises(TypeError, match="tenant"):
        app.workers(tenant=3)  # type: ignore[arg-type]
    assert app.workers() == []


def test_api_workers_shows_a_tenant_token_only_its_own_tasks(store: Any) -> None:
    app = store.app()
    release = blocking(app, "a")
    mine = app.enqueue("a", tenant="tenantA")
    theirs = app.enqueue("a", tenant="tenantB")
    handle = app.start_worker(concurrency=2)
    try:
        (w,) = wait_for(
            lambda: [w for w in app.workers() if len(w.tasks) == 2],
            timeout=10,
            what="the worker holding both tasks",
        )
        web = client(app)
        everyone = web.get("/api/workers", headers=auth("rd"))
        assert everyone.status_code == 200, everyone.text
        (seen,) = everyone.json()["workers"]
        assert seen == {**w.to_dict(), "last_seen_at": seen["last_seen_at"]}
        assert sorted(seen["tasks"], key=int) == sorted([mine.id, theirs.id], key=int)
        for token in ("ta", "tar"):  # tenantA's admin and read tokens
            (only,) = web.get("/api/workers", headers=auth(token)).json()["workers"]
            assert only["id"] == w.id and only["tasks"] == [mine.id]
        assert [x.tasks for x in app.workers(tenant="tenantB")] == [[theirs.id]]
        assert web.get("/api/workers").status_code == 401
    finally:
        release.set()
        handle.stop()


def test_explain_says_no_live_worker_serves_the_queue_or_registers_the_kind(
    store: Any,
) -> None:
    producer = store.app()
    for kind, queue in (("a", "default"), ("orphan", "default"), ("mail", "mail")):
        producer.task(kind, queue=queue)(lambda ctx, p: None)
    orphan, mail = producer.enqueue("orphan"), producer.enqueue("mail")
    later = producer.enqueue("orphan", delay=600)
    # No worker at all.
    assert "not running: no live worker serves queue default (live workers: none)" in (
        producer.explain(orphan.id)
    )
    assert "没有存活的工作器服务队列 default（存活的工作器：无）" in producer.explain(
        orphan.id, lang="zh"
    )
    # A worker whose App registers only "a" (an older deploy, another service).
    worker_app = store.app()
    release = blocking(worker_app, "a")
    handle = worker_app.start_worker()
    try:
        (w,) = wait_for(worker_app.workers, timeout=10, what="the worker listed")
        text = producer.explain(orphan.id)
        assert (
            "not running: no live worker registers kind orphan (live workers serving queue "
            f"default: {w.id} [a])"
        ) in text
        assert "due now" in text
        assert (
            f"没有存活的工作器注册类型 orphan（服务队列 default 的存活工作器：{w.id} [a]）"
            in producer.explain(orphan.id, lang="zh")
        )
        assert f"no live worker serves queue mail (live workers: {w.id} [default])" in (
            producer.explain(mail.id)
        )
        # Not due yet: the time is the reason, not the workers.
        assert "no live worker" not in producer.explain(later.id)
        # A due task a live worker takes has no excuse (it is about to run).
        live_worker(producer, "other:9:ff", queues=["default"], kinds=["orphan"])
        assert "not running" not in producer.explain(orphan.id)
    finally:
        release.set()
        handle.stop()


def test_the_dashboard_workers_page_lists_them_in_both_languages(store: Any) -> None:
    app = store.app(version="v2")
    release = blocking(app, "a")
    mine = app.enqueue("a", tenant="tenantA")
    theirs = app.enqueue("a", tenant="tenantB")
    web = client(app)
    empty = web.get("/workers?lang=en", headers=auth("rd"))
    assert empty.status_code == 200 and 'id="no-workers"' in empty.text
    assert "No live workers: due tasks wait until one starts." in empty.text
    assert '<a href="/workers" class="on">Workers</a>' in empty.text
    handle = app.start_worker(concurrency=2)
    try:
        (w,) = wait_for(
            lambda: [w for w in app.workers() if len(w.tasks) == 2],
            timeout=10,
            what="the worker holding both tasks",
        )
        page = web.get("/workers?lang=en", headers=auth("rd")).text
        row = page.split(f'<tr class="worker" data-id="{w.id}"')[1].split("</tr>")[0]
        for text in (w.host, str(w.pid), "v2", "default", ">a<", ">2<"):
            assert text in row, (text, row)
        assert f'<a href="/tasks/{mine.id}">' in row and f'<a href="/tasks/{theirs.id}">' in row
        zh = web.get("/workers?lang=zh", headers=auth("rd")).text
        assert "存活的工作器" in zh and "最近心跳" in zh and w.id in zh
        # a tenant's token sees the worker, and only its own tenant's task
        bound = web.get("/workers", headers=auth("tar")).text
        assert w.id in bound and f"/tasks/{mine.id}" in bound
        assert f"/tasks/{theirs.id}" not in bound
    finally:
        release.set()
        handle.stop()


def test_a_stopping_worker_stays_listed_while_its_handlers_finish(store: Any) -> None:
    """A grace period longer than ``stale_after``: the worker beats while it drains."""
    app = store.app()
    started, release = threading.Event(), threading.Event()

    @app.task("slow")
    def slow(ctx: Any, payload: Any) -> None:
        started.set()
        release.wait(30)

    task = app.enqueue("slow")
    options = WorkerOptions(
        queues=["default"],
        grace=30,
        sweep_interval=0.05,
        beat_interval=0.1,
        stale_after=1.0,
        install_signals=False,
    )
    worker = Worker(app, options)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert started.wait(10), "the handler did not start"
        worker.stop()  # claims nothing more; the handler gets the grace period
        deadline = time.monotonic() + 2.0  # twice its stale_after
        while time.monotonic() < deadline:
            assert [w.tasks for w in app.workers()] == [[task.id]]
            time.sleep(0.05)
    finally:
        release.set()
        thread.join(10)
    assert not thread.is_alive() and app.workers() == []
