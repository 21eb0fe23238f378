"""An unmigrated store is ``jobtrail.SchemaMissing`` naming the command to run, never a raw
driver error, on both backends; a read never creates a SQLite file; ``migrate`` into a
directory that does not exist says which directory (issue 17 item 5)."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jobtrail
from jobtrail.store.sqlite import path_from_url


@pytest.fixture
def unmigrated(store: Any) -> Iterator[jobtrail.App]:
    """An App on the test's fresh store, never migrated (not in ``store.apps``: the fixture's
    invariant check would meet the missing schema)."""
    app = jobtrail.App(store.url)

    @app.task("k")
    def k(payload: Any) -> None:
        return None

    with app:
        yield app


CALLS: dict[str, Callable[[jobtrail.App], object]] = {
    "enqueue": lambda app: app.enqueue("k", {"n": 1}),
    "enqueue_many": lambda app: app.enqueue_many([{"kind": "k", "payload": {}}]),
    "get": lambda app: app.get("1"),
    "list": lambda app: app.list(),
    "transitions": lambda app: app.transitions("1"),
    "explain": lambda app: app.explain("1"),
    "cancel": lambda app: app.cancel("1", by="test"),
    "stats": lambda app: app.stats(),
    "sweep": lambda app: app.sweep(),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_use_of_an_unmigrated_store_is_schema_missing(
    store: Any, unmigrated: jobtrail.App, call: str
) -> None:
    app = unmigrated
    with pytest.raises(jobtrail.SchemaMissing) as caught:
        CALLS[call](app)
    error = caught.value
    assert isinstance(error, jobtrail.StoreUnavailable)
    assert f"jobtrail migrate --db {store.url}" in str(error)
    assert error.command == f"jobtrail migrate --db {store.url}"
    if store.backend == "sqlite":  # nothing written: not even an empty file
        assert not os.path.exists(path_from_url(store.url))
    # the store works once migrated, through the same App
    assert app.migrate()
    assert app.enqueue("k", {"n": 1}).state == jobtrail.State.QUEUED


def test_an_empty_sqlite_file_is_schema_missing_naming_the_table(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()  # a database with no tables
    with jobtrail.App(f"sqlite:///{path}") as app:
        with pytest.raises(jobtrail.SchemaMissing, match="no such table: jobtrail_"):
            app.list()


def test_migrate_into_a_missing_directory_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    with jobtrail.App(f"sqlite:///{missing / 'x.db'}") as app:
        with pytest.raises(jobtrail.StoreUnavailable) as caught:
            app.migrate()
    assert f"the directory {missing} does not exist" in str(caught.value)
    assert not (tmp_path / "no").exists()


def test_a_caller_connection_without_the_schema_is_schema_missing(
    store: Any, unmigrated: jobtrail.App
) -> None:
    app = unmigrated
    if store.backend == "sqlite":
        path = path_from_url(store.url)
        conn: Any = sqlite3.connect(path)
    else:
        import psycopg

        conn = psycopg.connect(store.url)
    try:
        with pytest.raises(jobtrail.SchemaMissing):
            app.enqueue("k", {}, connection=conn)
    finally:
        conn.close()


def test_an_app_creates_no_file_until_migrate_which_logs_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 38: a relative SQLite path is resolved once, against the current directory; every
    use but ``migrate`` leaves no file and names the absolute path and the command; ``migrate``
    creates the file and logs its absolute path (a later ``chdir`` does not move it)."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(here)
    absolute = here / "rel.db"
    with jobtrail.App("sqlite:///rel.db") as app:
        app.task("k")(lambda payload: None)
        for call in (CALLS["enqueue"], CALLS["list"], lambda a: a.result("1", timeout=0.05)):
            with pytest.raises(jobtrail.SchemaMissing) as caught:
                call(app)
            assert f"no database file at {absolute}" in str(caught.value)
            assert caught.value.command == f"jobtrail migrate --db sqlite:///{absolute}"
        assert os.listdir(here) == []
        monkeypatch.chdir(elsewhere)
        with caplog.at_level(logging.INFO, logger="jobtrail"):
            assert app.migrate()
        assert f"created the SQLite database {absolute}" in caplog.text
        assert absolute.exists() and os.listdir(elsewhere) == []
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="jobtrail"):
            assert app.migrate() == []
        assert "created" not in caplog.text  # said once, when it was made
        assert app.enqueue("k", {}).state == jobtrail.State.QUEUED
