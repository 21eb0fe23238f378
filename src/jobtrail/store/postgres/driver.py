"""The PostgreSQL driver (psycopg 3 + psycopg_pool): many workers on many machines.

Claims use ``FOR UPDATE SKIP LOCKED``; every move is one data-modifying statement that also
appends its transition. ``LISTEN/NOTIFY`` wakes idle workers — a wake-up only: polling still
finds due work if a notification is lost. Broken connections (a server restart, a cut network)
are detected on checkout and replaced; errors reaching the server surface as
``StoreUnavailable``. A connection that stalls mid-query (a hung server, a black-holed stream)
is closed after ``read_timeout`` seconds by a watchdog, so it fails like a cut one instead of
holding its thread forever; TCP keepalives and ``tcp_user_timeout`` find a silent peer on an
idle connection too.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import tuple_row
from psycopg_pool import PoolTimeout

from ...model.errors import StoreUnavailable
from .. import queries
from ..base import (
    Claim,
    Driver,
    NewTask,
    Row,
    T,
    check_pooler,
    claimed_rows,
    dumps,
    loads_payload,
)
from ..bridge import in_bridge, run_bridged
from ..outage import quiet_pool_logs, where
from .aio import AsyncSide
from .checkout import UNAVAILABLE, Checkout, RecentFirstPool, _unavailable
from .connection import (
    READ_TIMEOUT,
    TCP_SETTINGS,
    ConnectAttempts,
    _Holder,
    _identity,
    _OwnUse,
    _Tx,
    _utc_tuple,
    _Watchdog,
    schema_missing,
)
from .direct import DirectStatement
from .handoff import HandOff
from .insert import insert_statement, int_array, text_array
from .listen import Channels, Listening, listen_url_for
from .look import DurableLook
from .notify_after import NotifyAfterCommit
from .pooler import PoolerSense, session_mixup
from .unflushed import UNFLUSHED, unflushed_statements

log = logging.getLogger("jobtrail.store")


class PostgresDriver(
    Checkout, Listening, HandOff, NotifyAfterCommit, PoolerSense, DurableLook, Driver
):
    dialect = "postgres"
    logs_in_statement = True
    id_marks = True
    claims_in_one_statement = True

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        connect_timeout: float = 5.0,
        read_timeout: float | None = READ_TIMEOUT,
        pooler: str | None = None,
        listen_url: str | None = None,
        **_: Any,
    ) -> None:
        super().__init__()
        try:
            given = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"bad PostgreSQL URL: {exc}") from None
        self.url = url
        # pooler="transaction" (PgBouncer's transaction mode and the like): every statement
        # may run on another server session, so nothing may live in one (docs/postgres.md)
        self.pooler = check_pooler(pooler)
        self._pooled = self.pooler == "transaction"
        host = given.get("host")
        self.outage.where = where(str(host or ""), given.get("port"), pooler=bool(self.pooler))
        quiet_pool_logs()  # psycopg_pool's check-outs and connection errors: outage.py
        # without pooler=, the first connection is looked at for a pooler (pooler.py): until
        # then this URL is only where LISTEN would go
        self._listen_url = listen_url_for(url, self.pooler, listen_url)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout if read_timeout and read_timeout > 0 else None
        self._watchdog = _Watchdog(self.read_timeout) if self.read_timeout else None
        # the kernel's own bounds, unless the URL sets them: keepalive probes on an idle
        # connection, and how long sent data may stay unacknowledged on a busy one
        tcp: dict[str, Any] = dict(TCP_SETTINGS)
        if pq.version() >= 120000:  # libpq 12 knows tcp_user_timeout (milliseconds)
            tcp["tcp_user_timeout"] = int(1000 * (self.read_timeout or READ_TIMEOUT))
        self._connect_kwargs: dict[str, Any] = {
            "connect_timeout": max(1, int(connect_timeout)),
            **{k: v for k, v in tcp.items() if k not in given},
        }
        if self._pooled:  # no named server-side prepared statements: psycopg's are off
            self._connect_kwargs["prepare_threshold"] = None
        self._last_used: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = (
            weakref.WeakKeyDictionary()
        )
        # connections kept outside the pool (_OwnUse): the worker pump's, one per
        # thread (single_statement(pinned=True)), and one express connection for whoever
        # finds it free (single_statement(); the others use the pool)
        self._pinned = threading.local()
        self._express = _Holder()
        self._direct_insert = DirectStatement("jobtrail_task_insert", self.sql["task_insert"])
        self._direct_handoff = DirectStatement(
            "jobtrail_task_insert_handoff", self.sql["task_insert_handoff"]
        )
        self._init_notify_after()  # before the statement below: it adds task_insert_quiet
        self._direct_quiet = DirectStatement(
            "jobtrail_task_insert_quiet", self.sql["task_insert_quiet"]
        )
        self.sql.update(unflushed_statements(self.sql))  # on notify_after's copy
        self._direct_unflushed = {
            name: DirectStatement("jobtrail_" + name, self.sql[name]) for name in UNFLUSHED.values()
        }
        self._express_lock = threading.Lock()
        self._own_all: list[psycopg.Connection[Any]] = []
        # when a connection of this pool was last found broken: the idle ones are suspect
        self._broken_at = 0.0
        self.max_size = max(2, pool_size)
        self._attempts = ConnectAttempts(self.outage)
        # connections opened beside the pool while it waits out its reconnect back-off
        self._bridged: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()
        self.pool = RecentFirstPool(
            url,
            connection_class=self._attempts.connection_class(),
            min_size=1,
            max_size=self.max_size,
            open=True,
            timeout=connect_timeout,
            kwargs={"autocommit": True, **self._connect_kwargs},
            configure=self._configure,
            # no check= here: the pool's own check loop sleeps (1 s, then 2 s, 4 s, ...)
            # after every connection that fails it, so after a network cut a pool of ten dead
            # idle connections outlives a 5 s checkout; _checkout checks them back to back.
            # no reset= either: with one, psycopg_pool returns every connection through a
            # background task (a thread hand-off per transaction); _checkin notes the time
            reconnect_timeout=3600.0,
            name="jobtrail",
        )
        # the async API's connections (aio.py): an AsyncConnectionPool per event loop
        self._async = AsyncSide(
            url,
            max_size=self.max_size,
            timeout=connect_timeout,
            kwargs=self._connect_kwargs,
            pooled=self._pooled,
        )
        self._wakeup = threading.Event()
        self._listener: threading.Thread | None = None
        self._listener_lock = threading.Lock()
        self._closed = threading.Event()
        self._listening = threading.Event()
        self._heard = threading.Event()
        self._probe: str | None = None
        self._channels: Channels | None = None
        self._init_handoff()
        self._init_pooler_sense(listen_url is not None)

    # -- transactions --------------------------------------------------------------------------
    @contextmanager
    def transaction(self, *, write: bool = True, connection: Any = None) -> Iterator[_Tx]:
        if isinstance(connection, psycopg.AsyncConnection):
            if not in_bridge():
                raise TypeError(
                    "connection= is a psycopg AsyncConnection: use the async API "
                    "(await app.aenqueue(..., connection=conn))"
                )
            try:
                yield from self._async.caller(connection, self.sql)
            except psycopg.OperationalError as exc:
                raise _unavailable(exc) from exc
            return
        if connection is not None:
            yield from self._caller_transaction(connection)
            return
        if in_bridge():
            yield from self._async_transaction()
            return
        try:
            with self._connection() as conn, conn.transaction():
                yield _Tx(conn, self.sql, utc=not self._pooled)
        except UNAVAILABLE as exc:
            if session_mixup(exc):  # a pooler pooler= did not name (pooler.py)
                raise self._mixed_sessions(exc) from exc
            raise _unavailable(exc) from exc
        except psycopg.errors.UndefinedTable as exc:
            raise schema_missing(self.url, exc) or exc from exc
        except psycopg.Error as exc:
            if session_mixup(exc):
                raise self._mixed_sessions(exc) from exc
            raise

    def _async_transaction(self, *, autocommit: bool = False) -> Iterator[_Tx]:
        try:
            with self._async.transaction(self.sql, autocommit=autocommit) as tx:
                yield tx
        except UNAVAILABLE as exc:
            if session_mixup(exc):  # a pooler pooler= did not name (pooler.py)
                raise self._mixed_sessions(exc) from exc
            if isinstance(exc, psycopg.OperationalError | PoolTimeout):
                self.outage.failed(exc)  # the sync side's checkout tells it likewise
            raise _unavailable(exc) from exc
        except psycopg.Error as exc:
            if session_mixup(exc):
                raise self._mixed_sessions(exc) from exc
            raise
        self.outage.answered()

    async def run_async(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        # on this loop's async connections, through the bridge: no thread; their pool is made
        # once the look at start (pooler.py) has been made, on a connection of the sync pool
        if not self._sensed.is_set():
            await asyncio.to_thread(self._settle_pooler)
        await self._async.pool()
        return await run_bridged(fn, *args, **kwargs)

    def batch_transaction(self, *, connection: Any = None) -> AbstractContextManager[_Tx]:
        if connection is not None or in_bridge():
            return self.transaction(connection=connection)
        return self._pipelined_transaction()

    @contextmanager
    def _pipelined_transaction(self) -> Iterator[_Tx]:
        """BEGIN, the statements and COMMIT as one pipeline on a pooled connection: the client
        waits only for the results it reads and, at the end, for the COMMIT. An explicit
        BEGIN, not the pipeline's implicit transaction, which a sync (psycopg makes one for a
        nested pipeline, for instance) would commit half done. On an error the block is left
        open (aborted, after a server-side one); ``_connection`` rolls it back."""
        with self._pooled_statement() as statement:
            conn = statement.conn
            with conn.pipeline():
                conn.execute("BEGIN")
                # the batch statement is prepared on its first use (task_insert_batches):
                # planned once, not per execution
                conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
                yield _Tx(conn, self.sql, utc=not self._pooled, pipelined=True)
                conn.execute("COMMIT")

    def single_statement(self, *, pinned: bool = False) -> AbstractContextManager[_Tx]:
        # The pool's connections are autocommit: outside conn.transaction() each statement
        # commits on its own (synchronous_commit) before its result comes back.
        if in_bridge():
            return contextmanager(self._async_transaction)(autocommit=True)
        if pinned:
            return _OwnUse(self, self._pinned)
        if self._express_lock.acquire(blocking=False):
            return _OwnUse(self, self._express, self._express_lock)
        return self._pooled_statement()

    @contextmanager
    def _pooled_statement(self) -> Iterator[_Tx]:
        try:
            with self._connection() as conn:
                yield _Tx(conn, self.sql, utc=not self._pooled)
        except UNAVAILABLE as exc:
            if session_mixup(exc):  # a pooler pooler= did not name (pooler.py)
                raise self._mixed_sessions(exc) from exc
            raise _unavailable(exc) from exc
        except psycopg.errors.UndefinedTable as exc:
            raise schema_missing(self.url, exc) or exc from exc
        except psycopg.Error as exc:
            if session_mixup(exc):
                raise self._mixed_sessions(exc) from exc
            raise

    def _caller_transaction(self, conn: Any) -> Iterator[_Tx]:
        if not isinstance(conn, psycopg.Connection):
            raise TypeError(
                "connection= must be an open psycopg (3) Connection (or, with the async API, "
                f"an AsyncConnection) for a PostgreSQL App, got {type(conn).__name__}"
            )
        if not conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE:
            # Open the caller's own transaction first, so that the block below is a savepoint
            # inside it and nothing is committed until the caller commits.
            conn.execute("SELECT 1")
        try:
            with conn.transaction():
                yield _Tx(conn, self.sql, utc=False)
        except psycopg.errors.UndefinedTable as exc:
            raise schema_missing(self.url, exc) or exc from exc

    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self.transaction() as tx:
            conn = tx.conn
            self._leave(conn)  # a migration may take long: no read timeout
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

    async def aclose(self) -> None:
        await self._async.aclose()
        self.close()

    def close(self) -> None:
        self._stop_notifier()  # its last wake-ups, while the pool is open
        self._async.close()
        self._closed.set()
        self._wakeup.set()
        if self._listener is not None and self._listener.is_alive():
            try:  # wake the listener out of its wait so it sees the close at once
                with self.pool.connection(timeout=1.0) as conn:
                    conn.execute("SELECT pg_notify(jobtrail_channel('queued'), '')")
            except (psycopg.Error, PoolTimeout):
                pass
        self.pool.close()
        with self._listener_lock:
            own, self._own_all = self._own_all, []
        for conn in own:
            try:
                conn.close()
            except psycopg.Error:  # pragma: no cover - already gone
                pass
        if self._watchdog is not None:
            self._watchdog.close()
        if self._listener is not None:
            self._listener.join(timeout=3)

    # -- wake-ups ------------------------------------------------------------------------------
    def notify_queued(self, tx: Any, queue: str) -> None:
        if tx.pipelined:  # sent, not waited for: the COMMIT's result reports any error
            tx.conn.execute(self.sql["notify_queued"], {"queue": queue})
        else:
            tx.one("notify_queued", {"queue": queue})

    def skip_flush_wait(self, tx: Any) -> None:
        # this transaction only, so behind a transaction pooler too (unflushed.sql)
        if tx.pipelined:  # sent, not waited for: the COMMIT's result reports any error
            tx.conn.execute(self.sql["skip_flush_wait"])
        else:
            tx.one("skip_flush_wait")

    def is_outage(self, error: BaseException) -> bool:
        # serialization failures and deadlocks are worth the same write again
        return isinstance(
            error, (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)
        ) or super().is_outage(error)

    def _inserted(self, tx: Any, params: dict[str, Any]) -> tuple[int, datetime, datetime] | None:
        # the insert returns only what the database generated (RETURNING * and its decoding
        # cost more than the insert itself); on a connection of our own, through libpq
        # directly (postgres/direct.py: a fifth of psycopg's client CPU). A single enqueue on
        # its own may hand the task to an idle worker (task_insert_handoff, handoff.py).
        name, direct = "task_insert", self._direct_insert
        if tx.handoff:
            name, direct = "task_insert_handoff", self._direct_handoff
        elif tx.quiet:  # its wake-up follows its commit (notify_after.py)
            name, direct = "task_insert_quiet", self._direct_quiet
        if tx.unflushed:  # its commit skips the flush wait (unflushed.py)
            name = UNFLUSHED[name]
            direct = self._direct_unflushed[name]
        values = None
        if tx.own is not None:
            try:
                values = direct.values(params)
            except ValueError:  # text libpq cannot carry: psycopg's path names the problem
                pass
        if values is None:
            got = tx.first(name, params)
        else:
            # behind a transaction pooler: an unnamed statement (PQexecParams), one round trip
            prepared = None if self._pooled else tx.own.prepared
            got = direct.first(tx.conn, prepared, values)
        if got is None:
            return None
        if tx.handoff:
            self._saw_idle(bool(got[4]))
        return got[0], got[1], got[2]

    def task_insert_alone(self, new: NewTask) -> tuple[Row, bool]:
        # one round trip: insert, transition and NOTIFY in one autocommit statement (or the
        # hand-off to an idle worker: handoff.py); beside another single enqueue of ours, the
        # insert alone, its NOTIFY after the commit (notify_after.py: commits share flushes)
        # (not while the last look found idle workers: an enqueue may hand its task to one)
        quiet = self._express_lock.locked() and not in_bridge() and not self._idle_seen
        try:
            row, created = self._insert_alone(new, quiet)
        except StoreUnavailable as exc:
            if not session_mixup(exc.__cause__):
                raise
            # the statement met another server session before it ran (pooler.py): once
            # more, now without prepared statements
            row, created = self._insert_alone(new, quiet)
        if quiet and created:
            self._notify_after_commit(new.queue)
        return row, created

    def task_insert_unflushed(self, new: NewTask) -> tuple[Row, bool]:
        # one round trip, as task_insert_alone: the statement itself turns the flush wait of
        # its own (autocommit) transaction off (unflushed.py); with its NOTIFY inside (no
        # notify_after: a commit that does not wait for its flush holds NOTIFY's lock briefly)
        try:
            return self._insert_alone(new, quiet=False, unflushed=True)
        except StoreUnavailable as exc:
            if not session_mixup(exc.__cause__):
                raise
            # the statement met another server session before it ran (pooler.py)
            return self._insert_alone(new, quiet=False, unflushed=True)

    def _insert_alone(
        self, new: NewTask, quiet: bool, *, unflushed: bool = False
    ) -> tuple[Row, bool]:
        with self.single_statement() as tx:
            tx.quiet = quiet
            tx.unflushed = unflushed
            tx.handoff = not quiet and self._may_hand_off()
            return self.task_insert(tx, new)

    # pipelined: the server inserts one batch while the client validates the next
    insert_batch = 100

    def task_insert_batches(
        self,
        tx: Any,
        batches: Iterable[Sequence[NewTask]],
        made: Callable[[NewTask, int, datetime, datetime, Any], T],
    ) -> list[T]:
        # psycopg's pipeline mode: each batch's statement is sent without waiting for the one
        # before (the next batch is validated meanwhile); the results are read after the last
        # is sent, and ``made`` runs on one batch while the server still inserts the next (all
        # in tx: an error anywhere rolls back all)
        conn: psycopg.Connection[Any] = tx.conn
        sent: list[tuple[Sequence[NewTask], psycopg.Cursor[Any], bool]] = []
        out: list[T] = []
        # on our own connections: prepared at once (the first call would otherwise plan ten
        # times), not on a caller's (its prepared statements are its business)
        # (never behind a transaction pooler: another session would not know the name)
        prepare = True if tx.pipelined and not self._pooled else None
        with nullcontext() if tx.pipelined else conn.pipeline():
            for news in batches:
                cur = conn.cursor(row_factory=tuple_row)  # a caller's may make dicts
                name, params = self._insert_statement(news)
                cur.execute(self.sql[name], params, prepare=prepare)
                sent.append((news, cur, name == "task_insert_uniform"))
            for news, cur, uniform in sent:
                rows: list[tuple[Any, ...]] = cur.fetchall()
                if tx.decode is not _identity:
                    rows = [_utc_tuple(r) for r in rows]
                if uniform:  # one row: the ids, the creation and due time they share
                    ids, created_at, run_at = rows[0]
                    rows = [(i, created_at, run_at) for i in ids]
                if len(rows) != len(news):  # pragma: no cover - nothing can conflict
                    raise RuntimeError(f"inserted {len(rows)} tasks of {len(news)}")
                # the ids ascend in input order (the statement inserts ORDER BY position)
                out.extend(
                    made(n, r[0], r[1], r[2], loads_payload(n.payload_json))
                    for n, r in zip(news, rows, strict=True)
                )
        return out

    def _insert_statement(self, news: Sequence[NewTask]) -> tuple[str, dict[str, Any]]:
        return insert_statement(news, self.encode_time)

    # -- batched moves -------------------------------------------------------------------------
    def task_complete_many(
        self,
        tx: Any,
        owner: str,
        actor: str,
        attempts: Sequence[tuple[int, int]],
        results: Mapping[int, str] | None = None,
    ) -> set[int]:
        if not attempts:
            return set()
        rows = tx.all(
            "task_complete_many",
            {
                "ids": int_array(a[0] for a in attempts),
                "attempts": int_array(a[1] for a in attempts),
                "results": _results_array(attempts, results),
                "owner": owner,
                "actor": actor,
            },
        )
        return {int(r["id"]) for r in rows}

    def task_complete_and_claim(
        self,
        tx: Any,
        attempts: Sequence[tuple[int, int]],
        claim: Claim,
        queue: str,
        limit: int,
        results: Mapping[int, str] | None = None,
    ) -> tuple[set[int], list[Row]]:
        """``task_complete_many`` for ``attempts`` held by ``claim.owner`` plus
        ``task_claim_unlimited`` of up to ``limit`` tasks from ``queue``, in one statement
        (one round trip, one commit; may run in ``single_statement``)."""
        params = {
            "ids": int_array(a[0] for a in attempts),
            "attempts": int_array(a[1] for a in attempts),
            "results": _results_array(attempts, results),
            "owner": claim.owner,
            "actor": claim.owner,
            "queue": queue,
            "mode": "unlimited",
            "kinds": text_array(tuple(claim.kinds)),
            "limit": limit,
            "data": dumps({"version": claim.version} if claim.version else {}),
            "version": claim.version or None,
        }
        # a fair claim that follows runs after the completions have committed
        first, rows = self._claim_by_gate(tx, queue, params, "task_complete_and_claim")
        # one row carries the completed ids (the statement numbers its rows)
        completed = next((r["completed_ids"] for r in first if r["completed_ids"]), None)
        moved = {int(i) for i in completed} if completed else set()
        return moved, claimed_rows(rows)

    # -- encoding ------------------------------------------------------------------------------
    def encode_time(self, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("times must be timezone-aware (UTC)")
        return value


def _results_array(attempts: Sequence[tuple[int, int]], results: Mapping[int, str] | None) -> str:
    """The JSON array of the return values of ``attempts``, in their order (``null`` for none):
    the batch completion's ``results`` parameter, built from the JSON texts without decoding
    them."""
    if not results:
        return "[]"
    return "[" + ",".join(results.get(a[0]) or "null" for a in attempts) + "]"
