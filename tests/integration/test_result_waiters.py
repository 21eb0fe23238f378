"""PostgreSQL: a completion notifies jobtrail_finished only while a result waiter is
registered (migration 0014). A NOTIFY serializes the commits of every notifying transaction
on the server, through the WAL flush: workers whose completions notified when nobody waited
spent a quarter to half of their time on that lock with 16 processes."""

from __future__ import annotations

import psycopg
from _integration_helpers import listening
from conftest import Store

from jobtrail.model.machine import State
from jobtrail.store.postgres import PostgresDriver


def _heard(conn: psycopg.Connection[object], timeout: float) -> bool:
    return any(True for _ in conn.notifies(timeout=timeout, stop_after=1))


def _waiters(url: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [int(r[0]) for r in conn.execute("SELECT pid FROM jobtrail_result_waiters")]


def test_completions_notify_only_while_someone_waits(pg: Store) -> None:
    app = pg.app()
    app.task("k")(lambda ctx, p: 7)
    assert isinstance(app._driver, PostgresDriver)
    # listens, but is not a registered waiter
    listener = listening(pg.url, app._driver.channels().finished)
    try:
        first = app.enqueue("k").id
        app.run_worker(burst=True)
        assert app.get(first).state is State.SUCCEEDED
        assert not _heard(listener, 0.5), "a completion notified with no waiter registered"

        with app._driver.watch_finished() as wait:
            assert len(_waiters(pg.url)) == 1
            second = app.enqueue("k").id
            app.run_worker(burst=True)
            assert app.get(second).state is State.SUCCEEDED
            assert _heard(listener, 5.0)
            assert wait(5.0)
        assert _waiters(pg.url) == []  # the watch took its row away
    finally:
        listener.close()


def test_a_waiter_that_vanished_is_cleared_by_the_next(pg: Store) -> None:
    app = pg.app()
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute("INSERT INTO jobtrail_result_waiters (pid) VALUES (2147483000)")
    with app._driver.watch_finished():
        assert 2147483000 not in _waiters(pg.url)
        assert len(_waiters(pg.url)) == 1
