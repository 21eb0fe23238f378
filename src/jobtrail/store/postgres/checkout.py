"""The PostgreSQL driver's own connections: checked out of the pool and back (a connection
used just now is handed out again without a round trip, any other is checked first, and dead
ones are dropped back to back), the connections kept outside the pool (``_OwnUse``: the
pump's and the express one), and how a failure becomes ``StoreUnavailable``. Mixed into
``PostgresDriver`` (``driver.py``), which sets the fields declared here."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ...model.errors import StoreUnavailable
from ..outage import OutageNotice
from .connection import (
    CHECK_AFTER_IDLE,
    FIRST_WAIT,
    NEXT_WAIT,
    ConnectAttempts,
    ConnectFailed,
    _Watchdog,
    connect_error_text,
    schema_missing,
)
from .pooler import session_mixup

#: The session settings of each connection of ours (not behind a transaction pooler, where a
#: session setting would leak to other clients: docs/postgres.md). Times in UTC; and no JIT
#: compilation: every statement of ours reads a bounded range through an index, and on a big
#: store the planner's estimate of the dead-letter reads (a fallback per dead task it cannot
#: know is not taken) passed jit_above_cost, so each read compiled for 230 ms to run for 30.
SESSION_SETTINGS = "SET TIME ZONE 'UTC'; SET jit = off"


#: Errors that mean a statement did not run on this connection, whatever it was: a prepared
#: statement the server session does not have, or has already (a transaction pooler handed
#: the connection another session), or a connection psycopg had closed. Nothing was stored;
#: another connection may work. Raised as ``StoreUnavailable`` (a caller never sees a driver's
#: own exception), and the connection is dropped.
SESSION_ERRORS: tuple[type[psycopg.Error], ...] = (
    psycopg.errors.InvalidSqlStatementName,
    psycopg.errors.DuplicatePreparedStatement,
    psycopg.InterfaceError,
)
#: What a transaction turns into ``StoreUnavailable``.
UNAVAILABLE: tuple[type[Exception], ...] = (psycopg.OperationalError, PoolTimeout, *SESSION_ERRORS)


class RecentFirstPool(ConnectionPool[psycopg.Connection[Any]]):
    """psycopg_pool's pool, handing out the idle connection returned last instead of the one
    idle longest. With the oldest first, a caller making one call after another cycles
    through every idle connection: each is checked with a round trip once it has been idle
    ``CHECK_AFTER_IDLE`` (with two idle connections, calls 0.6 s apart are all checked), and
    each prepares its statements itself (psycopg prepares one after its fifth use on a
    connection) and keeps its own cold server caches. The longest idle ones stay at the other
    end, where the pool's shrinking closes them."""

    def _get_ready_connection(self, timeout: float | None) -> psycopg.Connection[Any] | None:
        # under the pool's lock (_getconn_unchecked): the deque's right end is the connection
        # returned last; rotated to the left, the base class's popleft takes it
        if self._pool:
            self._pool.rotate(1)
        return super()._get_ready_connection(timeout)


class Checkout:
    url: str
    outage: OutageNotice
    pool: ConnectionPool[psycopg.Connection[Any]]
    connect_timeout: float
    _pooled: bool
    _connect_kwargs: dict[str, Any]
    _last_used: weakref.WeakKeyDictionary[psycopg.Connection[Any], float]
    _broken_at: float
    _attempts: ConnectAttempts
    _bridged: weakref.WeakSet[psycopg.Connection[Any]]
    _watchdog: _Watchdog | None
    _closed: threading.Event
    _listener_lock: threading.Lock
    _own_all: list[psycopg.Connection[Any]]
    _sense: Callable[[psycopg.Connection[Any]], None]
    _mixed_sessions: Callable[[BaseException], StoreUnavailable]

    # -- connections: a connection back from a transaction less than CHECK_AFTER_IDLE ago,
    # with no connection of the pool found broken since, is handed out again without a round
    # trip; any other is checked first (it may not have survived a server restart or a cut).
    # A connection that breaks anyway fails its transaction as StoreUnavailable, is discarded,
    # and the caller's retry gets a checked one.
    def _configure(self, conn: psycopg.Connection[Any], *, generic_plans: bool = False) -> None:
        if not self._pooled:  # is a pooler in between after all? (pooler.py)
            self._enter(conn)
            try:
                self._sense(conn)
            finally:
                self._leave(conn)
        if self._pooled:  # no session settings: times are converted client-side (_Tx)
            conn.prepare_threshold = None
            self._last_used[conn] = time.monotonic()
            return
        self._enter(conn)
        try:
            conn.execute(SESSION_SETTINGS)
            if generic_plans:
                # The connections kept outside the pool run a few fixed statements (the pump's
                # round trip, enqueue's insert), prepared after their fifth use. By default
                # PostgreSQL re-plans a prepared statement each time while it judges the
                # generic plan costlier, which it does once the table holds a million rows:
                # ~0.3 ms of planning, a third of a round trip. Their generic plans read the
                # same indexes (tests/integration/test_claim_plan.py checks).
                conn.execute("SET plan_cache_mode = force_generic_plan")
                # A generic plan is kept until an ANALYZE of the table invalidates it, and the
                # first one is made at the first use, on a new store an empty table, for
                # which a sequential read is cheapest: kept while the table fills, every
                # claim read the whole table (steady arrival fell behind after 35 s). Each
                # statement here has an index to read, whatever the table's size.
                conn.execute("SET enable_seqscan = off")
        finally:
            self._leave(conn)
        self._last_used[conn] = time.monotonic()

    def _enter(self, conn: psycopg.Connection[Any]) -> None:
        if self._watchdog is not None:
            self._watchdog.enter(conn)

    def _leave(self, conn: psycopg.Connection[Any]) -> None:
        if self._watchdog is not None:
            self._watchdog.leave(conn)

    def _fresh(self, conn: psycopg.Connection[Any]) -> bool:
        last = self._last_used.get(conn)
        return (
            last is not None
            and last > self._broken_at
            and time.monotonic() - last < CHECK_AFTER_IDLE
            and not conn.broken
            and not conn.closed
        )

    def _checkout(self, timeout: float | None = None) -> psycopg.Connection[Any]:
        """A working connection from the pool, guarded by the watchdog (the caller gives it
        back with ``_checkin``). Dead idle connections are checked and dropped one after the
        other, without pausing: after a cut they all fail at once, and the pool's
        replacements (fresh connections) come after them."""
        deadline = time.monotonic() + (self.connect_timeout if timeout is None else timeout)
        wait = FIRST_WAIT
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                failure = self._attempts.failure
                if failure is not None:
                    raise ConnectFailed(failure)
                raise PoolTimeout("no working connection before the timeout")
            try:
                conn = self.pool.getconn(timeout=min(remaining, wait))
            except PoolTimeout:
                # none free: when the pool's latest attempt to connect failed, say why now
                # rather than wait the timeout out (a refused or rejected connection does not
                # come right by waiting; the caller's retry asks again) — unless the server
                # answers again while the pool waits out its back-off before its next attempt
                # (seconds after a restart): then a connection of its own for this use
                failure = self._attempts.failure
                if failure is not None:
                    bridge = self._bridge()
                    if bridge is None:
                        raise ConnectFailed(failure) from None
                    return bridge
                wait = NEXT_WAIT
                continue
            if self._fresh(conn) or self._works(conn):
                if self._pooled and conn.prepare_threshold is not None:
                    conn.prepare_threshold = None  # made before a pooler was found
                self._enter(conn)
                return conn
            conn.close()  # whatever failed, the pool must not hand this one out again
            self.pool.putconn(conn)  # the pool replaces it with a new connection

    def _bridge(self) -> psycopg.Connection[Any] | None:
        """A connection opened beside the pool, for one use (``_checkin`` closes it), when the
        pool's latest attempt failed but the server answers now; None when it does not."""
        if self._closed.is_set():
            return None
        try:
            conn = psycopg.connect(self.url, autocommit=True, **self._connect_kwargs)
        except psycopg.OperationalError:
            return None
        try:
            self._configure(conn)
        except psycopg.Error:
            conn.close()
            return None
        self._bridged.add(conn)
        self._enter(conn)
        return conn

    def _works(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether ``conn`` answers a round trip (bounded by the watchdog). One that does not
        makes every connection used before it suspect."""
        self._enter(conn)
        try:
            conn.execute("")
            return True
        except Exception:
            self._broken_at = time.monotonic()
            return False
        finally:
            self._leave(conn)

    def _checkin(self, conn: psycopg.Connection[Any]) -> None:
        self._leave(conn)
        if conn in self._bridged:  # not the pool's: closed after its one use
            self._bridged.discard(conn)
            conn.close()
            return
        self._last_used[conn] = time.monotonic()
        self.pool.putconn(conn)

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            conn = self._checkout()
        except (psycopg.OperationalError, PoolTimeout) as exc:
            self.outage.failed(exc)
            raise
        try:
            with conn:  # as ConnectionPool.connection(): commit or roll back, never close
                yield conn
        except psycopg.OperationalError as exc:
            if conn.closed or conn.broken:  # lost, not refused: the idle ones may be gone too
                self._broken_at = time.monotonic()
                self.outage.failed(exc)
            raise
        except SESSION_ERRORS:
            conn.close()  # its session is not what we think: the pool replaces it
            raise
        else:
            self.outage.answered()
        finally:
            self._checkin(conn)

    def _own_open(self, holder: Any) -> psycopg.Connection[Any]:
        """The connection kept outside the pool in ``holder`` (``.conn``, ``.prepared``; see
        ``_OwnUse``), registered with the watchdog: checked with a round
        trip when not used just now, as pooled ones are, and opened when there is none or it
        failed."""
        conn: psycopg.Connection[Any] | None = getattr(holder, "conn", None)
        try:
            if conn is not None and not self._fresh(conn) and not self._works(conn):
                self._drop_own(holder, conn)
                conn = None
            if conn is None:
                if self._closed.is_set():
                    raise RuntimeError("this App is closed")
                conn = psycopg.connect(self.url, autocommit=True, **self._connect_kwargs)
                self._configure(conn, generic_plans=True)
                holder.conn, holder.prepared = conn, set()
                with self._listener_lock:
                    self._own_all.append(conn)
        except psycopg.OperationalError as exc:
            self._drop_own(holder, conn)
            self.outage.failed(exc)
            if conn is None:  # the connect itself failed: the server's answer, at once
                raise _unavailable(ConnectFailed(connect_error_text(exc))) from exc
            raise _unavailable(exc) from exc
        if self._pooled and conn.prepare_threshold is not None:
            conn.prepare_threshold = None  # made before a pooler was found
        self._enter(conn)
        return conn

    def _own_close(
        self, holder: Any, conn: psycopg.Connection[Any], error: BaseException | None
    ) -> None:
        """The end of a use begun by ``_own_open``; a connection that failed is closed (the
        next use opens another) and a broken one's error raised as ``StoreUnavailable``."""
        self._leave(conn)
        self._last_used[conn] = time.monotonic()
        if error is None:
            self.outage.answered()
            return
        missing = schema_missing(self.url, error)
        if missing is not None:
            raise missing from error
        if session_mixup(error):  # a pooler pooler= did not name (pooler.py)
            self._drop_own(holder, conn)
            raise self._mixed_sessions(error) from error
        if isinstance(error, (psycopg.OperationalError, *SESSION_ERRORS)):
            if conn.broken or conn.closed:
                self.outage.failed(error)
            self._drop_own(holder, conn)
            raise _unavailable(error) from error
        if conn.broken or conn.closed:
            self._drop_own(holder, conn)

    def _drop_own(self, holder: Any, conn: psycopg.Connection[Any] | None) -> None:
        holder.conn = None
        if conn is not None:
            with self._listener_lock:
                if conn in self._own_all:
                    self._own_all.remove(conn)
            try:
                conn.close()
            except psycopg.Error:  # pragma: no cover - already gone
                pass


def _unavailable(exc: BaseException) -> StoreUnavailable:
    if isinstance(exc, ConnectFailed):
        return StoreUnavailable(f"cannot connect to PostgreSQL: {exc}; nothing was stored")
    what = f"{type(exc).__name__}: {_first_line(exc)}"
    if isinstance(exc, PoolTimeout):  # no connection was had: nothing was sent
        return StoreUnavailable(f"PostgreSQL is unreachable: {what}; nothing was stored")
    if isinstance(exc, SESSION_ERRORS):
        return StoreUnavailable(
            f"PostgreSQL could not run the statement on this connection ({what}); nothing "
            "was stored, try again"
        )
    return StoreUnavailable(
        f"PostgreSQL is unreachable: {what}; a write sent before the connection broke may "
        "or may not have been stored",
        stored=None,
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""
