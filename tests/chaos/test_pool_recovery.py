"""The PostgreSQL connection pool after network faults, through the fault proxy (the
worker keeps running, backs off, reconnects and loses no task).

Found by the 5,000-task chaos soak (seed 3): after fault-proxy cuts, workers whose pool held
several idle connections never got a working one again (``PoolTimeout`` every 5 s) while new
connections through the proxy worked. psycopg_pool's check loop sleeps 1 s, 2 s, 4 s after each
idle connection that fails its check, so a 5 s checkout tested three of the ten dead ones, and
the next cut killed the fresh replacements queued behind them. These tests cut at that cadence
and require every checkout to find a working connection at once.

And a connection stalled mid-query (``FaultProxy.freeze``: the stream is black-holed, the
database is fine) fails after ``read_timeout`` instead of holding its thread forever.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
from conftest import Store

import jobtrail
from jobtrail.core import transition
from jobtrail.model.machine import State
from jobtrail.store.base import Claim
from jobtrail.store.postgres import PostgresDriver
from jobtrail.worker import Worker, WorkerOptions

from ._chaos_support import upstream, via, wait_until
from .faultproxy import FaultProxy


def _driver(app: jobtrail.App) -> PostgresDriver:
    driver = app._driver
    assert isinstance(driver, PostgresDriver)
    return driver


def _fill_pool(app: jobtrail.App, n: int) -> None:
    """Grow the App's pool to ``n`` connections (n transactions at once), all idle after."""
    driver = _driver(app)
    barrier = threading.Barrier(n)

    def hold() -> None:
        with driver.transaction(write=False) as tx:
            barrier.wait(timeout=20)
            tx.conn.execute("SELECT pg_sleep(0.2)")

    threads = [threading.Thread(target=hold) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    wait_until(
        lambda: driver.pool.get_stats()["pool_available"] >= n,
        timeout=10,
        what=f"{n} idle connections in the pool",
    )


def _background_worker(app: jobtrail.App) -> tuple[Worker, threading.Thread]:
    """A running-mode worker with short intervals, on a thread the test starts and stops."""
    worker = Worker(
        app,
        WorkerOptions(
            queues=["default"],
            concurrency=4,
            poll_interval=0.1,
            sweep_interval=0.25,
            grace=2.0,
            install_signals=False,
        ),
    )
    return worker, threading.Thread(target=worker.run, name="test-worker", daemon=True)


def test_checkout_after_each_cut_finds_a_working_connection(pg_store: Store) -> None:
    pg_store.app()  # migrated
    with FaultProxy(*upstream(pg_store.url)) as proxy:
        app = jobtrail.App(via(pg_store.url, proxy.port), pool_size=10)
        try:
            _fill_pool(app, 10)
            for round_ in range(5):
                time.sleep(1.2)  # every idle connection is past CHECK_AFTER_IDLE
                proxy.cut()  # ... and dead
                started = time.monotonic()
                try:
                    app.list(limit=1)
                except jobtrail.StoreUnavailable as exc:
                    pytest.fail(
                        f"round {round_}: no working connection after a cut, "
                        f"{time.monotonic() - started:.1f}s: {exc}"
                    )
                took = time.monotonic() - started
                assert took < 2.0, f"round {round_}: a checkout took {took:.1f}s after a cut"
        finally:
            app.close()


def test_enqueue_after_a_cut_reconnects_its_express_connection(pg_store: Store) -> None:
    """A single enqueue runs on the driver's express connection (kept outside the pool); one
    idle past CHECK_AFTER_IDLE is checked first, as the pool's are, so an enqueue after a cut
    succeeds on a new connection instead of failing on the dead one."""
    pg_store.app()  # migrated
    with FaultProxy(*upstream(pg_store.url)) as proxy:
        app = jobtrail.App(via(pg_store.url, proxy.port))
        app.task("k")(lambda ctx, payload: None)
        driver = _driver(app)
        try:
            first = app.enqueue("k", {"n": 0})
            express = driver._express.conn
            assert express is not None and not express.closed
            for round_ in range(3):
                time.sleep(1.2)  # the express connection is past CHECK_AFTER_IDLE
                proxy.cut()
                try:
                    app.enqueue("k", {"n": round_ + 1})
                except jobtrail.StoreUnavailable as exc:
                    pytest.fail(f"round {round_}: enqueue failed after a cut: {exc}")
                assert driver._express.conn is not express, "the dead connection was reused"
                express = driver._express.conn
            # while a thread holds the express connection, the others use the pool
            with driver._express_lock:
                other = app.enqueue("k", {"n": "pool"})
            ids = {t.id for t in app.list(kind="k", limit=10)}
            assert len(ids) == 5 and {first.id, other.id} <= ids
        finally:
            app.close()
        assert express is not None and express.closed  # close() closes it too


def test_idle_worker_keeps_working_through_repeated_cuts(pg_store: Store) -> None:
    """The soak's stall, small: a worker whose pool grew, idle, cut every 1.5 s; work arrives
    in the middle of it and must be done before the cuts end."""
    direct = pg_store.app()
    direct.task("tick", lease_seconds=2)(lambda ctx, payload: None)
    with FaultProxy(*upstream(pg_store.url)) as proxy:
        app = jobtrail.App(via(pg_store.url, proxy.port), pool_size=10)
        ran: list[str] = []
        app.task("tick", lease_seconds=2)(lambda ctx, payload: ran.append(ctx.task_id))
        worker, thread = _background_worker(app)
        try:
            _fill_pool(app, 10)  # as after a busy spell: ten idle connections
            thread.start()
            for round_ in range(7):
                time.sleep(1.5)
                proxy.cut()
                if round_ == 1:
                    for i in range(10):
                        direct.enqueue("tick", {"i": i})
            done = len(direct.list(state="succeeded", kind="tick"))
            assert done == 10, f"{done}/10 tasks done in 8 s of cuts every 1.5 s"
            assert thread.is_alive()
        finally:
            worker.stop()
            thread.join(timeout=15)
            app.close()
    assert not thread.is_alive()


def test_a_stalled_connection_fails_after_the_read_timeout(pg_store: Store) -> None:
    pg_store.app()
    with FaultProxy(*upstream(pg_store.url)) as proxy:
        app = jobtrail.App(via(pg_store.url, proxy.port), read_timeout=1.0)
        outcome: list[BaseException | None] = []
        try:
            app.list(limit=1)  # a pooled connection, used just now: handed out unchecked
            proxy.freeze()  # its stream goes silent for good; new connections still pass

            def read() -> None:
                try:
                    app.list(limit=1)
                    outcome.append(None)
                except BaseException as exc:
                    outcome.append(exc)

            started = time.monotonic()
            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            reader.join(timeout=10)
            took = time.monotonic() - started
            assert outcome, "a read on a stalled connection still hangs after 10 s"
            assert isinstance(outcome[0], jobtrail.StoreUnavailable), outcome
            assert 0.9 <= took < 3.0, took
            # the stalled connection is gone; the next read gets a working one
            assert app.list(limit=1) == []
            assert _driver(app)._watchdog is not None and _driver(app)._watchdog.fired >= 1
        finally:
            proxy.cut()  # frees a reader still stuck (before the fix) so close() returns
            app.close()


def test_worker_gets_past_stalled_connections(pg_store: Store) -> None:
    """Every connection a running worker holds goes silent mid-stream; new ones work. The
    worker's claims, sweeps and completions time out, reconnect and carry on."""
    direct = pg_store.app()
    direct.task("tick", lease_seconds=2)(lambda ctx, payload: None)
    with FaultProxy(*upstream(pg_store.url)) as proxy:
        app = jobtrail.App(via(pg_store.url, proxy.port), read_timeout=1.0)
        app.task("tick", lease_seconds=2)(lambda ctx, payload: None)
        worker, thread = _background_worker(app)
        try:
            thread.start()
            for i in range(5):
                direct.enqueue("tick", {"i": i})
            wait_until(
                lambda: len(direct.list(state="succeeded", kind="tick")) == 5,
                timeout=10,
                what="the first tasks",
            )
            proxy.freeze()
            for i in range(5, 15):
                direct.enqueue("tick", {"i": i})
            wait_until(
                lambda: len(direct.list(state="succeeded", kind="tick")) == 15,
                timeout=10,
                what="the tasks enqueued after the freeze",
            )
            assert thread.is_alive()
        finally:
            proxy.cut()  # frees a thread still stuck (before the fix) so the worker can stop
            worker.stop()
            thread.join(timeout=15)
            app.close()
    assert not thread.is_alive()


def test_a_statement_the_session_lost_is_sent_again_without_prepared_statements(
    pg_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """What a transaction pooler does to a session-bound prepared statement (issue 40 (5):
    ``app.enqueue`` raised psycopg's own ``InvalidSqlStatementName``), made on a direct
    connection: the express connection's prepared insert is deallocated under it. The error
    comes before the statement runs, so the App switches to the pooler-safe behaviour (no
    prepared statements), says so once, and sends the enqueue again: it is stored once, and
    the caller never sees psycopg's exception."""
    caplog.set_level(logging.WARNING, logger="jobtrail.store")
    app = pg_store.app()
    app.task("k")(lambda ctx, payload: None)
    driver = _driver(app)
    for n in range(2):  # prepares both inserts (the hand-off's and the plain one)
        app.enqueue("k", {"n": n})
    express = driver._express.conn
    assert express is not None and driver._express.prepared
    express.execute("DEALLOCATE ALL")  # as another server session behind a pooler would be
    task = app.enqueue("k", {"n": 1}, idempotency_key="lost")
    assert task.created
    assert [t.idempotency_key for t in app.list(kind="k")].count("lost") == 1
    warned = [r.getMessage() for r in caplog.records if "is reached through a" in r.getMessage()]
    assert len(warned) == 1 and 'pooler="transaction"' in warned[0], warned
    again = app.enqueue("k", {"n": 1}, idempotency_key="lost")
    assert not again.created and again.id == task.id


def test_a_claim_whose_answer_was_lost_starts_once_the_store_answers(pg_store: Store) -> None:
    """Issue 40 (1): a worker's claim can commit while its answer is lost with the connection;
    its tasks must reach a handler when the store is back, not wait out their 30 s lease. The
    lost answer is made exactly: while the worker is cut off (its claims failing), the test
    commits a claim of a task for the worker's owner id, as the worker's own statement would
    have."""
    direct = pg_store.app()
    direct.task("tick")(lambda ctx, payload: None)
    with FaultProxy(*upstream(pg_store.url)) as proxy:
        app = jobtrail.App(via(pg_store.url, proxy.port), connect_timeout=1.0)
        ran: list[str] = []
        app.task("tick")(lambda ctx, payload: ran.append(ctx.task_id))  # the default 30 s lease
        worker, thread = _background_worker(app)
        try:
            thread.start()
            wait_until(lambda: worker.round_trips > 0, timeout=10, what="the worker's claims")
            proxy.set_mode("drop")
            proxy.cut()
            tried = worker.round_trips
            # every round trip fails while new connections are refused
            wait_until(lambda: worker.round_trips >= tried + 2, timeout=10, what="failed claims")
            task = direct.enqueue("tick", {"lost": 1})
            request = Claim(
                owner=worker.owner, queues=["default"], kinds=["tick"], limit=1, version=None
            )
            with direct._driver.transaction() as tx:
                assert [str(r["id"]) for r in transition.claim(direct._driver, tx, request)] == [
                    task.id
                ]
            proxy.set_mode("pass")
            wait_until(
                lambda: direct.get(task.id).state is State.SUCCEEDED,  # type: ignore[union-attr]
                timeout=10,
                what="the task claimed unseen to run (not wait out its 30 s lease)",
                interval=0.05,
            )
            assert ran == [task.id]
        finally:
            proxy.set_mode("pass")
            worker.stop()
            thread.join(timeout=15)
            app.close()
