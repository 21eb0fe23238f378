"""PostgreSQL connections for the driver: transactions over a pooled or caller's connection
(``_Tx``, ``_OwnUse``), row decoding, and the watchdog that closes a connection stalled
mid-query (``read_timeout``) so it fails like a cut one."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row, tuple_row

from ...model.errors import SchemaMissing
from ...model.urls import redact_url
from ..base import (
    TIME_COLUMNS,
    Row,
)
from ..outage import OutageNotice

if TYPE_CHECKING:
    from .driver import PostgresDriver

log = logging.getLogger("jobtrail.store")

#: Seconds a pooled connection may sit idle and still be handed out unchecked.
CHECK_AFTER_IDLE = 1.0
#: Default bound (seconds) on one use of a pooled connection (a transaction, a check): past it
#: the connection is taken for stalled and closed. ``read_timeout=None`` turns it off.
READ_TIMEOUT = 30.0
#: Seconds between round trips on the LISTEN connection (under the read timeout).
LISTEN_PING = 10.0
#: TCP settings added to the connection string unless it sets them: a peer that stops
#: answering is found by the kernel (keepalive probes on an idle connection, unacknowledged
#: data on a busy one) in about ten seconds.
TCP_SETTINGS = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}


#: How long a checkout waits for the pool before it asks ``ConnectAttempts`` whether the pool
#: can connect at all (the first wait), then between two looks.
FIRST_WAIT, NEXT_WAIT = 0.05, 0.25


class ConnectFailed(psycopg.OperationalError):
    """A new connection was refused or rejected: the server's (or the network's) own answer,
    e.g. ``FATAL: database "x" does not exist``, ``password authentication failed``,
    ``Connection refused``."""


class ConnectAttempts:
    """What the pool's latest attempt to open a connection said.

    psycopg_pool opens connections in the background and, when one fails, only logs the
    server's answer and tries again later, while a checkout waits its whole timeout to say
    ``PoolTimeout``. The pool's connections are made through ``connection_class()``, which
    notes each attempt's failure here (a success clears it), so a checkout that finds no
    connection raises the server's own answer at once instead (``_checkout``)."""

    def __init__(self, outage: OutageNotice | None = None) -> None:
        self.failure: str | None = None
        self.outage = outage  # told of each failed attempt (one log line per outage)

    def connection_class(self) -> type[psycopg.Connection[Any]]:
        attempts = self

        class Recorded(psycopg.Connection[Any]):
            @classmethod
            def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
                try:
                    conn = super().connect(conninfo, **kwargs)
                except psycopg.OperationalError as exc:
                    attempts.failure = connect_error_text(exc)
                    if attempts.outage is not None:
                        attempts.outage.failed(attempts.failure)
                    raise
                attempts.failure = None
                return conn

        return Recorded


def connect_error_text(exc: BaseException) -> str:
    """The answer in a failed connect, without psycopg's ``connection failed:`` prefix and
    libpq's hint lines (``Is the server running on that host ...``)."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return text.removeprefix("connection failed: ")


def schema_missing(url: str, exc: BaseException) -> SchemaMissing | None:
    """``exc`` as ``SchemaMissing`` when a statement met no jobtrail table (never migrated,
    or a ``search_path`` that does not see the schema)."""
    if isinstance(exc, psycopg.errors.UndefinedTable):
        lines = str(exc).strip().splitlines()
        return SchemaMissing(redact_url(url), lines[0] if lines else "")
    return None


def _identity(row: dict[str, Any]) -> Row:
    return row


def _decode(row: dict[str, Any]) -> Row:
    for key in TIME_COLUMNS:
        value = row.get(key)
        if isinstance(value, datetime) and value.tzinfo is not UTC:
            row[key] = value.astimezone(UTC)
    return row


def _utc_tuple(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(v.astimezone(UTC) if isinstance(v, datetime) else v for v in row)


class _Holder:
    """A connection kept outside the pool and the names of the statements prepared on it by
    ``direct.py`` (see ``_OwnUse``)."""

    def __init__(self) -> None:
        self.conn: psycopg.Connection[Any] | None = None
        self.prepared: set[bytes] = set()


class _Tx:
    def __init__(
        self,
        conn: psycopg.Connection[Any],
        sql: dict[str, str],
        *,
        utc: bool = True,
        own: _Holder | None = None,
        pipelined: bool = False,
    ) -> None:
        self.conn = conn
        self.sql = sql
        # inside batch_transaction's pipeline: statements whose results nobody reads are sent
        # without waiting for them (notify_queued), and no second pipeline is opened
        self.pipelined = pipelined
        # on a connection kept outside the pool: its holder (the single insert runs there
        # through direct.py)
        self.own = own
        # a single enqueue on its own: its insert may hand the task to an idle worker
        self.handoff = False
        # beside another single enqueue: the insert without its NOTIFY (notify_after.py)
        self.quiet = False
        # wait_for_disk=False: the single insert's own commit skips the flush wait (unflushed.py)
        self.unflushed = False
        # Our own connections run with TimeZone UTC (``_configure``): their times arrive in
        # UTC already. A caller's connection may have any time zone: convert.
        self.decode = _identity if utc else _decode

    def _cursor(self) -> psycopg.Cursor[dict[str, Any]]:
        return self.conn.cursor(row_factory=dict_row)

    def one(self, name: str, params: dict[str, Any] | None = None) -> Row | None:
        with self._cursor() as cur:
            cur.execute(self.sql[name], params or {})
            row = cur.fetchone()
        return self.decode(row) if row is not None else None

    def all(self, name: str, params: dict[str, Any] | None = None) -> list[Row]:
        with self._cursor() as cur:
            cur.execute(self.sql[name], params or {})
            if self.decode is _identity:
                return cur.fetchall()
            return [self.decode(r) for r in cur.fetchall()]

    def first(self, name: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        """The first row as a tuple, times in UTC (no column names: cheaper for the hot
        statements that return a few known columns)."""
        cur = self.conn.cursor(row_factory=tuple_row)  # a caller's connection may make dicts
        row: tuple[Any, ...] | None = cur.execute(self.sql[name], params).fetchone()
        return row if row is None or self.decode is _identity else _utc_tuple(row)

    def run(self, name: str, params: dict[str, Any] | None = None) -> int:
        with self._cursor() as cur:
            cur.execute(self.sql[name], params or {})
            return cur.rowcount

    def many(self, name: str, params: Sequence[dict[str, Any]]) -> None:
        with self._cursor() as cur:
            cur.executemany(self.sql[name], params)


class _OwnUse:
    """A statement on a connection kept outside the pool (``single_statement``): the worker
    pump's, one per thread (``pinned``), or the express one that whoever finds it free takes
    (a single enqueue: a pool checkout and return costs as much CPU as the statement). Guarded
    by the same watchdog and TCP settings as the pool's connections. A context manager class,
    not a generator: on the single enqueue's path the difference is measurable."""

    __slots__ = ("driver", "holder", "lock", "conn")

    def __init__(
        self, driver: PostgresDriver, holder: Any, lock: threading.Lock | None = None
    ) -> None:
        self.driver, self.holder, self.lock = driver, holder, lock
        self.conn: psycopg.Connection[Any] | None = None

    def __enter__(self) -> _Tx:
        try:
            self.conn = self.driver._own_open(self.holder)
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise
        return _Tx(self.conn, self.driver.sql, utc=not self.driver._pooled, own=self.holder)

    def __exit__(self, kind: Any, error: BaseException | None, trace: Any) -> None:
        try:
            assert self.conn is not None
            self.driver._own_close(self.holder, self.conn, error)
        finally:
            if self.lock is not None:
                self.lock.release()


class _Watchdog:
    """Closes the socket of a connection that stays in one use longer than ``limit`` seconds.

    libpq has no read timeout: a query whose answer never comes (a hung server, a stream
    black-holed by a network or proxy that still acknowledges TCP) blocks its thread forever,
    and TCP keepalives cannot see it when the peer's kernel is alive. Each use of a pooled
    connection is registered here (one dict entry under a lock); a thread looks every so often
    and shuts the socket of an overdue one down. The blocked call then fails at once as a
    broken connection (``OperationalError`` → ``StoreUnavailable``), and the pool replaces it.
    Only the file descriptor is touched (libpq's state is only read, to see that the socket is
    still the connection's), and only while the use is still registered (the same lock), so a
    connection already given back is never hit.
    """

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.fired = 0
        self._uses: dict[int, tuple[float, int, psycopg.Connection[Any]]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def enter(self, conn: psycopg.Connection[Any]) -> None:
        fd = conn.pgconn.socket
        with self._lock:
            self._uses[id(conn)] = (time.monotonic() + self.limit, fd, conn)
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(
                    target=self._watch, name="jobtrail-pg-watchdog", daemon=True
                )
                self._thread.start()

    def leave(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            self._uses.pop(id(conn), None)

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=3)

    def _watch(self) -> None:
        interval = min(1.0, max(0.05, self.limit / 4))
        while not self._closed.wait(interval):
            now = time.monotonic()
            with self._lock:
                overdue = [key for key, use in self._uses.items() if use[0] <= now]
                for key in overdue:
                    _, fd, conn = self._uses.pop(key)
                    try:
                        # libpq closes the socket of a connection it found broken: then the
                        # number may belong to another socket already, leave it alone
                        current = conn.pgconn.socket
                    except psycopg.Error:
                        continue
                    if current != fd:
                        continue
                    self.fired += 1
                    log.warning(
                        "a PostgreSQL connection gave no answer for %.1fs; closing it", self.limit
                    )
                    _shutdown(fd)


def _shutdown(fd: int) -> None:
    """Shut a socket down (both ways) through a duplicate of its descriptor: a thread blocked
    reading or writing it wakes up with an error; the owner still closes the descriptor."""
    try:
        dup = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        dup.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        dup.close()
