"""The SQLite driver: the embedded default (stdlib ``sqlite3``).

Several processes on one machine share one file: WAL journal, ``synchronous=FULL`` (``NORMAL``
only by explicit opt-in), ``BEGIN IMMEDIATE`` for every write that decides (taken in short steps:
``locking.py``), and a busy timeout.
Each thread gets its own connection. Times are REAL epoch seconds read from SQLite's clock.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from ...model.errors import SchemaMissing, StoreUnavailable
from .. import queries
from ..base import Claim, Driver, NewTask, Row, Tx, dumps
from ..offloop import OffLoop
from .locking import QUICK_STEP, STEP, WriteLock
from .rows import decode_all, insert_rows

log = logging.getLogger("jobtrail")

#: How often an idle worker looks for commits by other processes (seconds). A commit waits
#: half of it on average before a worker sees it; an idle worker spends ~3.4% of a core at
#: 2 ms (~2.2% at 4 ms, where the bench read idle p50 ~0.7 ms higher).
DATA_VERSION_POLL = 0.002
#: How often a result waiter reads PRAGMA data_version (``watch_finished``).
FINISHED_POLL = 0.005


class _Tx:
    def __init__(self, conn: sqlite3.Connection, sql: dict[str, str]) -> None:
        self.conn = conn
        self.sql = sql

    def one(self, name: str, params: dict[str, Any] | None = None) -> Row | None:
        cur = self.conn.execute(self.sql[name], params or {})
        row = cur.fetchone()
        cur.fetchall()  # finish the statement (RETURNING rows are produced while stepping)
        return decode_all(cur, [row])[0] if row is not None else None

    def all(self, name: str, params: dict[str, Any] | None = None) -> list[Row]:
        cur = self.conn.execute(self.sql[name], params or {})
        return decode_all(cur, cur.fetchall())

    def run(self, name: str, params: dict[str, Any] | None = None) -> int:
        return self.conn.execute(self.sql[name], params or {}).rowcount

    def many(self, name: str, params: Sequence[dict[str, Any]]) -> None:
        self.conn.executemany(self.sql[name], params)


def path_from_url(url: str) -> str:
    if not url.startswith("sqlite:///"):
        raise ValueError(
            f"bad SQLite URL {url!r}: use sqlite:///relative/path.db or sqlite:////abs/path.db"
        )
    path = url[len("sqlite:///") :].split("?", 1)[0]
    if not path or path == ":memory:":
        raise ValueError(
            "an in-memory SQLite database cannot be shared by workers; give a file path"
        )
    return path


class SQLiteDriver(OffLoop, Driver):
    dialect = "sqlite"
    logs_in_statement = False

    def __init__(
        self, url: str, *, busy_timeout: float = 30.0, synchronous: str | None = None, **_: Any
    ) -> None:
        super().__init__()
        # a relative path is resolved once, against the current directory of the process that
        # opens the App: a later chdir never moves the database
        self.path = os.path.abspath(path_from_url(url))
        self.url = url
        self.outage.where = f"the SQLite database {self.path}"
        self.busy_timeout = busy_timeout
        self._write_lock = WriteLock(busy_timeout)
        sync = (synchronous or os.environ.get("JOBTRAIL_SQLITE_SYNCHRONOUS") or "FULL").upper()
        if sync not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(
                f"JOBTRAIL_SQLITE_SYNCHRONOUS must be FULL, EXTRA or NORMAL, not {sync!r}"
            )
        self.synchronous = sync
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._closed = False

    # -- connections -------------------------------------------------------------------------
    def _connect(self, *, create: bool = False) -> sqlite3.Connection:
        """This thread's connection. Only ``migrate`` (``create``) may create the file: every
        other use opens it ``mode=rw``, so a read of a wrong path never leaves an empty
        database behind, and says what is missing."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise RuntimeError("this App is closed")
        target = self.path
        folder = os.path.dirname(target)
        if create and not os.path.isdir(folder):
            raise StoreUnavailable(
                f"cannot create the SQLite database {target}: the directory {folder} does not "
                "exist (create it, or fix the path in the URL)"
            )
        try:
            conn = sqlite3.connect(
                f"file:{quote(target)}?mode={'rwc' if create else 'rw'}",
                uri=True,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.OperationalError:
            if not create and not os.path.exists(target):
                raise SchemaMissing(
                    f"sqlite:///{target}", f"no database file at {target}"
                ) from None
            raise
        conn.row_factory = sqlite3.Row
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # pragma: no cover - e.g. a read-only medium
            raise RuntimeError(f"could not switch {self.path} to WAL (got {mode})")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        self._local.conn = conn
        with self._lock:
            self._all.append(conn)
        return conn

    @contextmanager
    def transaction(self, *, write: bool = True, connection: Any = None) -> Iterator[_Tx]:
        if connection is not None:
            yield from self._caller_transaction(connection)
            return
        conn = self._begin(write)
        try:
            yield _Tx(conn, self.sql)
        except BaseException as exc:
            self._end(conn, write, exc)
            raise
        else:
            self._end(conn, write)

    def _begin(self, write: bool, step: float = STEP) -> sqlite3.Connection:
        """This thread's connection, in a new transaction (``BEGIN IMMEDIATE`` to write, under
        the process's write lock, SQLite's waited for in steps of ``step`` seconds: ``_end``
        gives it back)."""
        conn = self._connect()
        self._write_lock.begin(conn, write, self._local, step)
        return conn

    def _end(self, conn: sqlite3.Connection, write: bool, exc: BaseException | None = None) -> None:
        """COMMIT, or ROLLBACK after ``exc``; then a write gives the process's lock back."""
        try:
            if exc is None:
                conn.execute("COMMIT")
            else:
                conn.execute("ROLLBACK")
                self._raise_schema_missing(exc)
        finally:
            if write:
                self._write_lock.release()

    def task_insert_alone(self, new: NewTask) -> tuple[Row, bool]:
        """``Driver.task_insert_alone`` (a single enqueue) with no context manager between the
        caller and its four statements: the same ``task_insert`` in the same transaction as
        ``transaction()`` makes, the wake-up after the commit."""
        conn = self._begin(True, QUICK_STEP)
        try:
            row, created = self.task_insert(_Tx(conn, self.sql), new)
        except BaseException as exc:
            self._end(conn, True, exc)
            raise
        self._end(conn, True)
        if created:
            self._wakeup.set()
        return row, created

    def _raise_schema_missing(self, exc: BaseException) -> None:
        """A statement that met no jobtrail table: the schema is missing (never migrated)."""
        if isinstance(exc, sqlite3.OperationalError) and str(exc).startswith("no such table"):
            raise SchemaMissing(f"sqlite:///{self.path}", str(exc)) from exc

    def _caller_transaction(self, conn: Any) -> Iterator[_Tx]:
        """Work inside the caller's connection; the caller commits (or not)."""
        if not isinstance(conn, sqlite3.Connection):
            raise TypeError(
                f"connection= must be an open sqlite3.Connection for a SQLite App, got "
                f"{type(conn).__name__}"
            )
        previous = conn.row_factory
        conn.row_factory = sqlite3.Row
        try:
            if not conn.in_transaction and conn.isolation_level is not None:
                # What Python's sqlite3 would do before our first INSERT anyway: open the
                # caller's transaction so that nothing is committed until they commit.
                conn.execute(f"BEGIN {conn.isolation_level}")
            conn.execute("SAVEPOINT jobtrail_enqueue")
            try:
                yield _Tx(conn, self.sql)
            except BaseException as exc:
                conn.execute("ROLLBACK TO jobtrail_enqueue")
                conn.execute("RELEASE jobtrail_enqueue")
                self._raise_schema_missing(exc)
                raise
            conn.execute("RELEASE jobtrail_enqueue")
        finally:
            conn.row_factory = previous

    def migrate(self) -> list[int]:
        """The one place a database file is created (``mode=rwc``); a new file is logged with
        its absolute path (``jobtrail`` logger, INFO)."""
        new = not os.path.exists(self.path)
        conn = self._connect(create=True)
        applied: list[int] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS jobtrail_migrations (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM jobtrail_migrations")}
            for version, name, text in queries.migrations(self.dialect):
                if version in done:
                    continue
                for statement in _statements(text):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO jobtrail_migrations (version, name, applied_at) VALUES "
                    "(?, ?, (julianday('now') - 2440587.5) * 86400.0)",
                    (version, name),
                )
                applied.append(version)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        if new:
            log.info("created the SQLite database %s", self.path)
        return applied

    def close(self) -> None:
        self.close_offloop()  # the async API's calls in flight finish first
        self._closed = True
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:  # pragma: no cover
                pass
        self._local = threading.local()
        self._wakeup.set()

    # -- wake-ups: SQLite has no LISTEN/NOTIFY. Enqueues in this process wake this process's
    # workers at once; commits by other processes are noticed by polling PRAGMA data_version
    # (it changes when another connection commits) every few milliseconds, which reads
    # shared memory only — far cheaper than running the claim query.
    def wait_for_work(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        conn: sqlite3.Connection | None = None
        if not self._closed:
            conn = self._connect()
            if getattr(self._local, "seen", None) is None:  # this thread never claimed
                self._local.seen = conn.execute("PRAGMA data_version").fetchone()[0]
        seen = getattr(self._local, "seen", None)
        woke = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self._wakeup.wait(min(left, DATA_VERSION_POLL)):
                woke = True
                break
            if conn is not None and not self._closed:
                try:
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                    if version != seen:
                        # remember it, so a worker with no free slot does not spin on it
                        self._local.seen = version
                        woke = True
                        break
                except sqlite3.Error:  # pragma: no cover - closed under us: poll as before
                    conn = None
        self._wakeup.clear()
        self._local.noted = False  # the next claim notes what it sees
        return woke

    def wake(self) -> None:
        self._wakeup.set()

    def _looking_for_work(self, tx: Any) -> None:
        # The version wait_for_work compares against is the one the first claim since the
        # thread's last wait looked at: read in its write transaction, where no commit can
        # come between it and the claim's reads. A later claim of the same round may look at
        # some queues only (the limited ones), and no other transaction looks for work:
        # noting the version at every transaction let the limits re-read after an empty
        # claim, or a sweep, note a commit no claim had seen, and the task waited for the
        # worker's poll. (Commits after the first claim wake the worker once more at worst;
        # a claim that looks at no queue, such as the unlimited pass of a worker whose
        # queues all have limits, notes nothing.)
        local = self._local
        if not getattr(local, "noted", False):
            local.seen = tx.conn.execute("PRAGMA data_version").fetchone()[0]
            local.noted = True

    @contextmanager
    def watch_finished(self) -> Iterator[Callable[[float], bool]]:
        # SQLite's wake-up for other processes and threads: PRAGMA data_version changes when
        # another connection commits (a finish is a commit), read on a connection of the
        # watch's own so it never disturbs a worker's view of what it has seen.
        conn = sqlite3.connect(  # mode=rw: only migrate creates the file
            f"file:{quote(self.path)}?mode=rw",
            uri=True,
            timeout=self.busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            seen = conn.execute("PRAGMA data_version").fetchone()[0]

            def wait(timeout: float) -> bool:
                nonlocal seen
                deadline = time.monotonic() + timeout
                while True:
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                    if version != seen:
                        seen = version
                        return True
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    time.sleep(min(left, FINISHED_POLL))

            yield wait
        finally:
            conn.close()

    def notify_queued(self, tx: Any, queue: str) -> None:
        self._wakeup.set()

    def _inserted(self, tx: Any, params: dict[str, Any]) -> tuple[int, datetime, datetime] | None:
        conn = tx.conn
        cur = conn.execute(self.sql["task_insert"], params)
        if cur.rowcount == 0:  # the idempotency key exists (DO NOTHING)
            return None
        task_id = cur.lastrowid
        got = conn.execute(self.sql["task_inserted"], {"id": task_id}).fetchone()
        created_at = datetime.fromtimestamp(got[0], UTC)
        run_at = created_at if got[1] == got[0] else datetime.fromtimestamp(got[1], UTC)
        return task_id, created_at, run_at

    def encode_time(self, value: datetime) -> float:
        if value.tzinfo is None:
            raise ValueError("times must be timezone-aware (UTC)")
        # Stored times are epoch seconds rounded to milliseconds (julianday's precision), so a
        # time read back through the API compares equal to the stored value.
        return value.timestamp()

    def is_outage(self, error: BaseException) -> bool:
        # locked / busy past the timeout, disk I/O: the same write may succeed later
        return isinstance(error, sqlite3.OperationalError) or super().is_outage(error)

    def _list(self, values: list[str]) -> str:
        return json.dumps(values)

    def worker_beat(self, tx: Tx, **beat: Any) -> int:
        # SQLite's upsert takes no CTE: the silent workers are forgotten by a statement of
        # their own, in the beat's transaction
        tx.run("worker_forget_stale", {"id": beat["id"]})
        return super().worker_beat(tx, **beat)

    # -- batches: a constant number of statements per batch (json_each), each transition row
    # the same as the one-by-one path would append (seq, attempt and at copied from the task
    # row in SQL, so no time makes a round trip through Python).
    def task_insert_many(self, tx: Tx, news: Sequence[NewTask]) -> list[tuple[Row, bool]]:
        text = insert_rows(news) if len(news) > 1 else None
        if text is None:
            return super().task_insert_many(tx, news)
        conn = _conn(tx)
        # each row with its enqueued transition (0027): one actor and one data for all
        first = news[0]
        cur = conn.execute(
            self.sql["task_insert_many"],
            {"rows": text, "actor": first.actor, "data": dumps(first.data)},
        )
        rows = decode_all(cur, cur.fetchall())
        if len(rows) != len(news):  # pragma: no cover - nothing can conflict without a key
            raise RuntimeError(f"inserted {len(rows)} tasks of {len(news)}")
        rows.sort(key=_by_id)
        return [(row, True) for row in rows]

    def _log_claimed(self, tx: Tx, claim: Claim, rows: list[Row]) -> None:
        if not rows:
            return
        # the data text of each row exactly as dumps({"waited": ..., "version": ...}) writes it
        tail = f',"version":{dumps(claim.version)}}}' if claim.version else "}"
        batch = [[r["id"], f'{{"waited":{round(float(r["waited"]), 6)!r}{tail}'] for r in rows]
        _conn(tx).execute(
            self.sql["transition_insert_claimed"], {"rows": dumps(batch), "owner": claim.owner}
        )

    def task_complete_many(
        self,
        tx: Tx,
        owner: str,
        actor: str,
        attempts: Sequence[tuple[int, int]],
        results: Mapping[int, str] | None = None,
    ) -> set[int]:
        if not attempts:
            return set()
        conn = _conn(tx)
        if results:
            # the return values' JSON texts go into the batch as they are (never re-encoded)
            batch = (
                "["
                + ",".join(f"[{int(i)},{int(a)},{results.get(i) or 'null'}]" for i, a in attempts)
                + "]"
            )
        else:
            batch = json.dumps([[int(i), int(a)] for i, a in attempts])
        cur = conn.execute(self.sql["task_complete_many"], {"batch": batch, "owner": owner})
        ids = sorted(r[0] for r in cur)
        if ids:
            conn.execute(
                self.sql["transition_insert_completed"],
                {"ids": json.dumps(ids), "actor": actor},
            )
        return set(ids)


def _conn(tx: Tx) -> sqlite3.Connection:
    assert isinstance(tx, _Tx)
    return tx.conn


def _by_id(row: Row) -> int:
    return int(row["id"])


def _statements(script: str) -> Iterator[str]:
    """Split a migration script into complete statements (triggers contain semicolons)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        if not buffer and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete statement at the end of a migration: {buffer[:80]!r}")
