"""PostgreSQL: a NOTIFY channel belongs to the database, not to a schema. Each jobtrail schema
notifies and listens on channels of its own (``jobtrail_channel()``, migration 19), so an
enqueue or a completion in one schema wakes nobody who serves another schema of the same
database. A store in ``public`` keeps the plain names.

How "not heard" is decided without a sleep: notifications reach a listener in the order their
transactions committed, so once a marker sent after the event has arrived on the other
schema's channel, anything the event sent there would have arrived before it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _integration_helpers import listening
from conftest import PG_URL, Store, make_store, schema_url

import jobtrail
from jobtrail.store.postgres import PostgresDriver

MARKER = "marker-after-the-event"


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    a, b = make_store("postgres", tmp_path), make_store("postgres", tmp_path)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _app(store: Store) -> tuple[jobtrail.App, PostgresDriver]:
    app = store.app()
    app.task("k")(lambda ctx, p: 7)
    driver = app._driver
    assert isinstance(driver, PostgresDriver)
    return app, driver


def _until_marker(conn: psycopg.Connection[Any]) -> list[str]:
    """What the connection heard up to and without the marker (5 s at most for it)."""
    heard: list[str] = []
    for note in conn.notifies(timeout=5):
        if note.payload == MARKER:
            return heard
        heard.append(note.payload)
    raise AssertionError(f"the marker never came; heard {heard}")


def _mark(driver: PostgresDriver, channel: str) -> None:
    with driver.pool.connection() as conn:
        conn.execute("SELECT pg_notify(%s, %s)", (channel, MARKER))


def test_an_enqueue_wakes_only_its_own_schema(two: tuple[Store, Store]) -> None:
    (a, b) = two
    app_a, da = _app(a)
    _, db = _app(b)
    queued_a, queued_b = da.channels().queued, db.channels().queued
    assert queued_a != queued_b
    assert queued_a.startswith("jobtrail_queued_") and queued_b.startswith("jobtrail_queued_")
    # each driver's listener listens where its own statements notify
    assert da.check_wakeups() is True and db.check_wakeups() is True
    with listening(a.url, queued_a) as hear_a, listening(b.url, queued_b) as hear_b:
        app_a.enqueue("k", queue="qa")
        app_a.enqueue_many([{"kind": "k", "queue": "qb"}])
        _mark(da, queued_a)
        _mark(db, queued_b)
        assert sorted(_until_marker(hear_a)) == ["qa", "qb"]
        assert _until_marker(hear_b) == []


def test_a_completion_wakes_only_its_own_schemas_result_waiters(
    two: tuple[Store, Store],
) -> None:
    (a, b) = two
    app_a, da = _app(a)
    _, db = _app(b)
    finished_a, finished_b = da.channels().finished, db.channels().finished
    assert finished_a != finished_b
    with listening(b.url, finished_b) as hear_b, db.watch_finished() as wait_b:
        with da.watch_finished() as wait_a:
            task = app_a.enqueue("k")
            app_a.run_worker(burst=True)
            assert app_a.get(task.id).state.value == "succeeded"
            assert wait_a(5.0)  # a's waiter is woken by a's completion
        _mark(db, finished_b)
        assert _until_marker(hear_b) == []  # b's channel carried nothing of it
        assert wait_b(0.5) is True  # the marker itself: b's waiter listens there
        assert wait_b(0.2) is False  # and heard nothing else


def test_a_store_in_public_keeps_the_plain_names() -> None:
    """A database of its own (the shared test database's ``public`` is not ours to migrate)."""
    name = "jt_public_" + secrets.token_hex(4)
    base = PG_URL.rsplit("/", 1)[0]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        app = jobtrail.App(f"{base}/{name}")
        try:
            app.migrate()
            driver = app._driver
            assert isinstance(driver, PostgresDriver)
            assert driver.channels() == ("jobtrail_queued", "jobtrail_finished")
            assert driver.check_wakeups() is True
        finally:
            app.close()
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_process_whose_search_path_starts_elsewhere_wakes_the_same_workers(
    pg: Store,
) -> None:
    """The channel is fixed by the schema the tables are in (at migration), not by the
    caller's ``current_schema()``: an App whose search_path starts with another schema (one
    without jobtrail tables, say a web process's own) still reaches the workers' channel."""
    app, driver = _app(pg)
    with psycopg.connect(pg.direct_url, autocommit=True) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
        assert row is not None
        schema = row[0]
        other = "o_" + secrets.token_hex(5)
        conn.execute(f'CREATE SCHEMA "{other}"')
    try:
        url = schema_url(f"{other},{schema}")
        web = jobtrail.App(url)
        try:
            web.task("k")(lambda ctx, p: 7)
            with psycopg.connect(url, autocommit=True) as conn:
                row = conn.execute("SELECT current_schema()").fetchone()
            assert row is not None and row[0] == other  # its current_schema() is not the store's
            assert isinstance(web._driver, PostgresDriver)
            assert web._driver.channels() == driver.channels()
            with listening(pg.direct_url, driver.channels().queued) as hear:
                web.enqueue("k", queue="from-web")
                _mark(driver, driver.channels().queued)
                assert _until_marker(hear) == ["from-web"]
        finally:
            web.close()
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{other}" CASCADE')


def test_a_listen_url_without_the_schema_still_hears_its_store(pg: Store) -> None:
    """The listener asks the store for the channel's name through the pool: a ``listen_url``
    whose search_path does not see the store (here: none at all) listens where the store's
    statements notify."""
    app = pg.app(listen_url=PG_URL)
    driver = app._driver
    assert isinstance(driver, PostgresDriver)
    assert driver.check_wakeups() is True
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
    assert row is not None and row[0] == "public"  # so the listen_url's own answer would differ
