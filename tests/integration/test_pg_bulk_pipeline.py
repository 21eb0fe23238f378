"""PostgreSQL: a bulk enqueue (``enqueue_many`` of keyless tasks, no caller's connection) is
one pipeline — BEGIN, the batches, the NOTIFY of each queue, COMMIT — with no round trip of
its own for the BEGIN or the notifications. It must stay one transaction: stored whole and
notified on commit, or, when the server refuses a row in a later batch, nothing stored,
nothing notified, and the connection back in the pool idle and working."""

from __future__ import annotations

import os
from typing import Any

import psycopg
import pytest
from _integration_helpers import listening
from conftest import Store

import jobtrail
from jobtrail.core import transition
from jobtrail.store.postgres import PostgresDriver


def _app(pg: Store) -> tuple[jobtrail.App, PostgresDriver]:
    app = pg.app()
    app.task("k")(lambda ctx, p: None)
    driver = app._driver
    assert isinstance(driver, PostgresDriver)
    return app, driver


def test_a_bulk_enqueue_is_one_transaction_notified_once_per_queue(pg: Store) -> None:
    app, driver = _app(pg)
    n = 3 * driver.insert_batch + 7
    # queues of this test's own (the channel is this schema's since migration 19; before, it
    # was the database's, and other test runs' enqueues to "default" were heard here)
    q1, q2 = (f"q{os.getpid()}x{id(app)}{c}" for c in "ab")
    items: list[dict[str, Any]] = [
        {"kind": "k", "queue": q1, "payload": {"n": i}} for i in range(n)
    ]
    items.append({"kind": "k", "queue": q2})
    with listening(pg.url, driver.channels().queued) as listener:
        tasks = app.enqueue_many(items)
        # listen a while after both arrived: a second notification of a queue would show
        heard = [x.payload for x in listener.notifies(timeout=2) if x.payload in (q1, q2)]
    assert sorted(heard) == [q1, q2]
    # every statement ran in the one transaction the pipeline opened: now() is its start
    assert len({t.created_at for t in tasks}) == 1
    assert [t.payload for t in tasks[:n]] == [{"n": i} for i in range(n)]
    assert len(app.list(limit=n + 1)) == n + 1


def test_a_row_the_server_refuses_in_a_later_batch_undoes_all(pg: Store) -> None:
    app, driver = _app(pg)
    with psycopg.connect(pg.url, autocommit=True) as admin:
        admin.execute(
            "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF NEW.payload ? 'boom' THEN RAISE EXCEPTION 'boom refused'; END IF;"
            " RETURN NEW; END $$"
        )
        admin.execute(
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON jobtrail_tasks"
            " FOR EACH ROW EXECUTE FUNCTION refuse_boom()"
        )
    size = driver.insert_batch
    # a queue of this test's own, whatever else is notified on the channel
    q = f"q{os.getpid()}x{id(app)}"
    items: list[dict[str, Any]] = [
        {"kind": "k", "queue": q, "payload": {"n": i}} for i in range(2 * size + 9)
    ]
    items[2 * size + 3] = {"kind": "k", "queue": q, "payload": {"boom": 1}}  # refused there
    with listening(pg.url, driver.channels().queued) as listener:
        with pytest.raises(psycopg.errors.RaiseException, match="boom refused"):
            app.enqueue_many(items)
        assert app.list() == []
        # the pool's connections are all idle: none was left in the aborted transaction
        assert driver.pool.get_stats()["pool_available"] == driver.pool.get_stats()["pool_size"]
        conn = driver.pool.getconn()
        try:
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        finally:
            driver.pool.putconn(conn)
        # and the next bulk enqueue works, notifying once: no notification was left over
        items[2 * size + 3] = {"kind": "k", "queue": q, "payload": {"n": 2 * size + 3}}
        tasks = app.enqueue_many(items)
        heard = []
        for note in listener.notifies(timeout=5):
            if note.payload == q:
                heard.append(note.payload)
                break
        assert heard == [q]
        assert [x.payload for x in listener.notifies(timeout=0.2) if x.payload == q] == []
    assert [t.payload["n"] for t in tasks] == list(range(2 * size + 9))
    assert len(app.list(limit=1000)) == 2 * size + 9


def test_an_error_after_a_sync_inside_the_transaction_still_undoes_all(pg: Store) -> None:
    # a pipeline's implicit transaction ends at its next sync: the bulk transaction opens an
    # explicit one, so that nothing is committed before its end, whatever syncs happen inside
    app, driver = _app(pg)
    news = [app._new_task({"kind": "k", "payload": {"n": i}}) for i in range(3)]
    with pytest.raises(RuntimeError, match="after a sync"):
        with driver.batch_transaction() as tx:
            transition.create_batches(driver, tx, [news], lambda new, i, c, r, p: i)
            with tx.conn.pipeline():  # a nested pipeline: psycopg syncs on entering it
                pass
            raise RuntimeError("after a sync")
    assert app.list() == []
