"""SQLite's write lock taken in short steps (``store/sqlite/locking.py``): a writer waiting
behind another connection retries ``BEGIN IMMEDIATE`` itself every millisecond or so instead
of backing off inside SQLite to 100 ms a try; reads keep the busy timeout."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

import jobtrail
from jobtrail.store.sqlite.driver import SQLiteDriver


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'lock.db'}"
    with jobtrail.App(url) as app:
        app.migrate()
    return url


def _hold_lock(url: str, seconds: float, held: threading.Event) -> threading.Thread:
    """Another connection holds the write lock for ``seconds`` from when ``held`` is set."""

    def hold() -> None:
        conn = sqlite3.connect(url[len("sqlite:///") :], isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            held.set()
            time.sleep(seconds)
            conn.execute("COMMIT")
        finally:
            conn.close()

    thread = threading.Thread(target=hold)
    thread.start()
    return thread


def test_a_waiting_writer_tries_again_in_short_steps(url: str) -> None:
    driver = SQLiteDriver(url)
    try:
        conn = driver._connect()
        tries: list[str] = []
        conn.set_trace_callback(lambda sql: tries.append(sql))
        held = threading.Event()
        holder = _hold_lock(url, 0.3, held)
        held.wait(5)
        t0 = time.monotonic()
        with driver.transaction() as tx:
            waited = time.monotonic() - t0
            assert tx.conn.in_transaction
        holder.join()
        begins = [s for s in tries if s == "BEGIN IMMEDIATE"]
        # SQLite's own busy handler retries inside one statement (one BEGIN in the trace,
        # then sleeps of up to 100 ms); here each try is a statement of its own, about 1 ms
        # apart: ~300 in 0.3 s, and at least 10 even on a machine whose sleeps take 20 ms
        assert waited >= 0.25, waited
        assert len(begins) >= 10, (len(begins), waited)
    finally:
        driver.close()


def test_reads_keep_the_busy_timeout_and_writes_step(url: str) -> None:
    driver = SQLiteDriver(url, busy_timeout=7.0)
    try:
        conn = driver._connect()

        def timeout() -> int:
            return int(conn.execute("PRAGMA busy_timeout").fetchone()[0])

        with driver.transaction(write=False):
            assert timeout() == 7000
        with driver.transaction():
            assert timeout() == 0
        with driver.transaction():
            assert timeout() == 0
        with driver.transaction(write=False):
            assert timeout() == 7000
    finally:
        driver.close()


def test_a_writer_gives_up_after_the_busy_timeout_and_writes_nothing(url: str) -> None:
    with jobtrail.App(url, busy_timeout=0.2) as app:
        app.task("noop")(lambda ctx, payload: None)
        held = threading.Event()
        holder = _hold_lock(url, 1.0, held)
        held.wait(5)
        t0 = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            app.enqueue("noop", {})
        waited = time.monotonic() - t0
        holder.join()
        assert 0.2 <= waited < 0.9, waited
        assert app.list() == []
