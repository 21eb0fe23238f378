"""Right after a restart, the pool may still wait out its reconnect back-off while the server
answers again: a use of the store then gets a connection of its own instead of the pool's stale
failure (seen as a flaky tests/integration/test_pg_restart.py under load)."""

from __future__ import annotations

from conftest import Store

import jobtrail


def test_a_checkout_bridges_the_pools_back_off_when_the_server_answers(pg: Store) -> None:
    app: jobtrail.App = pg.app()
    app.task("k")(lambda ctx, payload: None)
    task = app.enqueue("k")
    d = app._driver
    held = [d.pool.getconn() for _ in range(d.max_size)]  # nothing free in the pool
    try:
        d._attempts.failure = "connection refused (the pool's last attempt)"
        assert app.get(task.id).id == task.id  # read through a connection of its own
        assert not d._bridged  # closed after that one use
    finally:
        d._attempts.failure = None
        for conn in held:
            d.pool.putconn(conn)
    app.close()
