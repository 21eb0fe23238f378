"""Database outages: a worker keeps running, backs off, reconnects and
loses no task; an enqueue that could not be stored raises StoreUnavailable and leaves nothing
behind. Through the fault proxy, and (issue 40) under load with a real crash: a private
PostgreSQL cluster stopped with ``-m immediate``, or a transaction-mode PgBouncer SIGKILLed —
an outage costs seconds, not a lease, and each process says so in one line. PostgreSQL only."""

from __future__ import annotations

import secrets
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import bouncer
import httpx
import psycopg
import pytest
from conftest import Store, unavailable

import jobtrail

from ._chaos_support import (
    PrivateCluster,
    WorkerDir,
    _pg_version,
    private_cluster_missing,
    upstream,
    via,
    wait_until,
)
from .faultproxy import FaultProxy
from .outage_load import Measured, measure


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


# -- an outage under load (issue 40) ---------------------------------------------------------
@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    """A private PostgreSQL cluster of this module's own, which its tests crash."""
    missing = private_cluster_missing()
    version = _pg_version()
    if missing is not None or version is None:
        unavailable(missing or "no PostgreSQL installation")
    server = PrivateCluster(version)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def crash_schema(cluster: PrivateCluster) -> Iterator[str]:
    schema = "o_" + secrets.token_hex(6)
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        cluster.ensure_running()
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _assert_one_outage(got: Measured, where: str) -> None:
    print(got.row(where))
    for n, lines in enumerate(got.worker_lines):
        print(f"worker {n}:", *lines, sep="\n  ")
    print("producer:", *got.producer_lines, sep="\n  ")
    assert got.enqueued > 300 + 100
    assert (got.lost, got.twice, got.lease_expiries, got.left_leased) == (0, 0, 0, 0)
    assert got.recovery is not None and got.recovery < 5.0
    assert not got.foreign, f"the producer saw a driver's own exceptions: {got.foreign}"
    for lines in [*got.worker_lines, got.producer_lines]:
        # one WARNING when the store went away (reminders only after a minute), one INFO when
        # it was back: nothing else
        warnings = [line for line in lines if "WARNING" in line or "ERROR" in line]
        back = [line for line in lines if "INFO" in line and "store back: " in line]
        assert len(warnings) == 1 and len(back) == 1 and len(lines) == 2, lines
        assert where in warnings[0] and where in back[0], lines


def test_a_crash_under_load_costs_seconds_not_a_lease(
    cluster: PrivateCluster, crash_schema: str, tmp_path: Path
) -> None:
    url = f"{cluster.url}?options={quote(f'-csearch_path={crash_schema}')}"
    got = measure(
        tmp_path,
        url,
        outage=lambda: cluster.ctl("crash"),
        back=cluster.ensure_running,
    )
    _assert_one_outage(got, f"the database at 127.0.0.1:{cluster.port}")


def test_a_pooler_killed_under_load_costs_seconds_not_a_lease(
    cluster: PrivateCluster, crash_schema: str, tmp_path: Path
) -> None:
    missing = bouncer.available()
    if missing is not None:
        unavailable(missing)
    pooler = bouncer.Bouncer(cluster.url)
    try:
        pooler.start()
        url = pooler.add(crash_schema)["transaction"]

        def back() -> None:
            pooler.start()
            wait_until(lambda: _answers(url), timeout=30, what="PgBouncer to answer")

        got = measure(tmp_path, url, pooler="transaction", outage=pooler.kill, back=back)
    finally:
        pooler.close()
    _assert_one_outage(got, f"the pooler at 127.0.0.1:{pooler.port}")


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2, prepare_threshold=None) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def test_serve_answers_503_through_an_outage_and_says_so_once(
    pg_store: Store, tmp_path: Path
) -> None:
    """``jobtrail serve`` over a store that goes away (the fault proxy refuses and cuts every
    connection) and comes back: 503 "nothing was stored" meanwhile, 201 after, and its log
    says the outage once and its end once (issue 40 (3)) — no line per request."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "acceptance"))
    from serve_process import TOKENS, Serve

    pg_store.app()  # migrated
    with FaultProxy(*upstream(pg_store.url)) as proxy:
        server = Serve(tmp_path, via(pg_store.url, proxy.port), tokens=TOKENS)
        adm = {"Authorization": "Bearer adm"}
        try:
            with httpx.Client(base_url=server.base, timeout=10) as http:

                def post(key: str) -> httpx.Response:
                    body = {"kind": "send", "payload": {"k": key}}
                    headers = {**adm, "Idempotency-Key": key}
                    return http.post("/api/tasks", json=body, headers=headers)

                assert post("before").status_code == 201
                begun = len(server.log.read_text().splitlines())
                proxy.set_mode("drop")
                proxy.cut()
                refused = [post(f"during-{n}") for n in range(20)]
                assert {r.status_code for r in refused} == {503}, [r.text for r in refused]
                assert all("nothing was stored" in r.json()["error"] for r in refused)
                proxy.set_mode("pass")
                wait_until(
                    lambda: post("after").status_code == 201,
                    timeout=10,
                    what="a 201 once the store is back",
                    interval=0.1,
                )
                wait_until(  # each request an answer: back once answered for a second
                    lambda: (
                        post("after").status_code == 200
                        and "store back: " in server.log.read_text()
                    ),
                    timeout=10,
                    what="serve to say the store is back",
                    interval=0.1,
                )
        finally:
            server.stop()
    lines = server.log.read_text().splitlines()[begun:]
    said = [line for line in lines if " WARNING " in line or " ERROR " in line]
    where = f"the database at 127.0.0.1:{proxy.port}"
    assert len(said) == 1 and "store unreachable: " in said[0] and where in said[0], lines
    back = [line for line in lines if "store back: " in line]
    assert len(back) == 1 and where in back[0], lines
    assert not [line for line in lines if "psycopg" in line], lines
    stored = {t.idempotency_key for t in pg_store.apps[0].list(kind="send")}
    assert stored == {"before", "after"}  # nothing of the refused requests
