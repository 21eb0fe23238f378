"""PostgreSQL restarts and outages under a running worker (the worker keeps running,
backs off, reconnects and loses no task; an enqueue that cannot be made durable raises).

These tests stop and restart a PostgreSQL server, so they are PostgreSQL only and marked
``pg_restart`` (deselect with ``-m "not pg_restart"``).

Which server: by default a private, throwaway cluster (``initdb`` in a temporary directory, a
free port on 127.0.0.1, run as the ``postgres`` user), because the shared server on :5432 is
used concurrently by other test runs and by CI: restarting it breaks their runs, and a CI
script that starts a server it finds down makes an "outage" end before the test is done with
it. ``JOBTRAIL_TEST_PG_RESTART=shared`` restarts the shared cluster instead, with
``pg_ctlcluster --skip-systemctl-redirect <version> main restart`` (needs root).

Either way, after every test the server is running again and accepts connections, even when
the test failed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from _integration_helpers import WorkerDir, wait_until
from _pg_cluster import (
    PgServer,
    PrivateCluster,
    SharedCluster,
    _pg_version,
    private_cluster_missing,
)
from conftest import unavailable

import jobtrail
from jobtrail.model.machine import State

pytestmark = pytest.mark.pg_restart


@pytest.fixture(scope="module")
def server() -> Iterator[PgServer]:
    version = _pg_version()
    if version is None or os.geteuid() != 0:
        unavailable("needs a local PostgreSQL installation and root to stop and start it")
    if os.environ.get("JOBTRAIL_TEST_PG_RESTART") == "shared":
        if shutil.which("pg_ctlcluster") is None:
            unavailable("JOBTRAIL_TEST_PG_RESTART=shared needs pg_ctlcluster")
        srv: PgServer = SharedCluster(version)
        srv.ensure_running()
    else:
        missing = private_cluster_missing()
        if missing is not None:
            unavailable(missing)
        srv = PrivateCluster(version)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def pg(server: PgServer) -> Iterator[str]:
    """A fresh schema on ``server``; its URL. Afterwards the server is running again."""
    schema = "r_" + secrets.token_hex(6)
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in server.url else "?"
    try:
        yield f"{server.url}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        server.ensure_running()
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def open_app(pg: str) -> Iterator[list[jobtrail.App]]:
    apps: list[jobtrail.App] = []
    try:
        yield apps
    finally:
        for app in apps:
            app.close()


def _new_app(pg: str, apps: list[jobtrail.App], **options: object) -> jobtrail.App:
    app = jobtrail.App(pg, **options)  # type: ignore[arg-type]
    apps.append(app)
    app.migrate()
    return app


def _register(app: jobtrail.App) -> None:
    def not_here(ctx: jobtrail.Context, payload: Any) -> None:
        raise AssertionError("handlers run in the worker subprocess, not in the test")

    app.task("tick", lease_seconds=2)(not_here)


def _count_succeeded(app: jobtrail.App, kind: str = "tick") -> int | None:
    """How many ``kind`` tasks succeeded, or ``None`` while the store is unreachable."""
    try:
        return len(app.list(state="succeeded", kind=kind, limit=10_000))
    except (jobtrail.StoreUnavailable, psycopg.Error):
        return None


def test_worker_keeps_going_across_a_server_restart(
    server: PgServer, pg: str, open_app: list[jobtrail.App], tmp_path: Path
) -> None:
    n_tasks = 300
    app = _new_app(pg, open_app)
    _register(app)
    tasks = app.enqueue_many([{"kind": "tick", "payload": {"i": i}} for i in range(n_tasks)])
    ids = {t.id for t in tasks}

    workers = WorkerDir(tmp_path / "workerdir", pg)
    try:
        proc = workers.start("--concurrency", "4")
        wait_until(
            lambda: (_count_succeeded(app) or 0) >= 30 or proc.poll() is not None,
            timeout=30,
            what="the worker to get going",
        )
        assert proc.poll() is None, workers.output(proc)
        before = _count_succeeded(app)
        assert before is not None and before < n_tasks, "the stream finished before the restart"

        started_at = server.started_at()
        server.ctl("restart")
        server.ensure_running()
        assert server.started_at() > started_at  # it really was restarted
        assert proc.poll() is None, "the worker died with the server:\n" + workers.output(proc)

        # A longer outage, past the 2 s lease of the tasks in flight: their renewals and
        # completions fail, the sweeper requeues them after the server is back, and they run
        # again. (The sleep is the length of the outage; nothing races with it.)
        wait_until(
            lambda: (_count_succeeded(app) or 0) >= before + 100 or proc.poll() is not None,
            timeout=30,
            what="the worker to make progress after the restart",
        )
        assert proc.poll() is None, workers.output(proc)
        middle = _count_succeeded(app)
        assert middle is not None and middle < n_tasks, "the stream finished before the outage"
        server.ctl("stop")
        try:
            time.sleep(3.0)
        finally:
            server.ensure_running()
        assert proc.poll() is None, "the worker died in the outage:\n" + workers.output(proc)

        wait_until(
            lambda: _count_succeeded(app) == n_tasks or proc.poll() is not None,
            timeout=60,
            what=f"all {n_tasks} tasks to succeed after the restart",
            interval=0.2,
        )
        assert proc.poll() is None, workers.output(proc)

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, workers.output(proc)
    finally:
        workers.cleanup()

    runs = Counter(line.split()[0] for line in workers.mark("runs").read_text().splitlines())
    assert set(runs) == ids, f"never ran: {sorted(ids - set(runs))[:10]}"
    twice = {}
    for task in app.list(kind="tick", limit=10_000):
        assert task.state is State.SUCCEEDED, (task.id, task.state)
        log = app.transitions(task.id)
        claims = sum(1 for t in log if t.reason == "claimed")
        completions = [t for t in log if t.reason == "completed"]
        assert len(completions) == 1, [t.reason for t in log]
        assert log[-1].reason == "completed" and log[-1].attempt == task.attempts
        # A handler can only have run for a claim the worker saw; a claim whose answer was lost
        # with the connection shows in the log without a run (its lease expires, it is swept).
        assert 1 <= runs[task.id] <= claims, (task.id, runs[task.id], [t.reason for t in log])
        if claims > 1:
            twice[task.id] = [t.reason for t in log]
    print(
        f"done at the restart: {before}, at the outage: {middle}; re-claimed: {len(twice)}:",
        dict(list(twice.items())[:5]),
    )
    assert app.check() == []


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_every_run_has_a_claim_in_the_log_after_the_server_crashes(
    server: PgServer, pg: str, open_app: list[jobtrail.App], tmp_path: Path
) -> None:
    """A crash of the server (every backend killed, no shutdown checkpoint: what a power cut or
    an OOM kill does) right after an idle worker's handler started. Whatever the crash loses,
    the log must still show every run: the claim the handler ran for was durable before the
    handler started (it waited for its WAL flush), so after the crash the task is leased, its
    lease expires, and the sweep requeues it for a second, logged claim. A claim committed
    without waiting for its flush could be lost with the crash: the task would be queued again
    with no trace of the run that had started."""
    app = _new_app(pg, open_app)
    app.task("half_second", lease_seconds=1)(lambda ctx, payload: None)  # runs in the worker
    workers = WorkerDir(tmp_path / "workerdir", pg)
    runs_file = workers.mark("runs")
    crashes = 3
    ids: list[str] = []
    try:
        proc = workers.start("--concurrency", "2")
        assert app.list(limit=1) == []
        for i in range(crashes):
            seen = _lines(runs_file)
            task = app.enqueue("half_second", {"i": i})
            ids.append(task.id)
            wait_until(
                lambda seen=seen: _lines(runs_file) > seen,
                timeout=30,
                what=f"task {task.id} to start on the idle worker",
                interval=0.001,
            )
            server.ctl("crash")  # at once: the claim's flush had to come before the run
            server.ensure_running()
            wait_until(
                lambda done=i + 1: (
                    _count_succeeded(app, "half_second") == done or proc.poll() is not None
                ),
                timeout=60,
                what=f"task {task.id} to succeed after the crash",
                interval=0.1,
            )
            assert proc.poll() is None, "the worker died with the server:\n" + workers.output(proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, workers.output(proc)
    finally:
        workers.cleanup()

    runs = Counter(line.split()[0] for line in runs_file.read_text().splitlines())
    for task_id in ids:
        log = app.transitions(task_id)
        claims = sum(1 for t in log if t.reason == "claimed")
        found = app.get(task_id)
        assert found is not None and found.state is State.SUCCEEDED, [t.reason for t in log]
        assert 1 <= runs[task_id] <= claims, (task_id, runs[task_id], [t.reason for t in log])
    assert app.check() == []


def test_enqueue_while_the_server_is_down_raises(
    server: PgServer, pg: str, open_app: list[jobtrail.App]
) -> None:
    app = _new_app(pg, open_app, connect_timeout=2.0)
    _register(app)
    ok = app.enqueue("tick", {"n": 1}, idempotency_key="before")
    assert ok.created

    server.ctl("stop")
    try:
        assert not server.accepts_connections()
        with pytest.raises(jobtrail.StoreUnavailable):
            app.enqueue("tick", {"n": 2}, idempotency_key="during")
        with pytest.raises(jobtrail.StoreUnavailable):
            app.enqueue_many([{"kind": "tick", "payload": {"n": 3}}])
    finally:
        server.ensure_running()

    # The same App works again once the server is back, and the refused enqueue stored nothing:
    # its key is new.
    again = wait_until(
        lambda: _enqueue_or_none(app, "during"),
        timeout=30,
        what="an enqueue to succeed after the restart",
        interval=0.2,
    )
    assert again.created and again.state is State.QUEUED
    assert {t.idempotency_key for t in app.list(kind="tick")} == {"before", "during"}
    assert app.check() == []


def _enqueue_or_none(app: jobtrail.App, key: str) -> jobtrail.Task | None:
    try:
        return app.enqueue("tick", {"n": 2}, idempotency_key=key)
    except jobtrail.StoreUnavailable:
        return None
