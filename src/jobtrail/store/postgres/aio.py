"""The PostgreSQL driver's async side: psycopg ``AsyncConnection``s from an
``AsyncConnectionPool``, used by the driver's own statements while a bridged call runs
(``store/bridge.py``). ``_GreenConn`` gives an async connection the few synchronous methods
``_Tx`` and the batch insert call (``cursor``, ``execute``, ``pipeline``); each of them awaits
through the bridge, so the event loop keeps running while the query is in flight.

One pool per event loop (psycopg's async pool belongs to the loop it was opened on): a call
from another loop opens another, and the one of a loop that has ended is dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import psycopg
from psycopg import pq
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..bridge import await_
from .checkout import SESSION_SETTINGS
from .connection import _Tx


class _GreenCursor:
    """An ``AsyncCursor`` used with the synchronous cursor's calls (inside a bridged call)."""

    __slots__ = ("_cur",)

    def __init__(self, cur: psycopg.AsyncCursor[Any]) -> None:
        self._cur = cur

    def __enter__(self) -> _GreenCursor:
        return self

    def __exit__(self, *_: object) -> None:
        await_(self._cur.close())

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None
    ) -> _GreenCursor:
        await_(self._cur.execute(query, params, prepare=prepare))
        return self

    def executemany(self, query: Any, params: Any) -> None:
        await_(self._cur.executemany(query, params))

    def fetchone(self) -> Any:
        return await_(self._cur.fetchone())

    def fetchall(self) -> list[Any]:
        return await_(self._cur.fetchall())

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount


class _GreenConn:
    """An ``AsyncConnection`` used with the synchronous connection's calls."""

    __slots__ = ("aconn",)

    def __init__(self, aconn: psycopg.AsyncConnection[Any]) -> None:
        self.aconn = aconn

    def cursor(self, *, row_factory: Any) -> _GreenCursor:
        # psycopg's row factories (dict_row, tuple_row) serve sync and async cursors alike
        return _GreenCursor(self.aconn.cursor(row_factory=row_factory))

    def execute(self, query: Any, params: Any = None) -> None:
        await_(self.aconn.execute(query, params))

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        block = self.aconn.pipeline()
        await_(block.__aenter__())
        try:
            yield
        except BaseException as exc:
            await_(block.__aexit__(type(exc), exc, exc.__traceback__))
            raise
        await_(block.__aexit__(None, None, None))


def _tx(conn: psycopg.AsyncConnection[Any], sql: dict[str, str], *, utc: bool) -> _Tx:
    return _Tx(cast("psycopg.Connection[Any]", _GreenConn(conn)), sql, utc=utc)


class AsyncSide:
    """The async pool of one driver (opened on the first async call of each event loop)."""

    def __init__(
        self,
        url: str,
        *,
        max_size: int,
        timeout: float,
        kwargs: dict[str, Any],
        pooled: bool = False,
    ) -> None:
        self.url, self.max_size, self.timeout, self.kwargs = url, max_size, timeout, kwargs
        # behind a transaction pooler: no session settings, times converted client-side
        self.pooled = pooled
        self.pools: dict[asyncio.AbstractEventLoop, AsyncConnectionPool] = {}
        self.guards: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}
        self.closed = False

    async def pool(self) -> AsyncConnectionPool:
        """This loop's pool, opened when there is none (no wait for its first connection: a
        checkout waits for it, bounded by the connect timeout)."""
        if self.closed:
            raise RuntimeError("this App is closed")
        loop = asyncio.get_running_loop()
        for other in [o for o in self.pools if o is not loop and o.is_closed()]:
            self.guards.pop(other, None)
            _abandon(self.pools.pop(other))
        found = self.pools.get(loop)
        if found is None:
            found = self.pools[loop] = AsyncConnectionPool(
                self.url,
                # no connection opened in the background: each is opened for a checkout that
                # waits for it, so a loop that ends (asyncio.run) never cancels a connect
                # half way (the pool's worker would retry it while the loop shuts down)
                min_size=0,
                max_size=self.max_size,
                open=False,
                timeout=self.timeout,
                kwargs={"autocommit": True, **self.kwargs},
                configure=None if self.pooled else _configure,
                reconnect_timeout=3600.0,
                name="jobtrail-async",
            )
            await found.open(wait=False)
            # psycopg_pool's own tasks survive a cancel (they take it for a failed run and
            # loop again): when the loop ends without aclose() (the end of asyncio.run
            # cancels every task), this task closes the pool first, or the end would hang
            self.guards[loop] = loop.create_task(
                _close_when_cancelled(found), name="jobtrail-async-guard"
            )
        return found

    @contextmanager
    def transaction(self, sql: dict[str, str], *, autocommit: bool = False) -> Iterator[_Tx]:
        """A transaction on a connection of this loop's pool (``autocommit``: no BEGIN, each
        statement commits alone, for the driver's one-statement operations)."""
        pool = await_(self.pool())
        conn = await_(pool.getconn())
        if self.pooled and conn.prepare_threshold is not None:
            conn.prepare_threshold = None  # made before a pooler was found (pooler.py)
        try:
            if autocommit:
                yield _tx(conn, sql, utc=not self.pooled)
            else:
                with _transaction(conn):
                    yield _tx(conn, sql, utc=not self.pooled)
        finally:
            await_(pool.putconn(conn))

    def caller(self, conn: psycopg.AsyncConnection[Any], sql: dict[str, str]) -> Iterator[_Tx]:
        """Inside the caller's open ``AsyncConnection``: a savepoint in its transaction (opened
        first when it has none), so nothing commits until the caller commits."""
        if conn.closed:
            raise ValueError("connection= is a closed psycopg AsyncConnection")
        if not conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE:
            await_(conn.execute("SELECT 1"))
        with _transaction(conn):
            yield _tx(conn, sql, utc=False)

    async def aclose(self) -> None:
        self.closed = True
        loop = asyncio.get_running_loop()
        pools, self.pools = self.pools, {}
        guards, self.guards = self.guards, {}
        for owner, pool in pools.items():
            if owner is loop:
                guard = guards.get(owner)
                if guard is not None:
                    guard.cancel()  # it closes the pool
                    await asyncio.gather(guard, return_exceptions=True)
                await pool.close()
            else:
                _abandon(pool)

    def close(self) -> None:
        """From synchronous code (``App.close``): a pool whose loop is idle is closed on it;
        one whose loop ended has its connections closed directly."""
        self.closed = True
        pools, self.pools = self.pools, {}
        self.guards = {}
        for loop, pool in pools.items():
            if not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(pool.close())
            else:
                _abandon(pool)


@contextmanager
def _transaction(conn: psycopg.AsyncConnection[Any]) -> Iterator[None]:
    block = conn.transaction()
    await_(block.__aenter__())
    try:
        yield
    except BaseException as exc:
        await_(block.__aexit__(type(exc), exc, exc.__traceback__))
        raise
    await_(block.__aexit__(None, None, None))


async def _close_when_cancelled(pool: AsyncConnectionPool) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await pool.close(timeout=1.0)


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.execute(SESSION_SETTINGS)


def _abandon(pool: AsyncConnectionPool) -> None:
    """Close the connections of a pool whose event loop is gone (it cannot be awaited any
    more): their sockets are closed at once, the pool object is left to the collector."""
    idle = getattr(pool, "_pool", ())
    for conn in list(idle):
        try:
            conn.pgconn.finish()
        except Exception:  # noqa: BLE001 - already gone
            pass
    try:
        pool._closed = True  # noqa: SLF001 - nothing may use it again
    except AttributeError:  # pragma: no cover - a psycopg_pool without the attribute
        pass


__all__ = ["AsyncSide", "PoolTimeout"]
