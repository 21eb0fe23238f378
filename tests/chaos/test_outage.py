"""Database outages through the fault proxy (SPEC §14): a worker keeps running, backs off,
reconnects and loses no task; an enqueue that could not be stored raises StoreUnavailable and
leaves nothing behind. PostgreSQL only (the proxy sits on TCP)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from conftest import Store

import jobtrail

from ._chaos_support import WorkerDir, upstream, via, wait_until
from .faultproxy import FaultProxy


def _app(url: str, **options: object) -> jobtrail.App:
    app = jobtrail.App(url, **options)  # type: ignore[arg-type]

    @app.task("tick", lease_seconds=2)
    def tick(ctx: jobtrail.Context, payload: object) -> None:
        return None

    return app


def _succeeded(app: jobtrail.App) -> int:
    return len(app.list(state="succeeded", kind="tick", limit=10_000))


def test_fault_proxy_modes(pg_store: Store) -> None:
    """The proxy itself: pass forwards, drop refuses, stall never answers, cut kills."""
    with FaultProxy(*upstream(pg_store.url)) as proxy:
        url = via(pg_store.url, proxy.port)
        import psycopg

        with psycopg.connect(url, connect_timeout=3) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            proxy.cut()
            with pytest.raises(psycopg.OperationalError):
                conn.execute("SELECT 1")
        proxy.set_mode("drop")
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=3)
        proxy.set_mode("stall")
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=1)
        assert time.monotonic() - started >= 0.9
        proxy.set_mode("pass", delay=0.05)
        with psycopg.connect(url, connect_timeout=3) as conn:
            started = time.monotonic()
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert time.monotonic() - started >= 0.09  # one delayed chunk each way


def test_worker_survives_outage_and_enqueue_refuses(pg_store: Store, tmp_path: Path) -> None:
    direct = pg_store.app()
    _app(pg_store.url).close()
    with FaultProxy(*upstream(pg_store.url)) as proxy:
        url = via(pg_store.url, proxy.port)
        workers = WorkerDir(tmp_path / "w", url)
        try:
            worker = workers.start("--concurrency", "2")
            producer = _app(pg_store.url)
            for i in range(20):
                producer.enqueue("tick", {"i": i})
            wait_until(lambda: _succeeded(direct) >= 5, timeout=60, what="first tasks done")

            # outage: every connection cut, new ones refused
            proxy.set_mode("drop")
            proxy.cut()
            for i in range(20, 40):
                producer.enqueue("tick", {"i": i})  # stored directly: the worker will find them
            proxied = _app(url, connect_timeout=2)
            try:
                with pytest.raises(jobtrail.StoreUnavailable):
                    proxied.enqueue("tick", {"lost": 1}, idempotency_key="during-outage")
                proxy.set_mode("stall")  # a black hole for new connections
                with pytest.raises(jobtrail.StoreUnavailable):
                    proxied.enqueue("tick", {"lost": 2}, idempotency_key="during-stall")
            finally:
                proxy.set_mode("drop")
                proxy.cut()
                proxied.close()
            time.sleep(3)  # the worker is cut off for a while: it must back off, not die
            assert worker.poll() is None, workers.output(worker)

            proxy.set_mode("pass", delay=0.002)  # back, a little slow
            wait_until(lambda: _succeeded(direct) == 40, timeout=90, what="all 40 tasks done")
            assert worker.poll() is None, workers.output(worker)
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=60) == 0, workers.output(worker)
        finally:
            workers.cleanup()
            producer.close()
    assert not [t for t in direct.list(kind="tick", limit=1000) if "lost" in (t.payload or {})]
    assert len(direct.list(kind="tick", limit=1000)) == 40
    log = workers.output(worker)
    assert "Traceback" not in log, log
