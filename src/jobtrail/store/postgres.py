"""The PostgreSQL driver (psycopg 3 + psycopg_pool): many workers on many machines.

Claims use ``FOR UPDATE SKIP LOCKED``; every move is one data-modifying statement that also
appends its transition. ``LISTEN/NOTIFY`` wakes idle workers — a wake-up only: polling still
finds due work if a notification is lost. Broken connections (a server restart) are detected
on checkout and replaced; errors reaching the server surface as ``StoreUnavailable``.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import StoreUnavailable
from . import queries
from .base import TIME_COLUMNS, Claim, Driver, NewTask, Row, dumps

log = logging.getLogger("jobtrail.store")

CHANNEL = "jobtrail_queued"
#: Seconds a pooled connection may sit idle and still be handed out unchecked.
CHECK_AFTER_IDLE = 1.0


def _decode(row: dict[str, Any]) -> Row:
    for key in TIME_COLUMNS.intersection(row):
        value = row[key]
        if isinstance(value, datetime):
            row[key] = value.astimezone(UTC)
    return row


class _Tx:
    def __init__(self, conn: psycopg.Connection[Any], sql: dict[str, str]) -> None:
        self.conn = conn
        self.sql = sql

    def _cursor(self) -> psycopg.Cursor[dict[str, Any]]:
        return self.conn.cursor(row_factory=dict_row)

    def one(self, name: str, params: dict[str, Any] | None = None) -> Row | None:
        with self._cursor() as cur:
            cur.execute(self.sql[name], params or {})
            row = cur.fetchone()
        return _decode(row) if row is not None else None

    def all(self, name: str, params: dict[str, Any] | None = None) -> list[Row]:
        with self._cursor() as cur:
            cur.execute(self.sql[name], params or {})
            return [_decode(r) for r in cur.fetchall()]

    def run(self, name: str, params: dict[str, Any] | None = None) -> int:
        with self._cursor() as cur:
            cur.execute(self.sql[name], params or {})
            return cur.rowcount

    def many(self, name: str, params: Sequence[dict[str, Any]]) -> None:
        with self._cursor() as cur:
            cur.executemany(self.sql[name], params)


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.execute("SET TIME ZONE 'UTC'")


class PostgresDriver(Driver):
    dialect = "postgres"
    logs_in_statement = True
    claims_in_one_statement = True

    def __init__(
        self, url: str, *, pool_size: int = 10, connect_timeout: float = 5.0, **_: Any
    ) -> None:
        super().__init__()
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"bad PostgreSQL URL: {exc}") from None
        self.url = url
        self.connect_timeout = connect_timeout
        self._last_used: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = (
            weakref.WeakKeyDictionary()
        )
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max(2, pool_size),
            open=True,
            timeout=connect_timeout,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(connect_timeout))},
            configure=_configure,
            check=self._check,
            reset=self._returned,
            reconnect_timeout=3600.0,
            name="jobtrail",
        )
        self._wakeup = threading.Event()
        self._listener: threading.Thread | None = None
        self._listener_lock = threading.Lock()
        self._closed = threading.Event()

    # -- connection checks: a connection back from a transaction less than CHECK_AFTER_IDLE
    # ago is handed out again without a round trip; one idle longer is checked first (it may
    # not have survived a server restart). A connection that breaks anyway fails its
    # transaction as StoreUnavailable, is discarded, and the caller's retry gets a new one.
    def _returned(self, conn: psycopg.Connection[Any]) -> None:
        self._last_used[conn] = time.monotonic()

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        last = self._last_used.get(conn)
        if (
            last is not None
            and time.monotonic() - last < CHECK_AFTER_IDLE
            and not conn.broken
            and not conn.closed
        ):
            return
        ConnectionPool.check_connection(conn)

    # -- transactions --------------------------------------------------------------------------
    @contextmanager
    def transaction(self, *, write: bool = True, connection: Any = None) -> Iterator[_Tx]:
        if connection is not None:
            yield from self._caller_transaction(connection)
            return
        try:
            with self.pool.connection() as conn, conn.transaction():
                yield _Tx(conn, self.sql)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise StoreUnavailable(
                f"PostgreSQL is unreachable: {type(exc).__name__}: {_first_line(exc)}"
            ) from exc

    @contextmanager
    def single_statement(self) -> Iterator[_Tx]:
        # The pool's connections are autocommit: outside conn.transaction() each statement
        # commits on its own (synchronous_commit) before its result comes back.
        try:
            with self.pool.connection() as conn:
                yield _Tx(conn, self.sql)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise StoreUnavailable(
                f"PostgreSQL is unreachable: {type(exc).__name__}: {_first_line(exc)}"
            ) from exc

    def _caller_transaction(self, conn: Any) -> Iterator[_Tx]:
        if not isinstance(conn, psycopg.Connection):
            raise TypeError(
                "connection= must be an open psycopg (3) Connection for a "
                f"PostgreSQL App, got {type(conn).__name__}"
            )
        if not conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE:
            # Open the caller's own transaction first, so that the block below is a savepoint
            # inside it and nothing is committed until the caller commits.
            conn.execute("SELECT 1")
        with conn.transaction():
            yield _Tx(conn, self.sql)

    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self.transaction() as tx:
            conn = tx.conn
            # One migrator at a time per schema; the others wait, then find nothing to do.
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('jobtrail.migrate:' || current_schema()))"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS jobtrail_migrations (version INTEGER "
                "PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL "
                "DEFAULT now())"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM jobtrail_migrations")}
            for version, name, text in queries.migrations(self.dialect):
                if version in done:
                    continue
                conn.execute(text.encode("utf-8"))
                conn.execute(
                    "INSERT INTO jobtrail_migrations (version, name) VALUES (%s, %s)",
                    (version, name),
                )
                applied.append(version)
        return applied

    def close(self) -> None:
        self._closed.set()
        self._wakeup.set()
        if self._listener is not None and self._listener.is_alive():
            try:  # wake the listener out of its wait so it sees the close at once
                with self.pool.connection(timeout=1.0) as conn:
                    conn.execute("SELECT pg_notify(%s, '')", (CHANNEL,))
            except (psycopg.Error, PoolTimeout):
                pass
        self.pool.close()
        if self._listener is not None:
            self._listener.join(timeout=3)

    # -- wake-ups ------------------------------------------------------------------------------
    def notify_queued(self, tx: Any, queue: str) -> None:
        tx.one("notify_queued", {"queue": queue})

    def wake(self) -> None:
        self._wakeup.set()

    def wait_for_work(self, timeout: float) -> bool:
        self._ensure_listener()
        woke = self._wakeup.wait(timeout)
        self._wakeup.clear()
        return woke

    def _ensure_listener(self) -> None:
        with self._listener_lock:
            if self._listener is None and not self._closed.is_set():
                self._listener = threading.Thread(
                    target=self._listen, name="jobtrail-listen", daemon=True
                )
                self._listener.start()

    def _listen(self) -> None:
        delay = 0.2
        while not self._closed.is_set():
            try:
                with psycopg.connect(
                    self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout))
                ) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    delay = 0.2
                    self._wakeup.set()  # we may have missed notifications while away
                    while not self._closed.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self._wakeup.set()
            except psycopg.Error as exc:
                if self._closed.is_set():
                    return
                log.warning(
                    "LISTEN connection lost (%s); reconnecting in %.1fs", type(exc).__name__, delay
                )
                self._closed.wait(delay)
                delay = min(5.0, delay * 2)

    def is_outage(self, error: BaseException) -> bool:
        # serialization failures and deadlocks are worth the same write again
        return isinstance(
            error, (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)
        ) or super().is_outage(error)

    def task_insert_alone(self, new: NewTask) -> tuple[Row, bool]:
        # one round trip: insert, transition and NOTIFY in one autocommit statement
        with self.single_statement() as tx:
            return self._task_insert(tx, new, "task_insert")

    def task_insert_many(self, tx: Any, news: Sequence[NewTask]) -> list[tuple[Row, bool]]:
        first = news[0] if news else None
        if (
            first is None
            or len(news) == 1
            or any(
                n.idempotency_key is not None
                or n.parent_id is not None
                or n.actor != first.actor
                or n.data != first.data
                for n in news
            )
        ):
            return super().task_insert_many(tx, news)
        rows = tx.all(
            "task_insert_many",
            {
                "rows": dumps(
                    [
                        [
                            n.kind,
                            n.queue,
                            n.tenant,
                            n.state.value,
                            n.payload_json,
                            n.payload_hash,
                            n.priority,
                            n.max_attempts,
                            n.lease_seconds,
                            n.reentrant,
                            None if n.run_at is None else self.encode_time(n.run_at).isoformat(),
                            n.delay,
                        ]
                        for n in news
                    ]
                ),
                "actor": first.actor,
                "data": dumps(first.data),
            },
        )
        if len(rows) != len(news):  # pragma: no cover - nothing can conflict without a key
            raise RuntimeError(f"inserted {len(rows)} tasks of {len(news)}")
        return [(row, True) for row in rows]

    # -- batched moves -------------------------------------------------------------------------
    def task_complete_many(
        self, tx: Any, owner: str, actor: str, attempts: Sequence[tuple[int, int]]
    ) -> set[int]:
        if not attempts:
            return set()
        rows = tx.all(
            "task_complete_many",
            {
                "ids": [a[0] for a in attempts],
                "attempts": [a[1] for a in attempts],
                "owner": owner,
                "actor": actor,
            },
        )
        return {int(r["id"]) for r in rows}

    def task_complete_and_claim(
        self, tx: Any, attempts: Sequence[tuple[int, int]], claim: Claim, queue: str, limit: int
    ) -> tuple[set[int], list[Row]]:
        """``task_complete_many`` for ``attempts`` held by ``claim.owner`` plus
        ``task_claim_unlimited`` of up to ``limit`` tasks from ``queue``, in one statement
        (one round trip, one commit; may run in ``single_statement``)."""
        rows = tx.all(
            "task_complete_and_claim",
            {
                "ids": [a[0] for a in attempts],
                "attempts": [a[1] for a in attempts],
                "owner": claim.owner,
                "queue": queue,
                "kinds": claim.kinds,
                "limit": limit,
                "data": dumps({"version": claim.version} if claim.version else {}),
            },
        )
        completed = rows[0]["completed_ids"] if rows else None
        moved = {int(i) for i in completed} if completed else set()
        claimed = [r for r in rows if r["id"] is not None]
        for row in claimed:
            del row["completed_ids"]
        return moved, claimed

    # -- encoding ------------------------------------------------------------------------------
    def encode_time(self, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("times must be timezone-aware (UTC)")
        return value


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""
