"""PostgreSQL: the App's pool hands out the idle connection returned last
(``store.postgres.checkout.RecentFirstPool``), so one caller making one call after another
stays on one warm connection instead of cycling through the pool's idle ones (each checked
again after ``CHECK_AFTER_IDLE``, each preparing its statements and loading its caches)."""

from __future__ import annotations

from conftest import Store

from jobtrail.store.postgres import PostgresDriver


def _backend_pid(driver: PostgresDriver) -> int:
    with driver.transaction(write=False) as tx:
        row = tx.conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return int(row[0])


def test_the_connection_returned_last_is_handed_out_first(pg: Store) -> None:
    app = pg.app()
    driver = app._driver
    assert isinstance(driver, PostgresDriver)
    pool = driver.pool
    held = [pool.getconn() for _ in range(3)]  # the pool grows to three connections
    for conn in held:
        pool.putconn(conn)
    assert pool.getconn() is held[-1]  # not held[0], idle longest
    pool.putconn(held[-1])
    # calls one after another run on one backend, whichever the pool holds idle
    pids = {_backend_pid(driver) for _ in range(6)}
    assert len(pids) == 1, pids
    app.close()
