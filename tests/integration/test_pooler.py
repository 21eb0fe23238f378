"""PostgreSQL behind a real PgBouncer (``tests/bouncer.py``, docs/postgres.md): ``pooler=`` and
``listen_url``, the worker's start-up NOTIFY check, transaction mode's polling, session mode,
a PgBouncer killed and restarted under a running worker, and the soak through it.

The conformance, driver and checker suites and the crash tests also run through PgBouncer in
transaction mode (backend ``pgbouncer-tx``, ``conftest.POOLED_SCOPE``); what they cannot cover
there (``conftest.NOT_POOLED``, session features) is tested here."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _integration_helpers import wait_until
from conftest import PG_URL, Store, bouncer, make_store

import jobtrail
from jobtrail.worker import Worker, WorkerOptions


@pytest.fixture
def pooled(tmp_path: Path) -> Iterator[Store]:
    """A fresh store reached through PgBouncer in transaction mode (``pooler="transaction"``);
    ``direct_url`` reaches the same schema without it."""
    s = make_store("pgbouncer-tx", tmp_path)
    try:
        yield s
        if s.apps:
            assert s.apps[0].check() == []
    finally:
        s.close()


def _session_url(store: Store) -> str:
    return store.url.replace("/tx_", "/se_")


def _app(store: Store, **options: Any) -> jobtrail.App:
    app = store.app(**options)

    @app.task("k")
    def k(ctx: jobtrail.Context, payload: Any) -> int:
        return int(payload["n"])

    return app


def _worker(app: jobtrail.App, **options: Any) -> tuple[Worker, threading.Thread]:
    options.setdefault("queues", ["default"])
    options.setdefault("sweep_interval", 0.1)
    worker = Worker(app.worker_collaborators(), WorkerOptions(install_signals=False, **options))
    thread = threading.Thread(target=worker.run, name="pooled-worker", daemon=True)
    thread.start()
    return worker, thread


def _succeeded(app: jobtrail.App, ids: list[str]) -> bool:
    return all(app.get(i).state == "succeeded" for i in ids)


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_unknown_pooler_is_refused_on_both_backends_before_anything_opens(
    backend: str, tmp_path: Path
) -> None:
    s = make_store(backend, tmp_path)
    try:
        with pytest.raises(ValueError, match=r"pooler must be 'transaction'.*not 'txn'"):
            jobtrail.App(s.url, pooler="txn")
        if backend == "sqlite":
            assert not (tmp_path / "jobtrail.db").exists()  # nothing written
        with pytest.raises(ValueError, match=r"poll_interval must be"):
            jobtrail.App(s.url, poll_interval=0)
    finally:
        s.close()


def test_a_listen_url_that_is_not_postgresql_is_refused() -> None:
    with pytest.raises(ValueError, match=r"listen_url must be a postgresql:// URL"):
        jobtrail.App(PG_URL, pooler="transaction", listen_url="redis://localhost")
    with pytest.raises(ValueError, match=r"bad listen_url"):
        jobtrail.App(PG_URL, pooler="transaction", listen_url="postgresql://x/y?nosuch=1")


# -- the failure this fixes ------------------------------------------------------------------------
def test_a_wrong_pooler_setting_costs_speed_never_a_prepared_statement_error(
    pooled: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # pooler="session" through a transaction pooler: the driver prepares its hot statements on
    # its connections, and two clients' statements share server sessions (PgBouncer hands the
    # last idle one out again), so a second client's PREPARE of the same name collided
    # (DuplicatePreparedStatement, then InvalidSqlStatementName: issue 38). Now the statement
    # that meets another session switches its App to pooler="transaction"'s behaviour, with
    # one WARNING naming the setting, and the enqueue is sent again: every one succeeds
    _app(pooled)  # migrated
    caplog.set_level(logging.WARNING, logger="jobtrail.store")
    plain = [jobtrail.App(pooled.url, pooler="session") for _ in range(3)]
    for p in plain:
        p.task("k")(lambda ctx, payload: None)
    try:
        ids = [plain[i % 3].enqueue("k", {"n": i}).id for i in range(60)]
    finally:
        for p in plain:
            p.close()
    warned = [r.getMessage() for r in caplog.records if "is reached through a" in r.getMessage()]
    assert 1 <= len(warned) <= 3, warned  # one per App at most: those that met another session
    assert all('pooler="session"' in w and 'set pooler="transaction"' in w for w in warned)
    app = pooled.apps[0]
    assert app.run_worker(burst=True, concurrency=4, poll_interval=0.05) >= 60
    assert _succeeded(app, ids)


def test_without_pooler_the_app_finds_the_transaction_pooler_and_says_so_once(
    pooled: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # no pooler=: the first connection shows a pooler (its backend key is PgBouncer's), so the
    # App runs as with pooler="transaction" and logs one WARNING naming the two settings
    jobtrail.App(pooled.direct_url).migrate()
    caplog.set_level(logging.WARNING, logger="jobtrail.store")
    app = jobtrail.App(pooled.url)
    try:
        app.task("k")(lambda ctx, payload: payload["n"])
        ids = [app.enqueue("k", {"n": i}).id for i in range(30)]
        assert app._driver.polls_only and not app._driver.hands_off
        # an outage is now said as the pooler's ("the pooler at host:port")
        assert app._driver.outage.where.startswith("the pooler at "), app._driver.outage.where
        assert app.run_worker(burst=True, concurrency=4, poll_interval=0.05) == 30
        assert _succeeded(app, ids)
    finally:
        app.close()
    warned = [r for r in caplog.records if "is reached through a pooler" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING, caplog.text
    text = warned[0].getMessage()
    assert 'pooler="transaction"' in text and "listen_url" in text, text


def test_with_a_listen_url_and_no_pooler_the_app_listens_there(pooled: Store) -> None:
    # the pooler found at start, LISTEN at the direct listen_url given: workers are woken and
    # handed idle jobs as with pooler="transaction"
    jobtrail.App(pooled.direct_url).migrate()
    app = jobtrail.App(pooled.url, listen_url=pooled.direct_url)
    try:
        app.task("k")(lambda ctx, payload: payload["n"])
        assert not app._driver.polls_only and app._driver.check_wakeups() is True
        assert app._driver._pooled
    finally:
        app.close()


def test_a_direct_connection_is_not_taken_for_a_pooler(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="jobtrail.store")
    s = make_store("postgres", tmp_path)
    try:
        app = s.app()
        assert not app._driver.polls_only and not app._driver._pooled
        assert app._driver.check_wakeups() is True and app._driver.hands_off
    finally:
        s.close()
    assert "reached through" not in caplog.text


# -- LISTEN ----------------------------------------------------------------------------------------
def test_transaction_mode_without_listen_url_polls_and_says_so(
    pooled: Store, caplog: pytest.LogCaptureFixture
) -> None:
    app = _app(pooled, poll_interval=0.2)
    assert app._driver.polls_only and app._driver.check_wakeups() is None
    caplog.set_level(logging.INFO, logger="jobtrail.worker")
    app.enqueue("k", {"n": 1})
    assert app.run_worker(burst=True, queues=["default"]) == 1
    said = [r.getMessage() for r in caplog.records if "polling for new work" in r.getMessage()]
    assert said and "every 0.20s" in said[0], caplog.text


def test_transaction_mode_with_a_listen_url_wakes_workers_through_listen(pooled: Store) -> None:
    app = _app(pooled, listen_url=pooled.direct_url, poll_interval=30.0)
    assert not app._driver.polls_only
    assert app._driver.check_wakeups() is True  # NOTIFY through PgBouncer, heard directly
    worker, thread = _worker(app, poll_interval=30.0)
    try:
        wait_until(lambda: app._driver._listening.is_set(), timeout=10, what="the LISTEN")
        # an enqueue by another App (another process's) through the pooler: with a 30 s poll,
        # only the NOTIFY can bring it to the worker within the deadline
        other = _app(pooled)
        ids = [other.enqueue("k", {"n": i}).id for i in range(3)]
        wait_until(lambda: _succeeded(app, ids), timeout=10, what="the woken worker")
    finally:
        worker.stop()
        thread.join(15)
    assert not thread.is_alive()


def test_transaction_mode_with_a_listen_url_hands_idle_jobs_over(pooled: Store) -> None:
    """The hand-off through PgBouncer in transaction mode: the enqueue (an unnamed statement
    through the pooler) finds the worker registered, its advisory lock held on the direct
    LISTEN connection, and leases the task to it in its own commit."""
    app = _app(pooled, listen_url=pooled.direct_url, poll_interval=30.0)
    assert app._driver.hands_off
    worker, thread = _worker(app, poll_interval=30.0, concurrency=2)
    other = _app(pooled)  # another process's App: no listen_url, enqueues only
    try:

        def registered() -> bool:
            with app._driver.transaction(write=False) as tx:
                row = tx.conn.execute(
                    "SELECT count(*) FROM jobtrail_idle_workers WHERE handed IS NULL"
                ).fetchone()
            return bool(row and row[0])

        for n in range(3):
            wait_until(registered, timeout=10, what=f"the worker to register as idle ({n})")
            task_id = other.enqueue("k", {"n": n}).id
            wait_until(lambda: _succeeded(app, [task_id]), timeout=10, what="the handed task")  # noqa: B023
            claimed = app.transitions(task_id)[1]
            assert (claimed.reason, claimed.actor) == ("claimed", worker.owner)
            assert claimed.data.get("handed") is True
    finally:
        worker.stop()
        thread.join(15)
    assert not thread.is_alive()


def test_the_worker_warns_when_its_own_notify_does_not_arrive(
    pooled: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # a listen_url to another database: the listener connects, but NOTIFYs sent in the store's
    # database never reach it
    wrong = PG_URL.rsplit("/", 1)[0] + "/postgres"
    app = _app(pooled, listen_url=wrong)
    caplog.set_level(logging.INFO, logger="jobtrail.worker")
    app.enqueue("k", {"n": 1})
    assert app.run_worker(burst=True, poll_interval=0.05) == 1
    warned = [r for r in caplog.records if "did not reach its LISTEN connection" in r.getMessage()]
    assert warned and warned[0].levelno == logging.WARNING, caplog.text


def test_session_mode_listens_through_the_pooler(pooled: Store) -> None:
    app = jobtrail.App(_session_url(pooled), pooler="session")
    try:
        app.migrate()
        app.task("k")(lambda ctx, payload: payload["n"])
        assert app._driver.check_wakeups() is True
        ids = [app.enqueue("k", {"n": i}).id for i in range(20)]
        assert app.run_worker(burst=True, poll_interval=0.05) == 20
        assert _succeeded(app, ids)
        assert app.check() == []
    finally:
        app.close()


# -- result waits (conftest.NOT_POOLED: the finish watch needs a LISTEN session) ---------------
def test_a_result_wait_behind_a_transaction_pooler_without_listen_url_polls(
    pooled: Store,
) -> None:
    """No LISTEN through the pooler: the watch is a plain sleep that never claims a wake-up it
    cannot get, and ``result`` answers by polling."""
    app = _app(pooled)
    task_id = app.enqueue("k", {"n": 3}).id
    with app._driver.watch_finished() as wait:
        assert app.run_worker(burst=True, queues=["default"], poll_interval=0.05) == 1
        started = time.monotonic()
        assert wait(0.2) is False  # the completion happened, yet no wake-up: it polls
        assert time.monotonic() - started >= 0.19
    assert app.result(task_id, timeout=5) == 3


def test_a_result_wait_behind_a_transaction_pooler_listens_at_listen_url(pooled: Store) -> None:
    """With ``listen_url`` the watch LISTENs there, and a completion committed through the
    pooler wakes it."""
    app = _app(pooled, listen_url=pooled.direct_url)
    task_id = app.enqueue("k", {"n": 4}).id
    with app._driver.watch_finished() as wait:
        assert app.run_worker(burst=True, queues=["default"], poll_interval=0.05) == 1
        assert wait(10) is True
    assert app.result(task_id) == 4


# -- PgBouncer restarts -------------------------------------------------------------------------
@pytest.mark.timeout(120)
def test_a_worker_keeps_working_when_pgbouncer_is_killed_and_restarted(pooled: Store) -> None:
    app = _app(pooled, poll_interval=0.05)
    producer = _app(pooled)
    ids = [producer.enqueue("k", {"n": i}).id for i in range(50)]
    worker, thread = _worker(app, concurrency=4, poll_interval=0.05)
    b = bouncer()
    try:
        wait_until(lambda: _succeeded(app, ids), timeout=30, what="the first tasks")
        b.kill()  # every client and server connection through it cut at once
        with pytest.raises(jobtrail.StoreUnavailable):
            producer.enqueue("k", {"n": -1})
        b.start()
        more: list[str] = []

        def enqueued() -> bool:
            try:
                more.append(producer.enqueue("k", {"n": len(more)}).id)
            except jobtrail.StoreUnavailable:
                return False
            return len(more) >= 50

        wait_until(enqueued, timeout=30, what="enqueues through the restarted PgBouncer")
        wait_until(lambda: _succeeded(app, more), timeout=60, what="the worker after the restart")
    finally:
        if not b.running:
            b.start()
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()
    counts = {t.state for t in app.list(limit=1000)}
    assert counts == {"succeeded"}
    assert len(app.list(limit=1000)) == 100  # none lost, none doubled
    assert app.check() == []


# -- soak ------------------------------------------------------------------------------------------
class _BouncerRestart:
    """``soak.run``'s ``pg_restart``: restarts PgBouncer (not the server) mid-run."""

    def ctl(self, action: str) -> None:
        b = bouncer()
        b.kill()
        b.start()


@pytest.mark.timeout(300)
def test_soak_through_pgbouncer_in_transaction_mode(pooled: Store, tmp_path: Path) -> None:
    from chaos import soak

    with jobtrail.App(pooled.direct_url) as app:
        app.migrate()
    started = time.monotonic()
    res = soak.run(
        root=tmp_path,
        url=pooled.direct_url,
        pooled_url=pooled.url,
        tasks=150,
        workers=3,
        kill_every=4,
        timeout=200,
        seed=7,
        pg_restart=_BouncerRestart(),
    )
    print(soak.report(res), f"{time.monotonic() - started:.1f}s")
    assert res.problems == [], res.problems
    assert res.violations == [], res.violations[:10]
    assert res.log_errors == [], res.log_errors[:10]
    assert res.kills >= 1 and res.pg_restarts == 1
    assert sum(res.states.values()) == 150
