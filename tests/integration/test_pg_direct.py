"""PostgreSQL: the single enqueue's insert through libpq directly (``store.pg_direct``) on the
driver's express connection. It must store and report what psycopg's path does — errors of
the same class, a broken connection as ``StoreUnavailable`` and replaced — and the connection
must stay usable after a statement the server refused."""

from __future__ import annotations

import dataclasses

import psycopg
import pytest
from conftest import PG_URL, Store

import jobtrail
from jobtrail.core import transition
from jobtrail.store.postgres import PostgresDriver


def _driver(app: jobtrail.App) -> PostgresDriver:
    driver = app._driver
    assert isinstance(driver, PostgresDriver)
    return driver


def _prepared_on(conn: psycopg.Connection[object]) -> set[str]:
    rows = conn.execute("SELECT name FROM pg_prepared_statements").fetchall()
    return {str(r[0]) for r in rows}


def test_single_enqueue_runs_the_prepared_statement_on_the_express_connection(
    pg: Store,
) -> None:
    app = pg.app()
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k", {"a": 1})
    express = _driver(app)._express
    assert express.conn is not None
    # the first looks at the idle registry (none registered): the hand-off's statement
    assert "jobtrail_task_insert_handoff" in _prepared_on(express.conn)
    assert b"jobtrail_task_insert_handoff" in express.prepared
    # still the same connection for the next ones
    conn = express.conn
    more = [app.enqueue("k", {"i": i}) for i in range(3)]
    assert express.conn is conn
    assert [dataclasses.replace(t, created=False) for t in [task, *more]] == [
        app.get(t.id) for t in [task, *more]
    ]


def test_a_refused_insert_raises_the_class_psycopg_raises_and_changes_nothing(
    pg: Store,
) -> None:
    app = pg.app()
    app.task("k")(lambda ctx, p: None)
    driver = _driver(app)
    good = app._new_task({"kind": "k"})
    bad = dataclasses.replace(good, max_attempts=0)  # the table's CHECK refuses it
    with pytest.raises(psycopg.errors.CheckViolation) as direct:
        transition.create_alone(driver, bad)
    assert driver._express.conn is not None and not driver._express.conn.closed
    with driver._express_lock:  # the same insert through psycopg, on a pooled connection
        with pytest.raises(psycopg.errors.CheckViolation) as pooled:
            transition.create_alone(driver, bad)
    assert direct.value.sqlstate == pooled.value.sqlstate == "23514"
    assert "max_attempts" in str(direct.value)
    assert app.list(kind="k") == []
    conn = driver._express.conn
    stored = app.enqueue("k")
    assert driver._express.conn is conn  # the refusal left the connection working
    assert [t.id for t in app.list(kind="k")] == [stored.id]


def test_text_with_a_nul_character_is_refused_before_anything_is_sent(pg: Store) -> None:
    app = pg.app()
    app.task("k")(lambda ctx, p: None)
    for field in ("tenant", "idempotency_key"):
        with pytest.raises(ValueError, match="NUL"):
            app.enqueue("k", **{field: "a\x00b"})
    # below the App's checks the driver still never sends it through libpq's text
    # parameters (they end at the first NUL): psycopg's path refuses it
    new = dataclasses.replace(app._new_task({"kind": "k"}), tenant="a\x00b")
    with pytest.raises(psycopg.DataError, match="NUL"):
        transition.create_alone(_driver(app), new)
    assert app.list(kind="k") == []


def test_a_connection_killed_under_the_express_insert_is_replaced(pg: Store) -> None:
    app = pg.app()
    app.task("k")(lambda ctx, p: None)
    first = app.enqueue("k", {"n": 0})
    driver = _driver(app)
    dead = driver._express.conn
    assert dead is not None
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [dead.info.backend_pid])
    # used a moment ago, so taken without a check: the insert itself meets the dead socket
    with pytest.raises(jobtrail.StoreUnavailable):
        app.enqueue("k", {"n": 1})
    assert driver._express.conn is None and dead.closed
    again = app.enqueue("k", {"n": 2})
    assert driver._express.conn is not None and driver._express.conn is not dead
    assert _prepared_on(driver._express.conn) & {
        "jobtrail_task_insert",
        "jobtrail_task_insert_handoff",
    }
    assert [t.id for t in app.list(kind="k", limit=10)][::-1] == [first.id, again.id]
