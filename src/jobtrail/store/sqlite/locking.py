"""SQLite's write lock: one writer per process at a time, taken in short steps between
processes, instead of SQLite's own busy back-off.

With a busy timeout SQLite retries a locked ``BEGIN IMMEDIATE`` after sleeping 1, 2, 5, 10, 15,
20, 25, 25, 25, 50, 50 and then 100 ms at a time. A process that writes in a tight loop (a
worker draining tiny tasks) takes the lock again within microseconds of its commit, so a
second process that has backed off to 100 ms tries rarely and mostly finds the lock taken: it
waits for hundreds of milliseconds, and an enqueue from a web request waited as long.

So a driver's write transactions:

1. queue for a lock of the process's own (a ``threading.Lock`` per driver, up to
   ``busy_timeout``): threads of one process take turns without polling SQLite, and only one
   of them at a time competes with other processes;
2. then take SQLite's lock with the connection's busy timeout at 0, trying ``BEGIN
   IMMEDIATE`` again every ``step`` seconds or so (a little jitter, so processes do not try in
   lockstep) until ``busy_timeout`` has passed, and then raise SQLite's own "database is
   locked" as before;
3. give the process lock back when the transaction ends (``release``), committed or not.

Read transactions take neither lock and keep the busy timeout (they wait out the rare busy
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

#: seconds between two tries for the write lock while another process holds it (on
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
    """Begins a driver's transactions (module doc)."""

    def __init__(self, busy_timeout: float) -> None:
        self.busy_timeout = busy_timeout
        self._pragma = f"PRAGMA busy_timeout={int(busy_timeout * 1000)}"
        self._process = threading.Lock()
        self._owner: int | None = None  # the thread whose write transaction holds it

    def begin(
        self, conn: sqlite3.Connection, write: bool, local: threading.local, step: float = STEP
    ) -> None:
        """A transaction on ``conn``, the connection of the thread whose driver state is
        ``local`` (its ``stepping``: the connection's busy timeout is 0 now). A write holds
        the process lock until ``release``; it waits for SQLite's in steps of ``step``."""
        stepping = getattr(local, "stepping", False)
        if not write:
            if stepping:
                conn.execute(self._pragma)
                local.stepping = False
            conn.execute("BEGIN")
            return
        if self._owner == threading.get_ident():
            # this thread's write transaction is open: SQLite refuses a second one at once
            # ("cannot start a transaction within a transaction"), as without the process lock
            conn.execute("BEGIN IMMEDIATE")
            raise RuntimeError("a write transaction began inside another")  # pragma: no cover
        deadline = time.monotonic() + self.busy_timeout
        if not self._process.acquire(timeout=max(self.busy_timeout, 0.0)):
            raise sqlite3.OperationalError("database is locked (by this process's writers)")
        self._owner = threading.get_ident()
        try:
            if not stepping:
                conn.execute("PRAGMA busy_timeout=0")
                local.stepping = True
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                self._wait(conn, step, deadline)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """A write transaction of this process ended (committed or rolled back)."""
        self._owner = None
        self._process.release()

    def _wait(self, conn: sqlite3.Connection, step: float, deadline: float) -> None:
        while True:
            time.sleep(step * (0.5 + random.random()))  # noqa: S311 - jitter, not a secret
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() >= deadline:
                    raise
