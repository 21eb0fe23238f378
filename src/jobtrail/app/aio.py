"""The parts of ``App`` for coroutines: ``aenqueue`` … ``aclose``, each the sync
method's own code, awaited. Held by ``App``."""

from __future__ import annotations

import asyncio
import builtins
import functools
import time
from collections.abc import Iterable, Mapping
from typing import Any, Unpack

from ..core import suspension
from ..model import validate
from ..model.enqueue_options import EnqueueOptions, refuse_unknown, spelled_out
from ..model.errors import TaskFailed
from ..model.machine import State
from ..model.models import CancelResult, Task, Transition
from .actions import Actions
from .connections import adbapi_connection
from .core import RESULT_POLL, Core, Part, _unfinished
from .enqueue import Enqueue
from .reads import Reads
from .replays import Replays


class Async(Part):
    """The async API, given the sync parts whose methods it awaits."""

    def __init__(
        self, core: Core, enqueue: Enqueue, reads: Reads, actions: Actions, replays: Replays
    ) -> None:
        super().__init__(core)
        self._enqueue = enqueue
        self._reads = reads
        self._actions = actions
        self._replays = replays

    # -- the async API: the sync methods' own code, awaited ------------------------------
    # On PostgreSQL each runs on this event loop's async connections (psycopg AsyncConnection,
    # AsyncConnectionPool) through store/bridge.py: no thread per call, and only the Python
    # work between round trips runs on the loop. On SQLite each runs on a thread of the
    # driver's own (store/offloop.py). Same arguments, same errors, same transactions.
    @spelled_out
    async def aenqueue(
        self,
        kind: str,
        payload: Any = None,
        *,
        connection: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> Task:
        """``enqueue`` from a coroutine. On PostgreSQL ``connection=`` takes an open
        ``psycopg.AsyncConnection``: the task is written in the caller's async transaction
        and exists if and only if the caller commits. (On SQLite a caller's ``sqlite3``
        connection is used on the calling thread, as it must be.) A SQLAlchemy
        ``AsyncConnection`` or ``AsyncSession`` on psycopg 3 is taken as its psycopg
        connection."""
        refuse_unknown(options, "aenqueue")
        connection = await adbapi_connection(connection)
        call = functools.partial(
            self._enqueue.enqueue, kind, payload, connection=connection, **options
        )
        if connection is not None and self._driver.dialect == "sqlite":
            return call()
        return await self._driver.run_async(call)

    async def aenqueue_many(
        self, items: Iterable[Mapping[str, Any]], *, connection: Any = None
    ) -> builtins.list[Task]:
        """``enqueue_many`` from a coroutine (``connection=`` as for ``aenqueue``)."""
        connection = await adbapi_connection(connection)
        items = items if isinstance(items, builtins.list) else builtins.list(items)
        if connection is not None and self._driver.dialect == "sqlite":
            return self._enqueue.enqueue_many(items, connection=connection)
        return await self._driver.run_async(
            self._enqueue.enqueue_many, items, connection=connection
        )

    async def aget(self, task_id: str | int) -> Task:
        """``get`` from a coroutine."""
        return await self._driver.run_async(self._reads.get, task_id)

    async def alist(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        queue: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
        before: str | None = None,
    ) -> builtins.list[Task]:
        """``list`` from a coroutine."""
        return await self._driver.run_async(
            self._reads.list,
            state=state,
            kind=kind,
            queue=queue,
            tenant=tenant,
            limit=limit,
            before=before,
        )

    async def atransitions(self, task_id: str | int) -> builtins.list[Transition]:
        """``transitions`` from a coroutine."""
        return await self._driver.run_async(self._reads.transitions, task_id)

    async def aexplain(self, task_id: str | int, lang: str = "en") -> str:
        """``explain`` from a coroutine."""
        return await self._driver.run_async(self._reads.explain, task_id, lang)

    async def aresult(self, task_id: str | int, *, timeout: float | None = None) -> Any:
        """``result`` from a coroutine: the same answers and errors. While it waits it reads
        the task on the loop's own connections between ``asyncio.sleep`` pauses (20 ms at
        first, growing to ``RESULT_POLL``), so the event loop is never blocked by a wait."""
        if timeout is not None:
            timeout = validate.seconds(timeout, "timeout")
        task = await self._driver.run_async(self._core._terminal_or_none, task_id)
        if task is None and timeout:
            deadline = time.monotonic() + timeout
            pause = 0.02
            while task is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 2, RESULT_POLL)
                task = await self._driver.run_async(self._core._terminal_or_none, task_id)
        if task is None:
            raise _unfinished(task_id, (await self.aget(task_id)).state.value, timeout)
        if task.state is State.SUCCEEDED:
            return task.result
        raise TaskFailed(task)

    async def acancel(
        self, task_id: str | int, *, by: str, note: str | None = None
    ) -> CancelResult:
        """``cancel`` from a coroutine."""
        return await self._driver.run_async(self._actions.cancel, task_id, by=by, note=note)

    async def asend_event(self, key: str, payload: Any = None, *, tenant: str = "") -> int:
        """``send_event`` from a coroutine."""
        return await self._driver.run_async(
            suspension.send_event, self._driver, key, payload, tenant=tenant
        )

    async def areplay(
        self, task_id: str | int, *, by: str, note: str, from_step: str | None = None
    ) -> Task:
        """``replay`` from a coroutine."""
        return await self._driver.run_async(
            self._replays.replay, task_id, by=by, note=note, from_step=from_step
        )

    async def aclose(self) -> None:
        """``close`` from a coroutine: PostgreSQL's async pool is closed on the running loop."""
        await self._driver.aclose()
