"""A blocked event loop is reported (SPEC §17.1): an ``async def`` handler that holds its
worker's loop for more than a second — a ``time.sleep``, a blocking client, CPU work — stalls
every other async handler of that worker, so it is logged (WARNING: task id, kind, how long),
at most once a minute.

Each handler's coroutine is driven through ``Watched``, which times every step the loop runs
(from one ``await`` to the next): two clock reads a step, no thread and no loop callback. The
step that blocks is the handler's own, so the line names it exactly. A step is reported when it
returns (a step that never returns is the lease and timeout rules' business).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Coroutine, Generator
from typing import Any

log = logging.getLogger("jobtrail.worker")

#: A step longer than this (seconds) is a blocked loop.
BLOCKED = 1.0
#: At most one line per this many seconds per worker; the next line counts the ones skipped.
EVERY = 60.0


class LoopWatch:
    """One per worker: the rate limit of its blocked-loop lines."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._skipped = 0

    def blocked(self, task_id: int, kind: str, seconds: float) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last < EVERY:
                self._skipped += 1
                return
            self._last, skipped, self._skipped = now, self._skipped, 0
        more = f" ({skipped} more in the last minute not logged)" if skipped else ""
        log.warning(
            "worker %s: async handler of task %d (%s) blocked the event loop for %.1f s: "
            "the worker's other async handlers waited; use await (asyncio.sleep, an async "
            "client) or asyncio.to_thread for blocking calls%s",
            self.owner,
            task_id,
            kind,
            seconds,
            more,
        )


class Watched:
    """Awaitable wrapper of a handler's coroutine that times each step the loop runs."""

    __slots__ = ("_coro", "_watch", "_task_id", "_kind")

    def __init__(
        self, coro: Coroutine[Any, Any, Any], watch: LoopWatch, task_id: int, kind: str
    ) -> None:
        self._coro = coro
        self._watch = watch
        self._task_id = task_id
        self._kind = kind

    def __await__(self) -> Generator[Any, None, Any]:
        return self

    def __iter__(self) -> Watched:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        started = time.monotonic()
        try:
            return self._coro.send(value)
        finally:
            self._check(started)

    def throw(self, *args: Any) -> Any:
        started = time.monotonic()
        try:
            return self._coro.throw(*args)
        finally:
            self._check(started)

    def close(self) -> None:
        self._coro.close()

    def _check(self, started: float) -> None:
        took = time.monotonic() - started
        if took > BLOCKED:
            self._watch.blocked(self._task_id, self._kind, took)
