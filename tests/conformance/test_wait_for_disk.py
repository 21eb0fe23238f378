"""``wait_for_disk=False``: the task is stored and read back like any other on every backend;
on PostgreSQL (direct and behind PgBouncer) its transaction commits with ``synchronous_commit``
off and no other transaction does (a trigger records the setting inside each insert's
transaction); bad input changes nothing, the same on both backends."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from typing import Any

import psycopg
import pytest
from conftest import POOLED_BACKENDS, Store

import jobtrail

from .support import reasons, run


@pytest.fixture
def kapp(app: jobtrail.App) -> jobtrail.App:
    app.task("k")(lambda ctx, p: None)
    return app


def test_a_task_that_did_not_wait_for_the_disk_is_stored_and_runs(kapp: jobtrail.App) -> None:
    one = kapp.enqueue("k", {"n": 1}, wait_for_disk=False)
    keyed = kapp.enqueue("k", {"n": 2}, wait_for_disk=False, idempotency_key="a")
    again = kapp.enqueue("k", {"n": 2}, wait_for_disk=False, idempotency_key="a")
    many = kapp.enqueue_many(
        [{"kind": "k", "payload": {"n": i}, "wait_for_disk": False} for i in range(3, 6)]
    )
    handle = kapp.task("k2")(lambda ctx, p: None)
    more = handle.enqueue_many([{"n": 6}, {"n": 7}], wait_for_disk=False)
    assert again.id == keyed.id and again.created is False
    ids = [one.id, keyed.id, *(t.id for t in many), *(t.id for t in more)]
    for i, task_id in enumerate(ids, start=1):
        got = kapp.get(task_id)
        assert (got.state, got.payload) == ("queued", {"n": i})
        assert reasons(kapp, task_id) == ["enqueued"]
    run(kapp)
    assert {kapp.get(t).state for t in ids} == {"succeeded"}


def test_bad_wait_for_disk_is_refused_and_writes_nothing(store: Store, kapp: jobtrail.App) -> None:
    with pytest.raises(TypeError, match="wait_for_disk must be True or False"):
        kapp.enqueue("k", {}, wait_for_disk="no")  # type: ignore[typeddict-item]
    with pytest.raises(TypeError, match="item 1: wait_for_disk must be True or False"):
        kapp.enqueue_many([{"kind": "k"}, {"kind": "k", "wait_for_disk": 0}])
    with _caller_connection(store) as conn:
        with pytest.raises(ValueError, match="with connection= the commit is yours"):
            kapp.enqueue("k", {}, wait_for_disk=False, connection=conn)
        with pytest.raises(ValueError, match="item 0: wait_for_disk=False"):
            kapp.enqueue_many([{"kind": "k", "wait_for_disk": False}], connection=conn)
    assert kapp.list() == []


# PostgreSQL only (on SQLite the option changes nothing): direct and behind PgBouncer
@pytest.mark.parametrize("backend", ["postgres", *POOLED_BACKENDS])
def test_postgres_skips_the_flush_wait_for_that_transaction_only(
    store: Store, kapp: jobtrail.App
) -> None:
    with psycopg.connect(store.direct_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE seen_sync (task_id bigint, setting text);"
            "CREATE FUNCTION seen_sync() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " INSERT INTO seen_sync VALUES (NEW.id, current_setting('synchronous_commit'));"
            " RETURN NEW; END $$;"
            "CREATE TRIGGER seen_sync AFTER INSERT ON jobtrail_tasks"
            " FOR EACH ROW EXECUTE FUNCTION seen_sync()"
        )

        def seen(*tasks: Any) -> set[str]:
            rows = conn.execute(
                "SELECT setting FROM seen_sync WHERE task_id = ANY(%s)",
                ([int(t.id) for t in tasks],),
            ).fetchall()
            assert len(rows) == len(tasks)
            return {r[0] for r in rows}

        assert seen(kapp.enqueue("k", {})) == {"on"}
        assert seen(kapp.enqueue("k", {}, wait_for_disk=False)) == {"off"}
        assert seen(asyncio.run(kapp.aenqueue("k", {}, wait_for_disk=False))) == {"off"}
        assert seen(asyncio.run(kapp.aenqueue("k", {}))) == {"on"}
        # the setting went with its transaction: the next ones on the same pool wait again
        assert seen(*kapp.enqueue_many([{"kind": "k"}] * 3)) == {"on"}
        assert seen(kapp.enqueue("k", {}, idempotency_key="x")) == {"on"}
        items: list[dict[str, Any]] = [{"kind": "k", "wait_for_disk": False}] * 3
        assert seen(*kapp.enqueue_many(items)) == {"off"}
        keyed = [{**item, "idempotency_key": f"k{i}"} for i, item in enumerate(items)]
        assert seen(*kapp.enqueue_many(keyed)) == {"off"}
        # one commit for all: it waits unless every item lets it go
        assert seen(*kapp.enqueue_many([*items, {"kind": "k"}])) == {"on"}
        assert seen(kapp.enqueue("k", {})) == {"on"}


def _caller_connection(store: Store) -> Any:
    if store.postgres:
        return psycopg.connect(store.direct_url)
    return closing(sqlite3.connect(store.url[len("sqlite:///") :]))
