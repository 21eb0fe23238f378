"""SQLite's write lock, taken in short steps instead of SQLite's own busy back-off.

With a busy timeout SQLite retries a locked ``BEGIN IMMEDIATE`` after sleeping 1, 2, 5, 10, 15,
20, 25, 25, 25, 50, 50 and then 100 ms at a time. A process that writes in a tight loop (a
worker draining tiny tasks) takes the lock again within microseconds of its commit, so a
second process that has backed off to 100 ms tries rarely and mostly finds the lock taken: it
waits for hundreds of milliseconds, and an enqueue from a web request waited as long.

So the driver's write transactions start with the connection's busy timeout at 0 and retry
``BEGIN IMMEDIATE`` themselves every ``STEP`` seconds or so (a little jitter, so waiters do not
try in lockstep) until ``busy_timeout`` has passed, then raise SQLite's own "database is
locked" as before. Read transactions keep the busy timeout (they wait out the rare busy
answers of WAL mode: a recovery, the last connection's clean-up); the pragma is switched only
when a connection goes from reads to writes or back, so a thread that only writes (an
enqueuer, a worker's pump) pays it once. Inside a ``BEGIN IMMEDIATE`` transaction WAL mode
answers no statement busy (the write lock and the snapshot are taken together; the automatic
checkpoint is passive), so the timeout of 0 there changes nothing else.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time

#: seconds between two tries for the write lock while another connection holds it (on
#: average; each sleep is drawn from 0.5 to 1.5 times it)
STEP = 0.001
#: the step of a single enqueue (``task_insert_alone``): a caller waits on it, often a web
#: request, so it tries four times as often as the workers' transactions
QUICK_STEP = STEP / 4


def is_busy(error: sqlite3.OperationalError) -> bool:
    """SQLite's SQLITE_BUSY ("database is locked"), as Python's sqlite3 reports it."""
    code: int | None = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) == sqlite3.SQLITE_BUSY
    return "locked" in str(error)  # pragma: no cover - Python < 3.11 has no error code


class WriteLock:
    """Begins transactions, ``BEGIN IMMEDIATE`` in short steps (module doc)."""

    def __init__(self, busy_timeout: float) -> None:
        self.busy_timeout = busy_timeout
        self._pragma = f"PRAGMA busy_timeout={int(busy_timeout * 1000)}"

    def begin(
        self, conn: sqlite3.Connection, write: bool, local: threading.local, step: float = STEP
    ) -> None:
        """A transaction on ``conn``, the connection of the thread whose driver state is
        ``local`` (its ``stepping``: the connection's busy timeout is 0 now); a write waits
        for the lock in steps of ``step`` seconds."""
        stepping = getattr(local, "stepping", False)
        if not write:
            if stepping:
                conn.execute(self._pragma)
                local.stepping = False
            conn.execute("BEGIN")
            return
        if not stepping:
            conn.execute("PRAGMA busy_timeout=0")
            local.stepping = True
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            self._wait(conn, step)

    def _wait(self, conn: sqlite3.Connection, step: float) -> None:
        deadline = time.monotonic() + self.busy_timeout
        while True:
            time.sleep(step * (0.5 + random.random()))  # noqa: S311 - jitter, not a secret
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() >= deadline:
                    raise
