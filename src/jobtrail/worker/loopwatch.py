"""A blocked event loop is reported (docs/operations.md): an ``async def`` handler that holds its
worker's loop for more than a second — a ``time.sleep``, a blocking client, CPU work — stalls
every other async handler of that worker, so it is logged (WARNING: task id, kind, how long),
at most once a minute.

Each handler's coroutine is driven through ``Watched``, which times every step the loop runs
(from one ``await`` to the next): two clock reads a step and no loop callback. The step that
blocks is the handler's own, so the line names it exactly, with how long it held the loop, when
it returns. A step that does not return (a call that hangs) is reported by a watchdog thread
once it has held the loop for ``HUNG`` seconds, as still blocking; either way one line per
step, and all of them share the once-a-minute limit.
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
#: A step still running after this many seconds is reported before it returns.
HUNG = 60.0
#: How often the watchdog looks (seconds).
LOOK = 1.0


class LoopWatch:
    """One per worker: the rate limit of its blocked-loop lines."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._skipped = 0
        #: the step the loop runs now: (task id, kind, started), set by ``Watched``
        self.step: tuple[int, str, float] | None = None
        self._reported: tuple[int, str, float] | None = None  # a hung step already logged

    def start(self, done: threading.Event) -> None:
        """The watchdog of hung steps, until ``done`` (the worker's end) is set."""
        threading.Thread(
            target=self._watch, args=(done,), name="jobtrail-loopwatch", daemon=True
        ).start()

    def _watch(self, done: threading.Event) -> None:
        while not done.wait(LOOK):
            step = self.step
            if step is not None and step is not self._reported:
                held = time.monotonic() - step[2]
                if held >= HUNG:
                    self._reported = step
                    self.blocked(step[0], step[1], held, still=True)

    def ended(self, step: tuple[int, str, float], took: float) -> None:
        """A step returned after ``took`` seconds (reported unless the watchdog did)."""
        if took > BLOCKED and step is not self._reported:
            self.blocked(step[0], step[1], took)

    def blocked(self, task_id: int, kind: str, seconds: float, *, still: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last < EVERY:
                self._skipped += 1
                return
            self._last, skipped, self._skipped = now, self._skipped, 0
        more = f" ({skipped} more in the last minute not logged)" if skipped else ""
        log.warning(
            "worker %s: async handler of task %d (%s) %s the event loop for %.1f s%s: "
            "the worker's other async handlers wait%s; use await (asyncio.sleep, an async "
            "client) or asyncio.to_thread for blocking calls%s",
            self.owner,
            task_id,
            kind,
            "has blocked" if still else "blocked",
            seconds,
            " and still does" if still else "",
            "" if still else "ed",
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
        step = self._watch.step = (self._task_id, self._kind, time.monotonic())
        try:
            return self._coro.send(value)
        finally:
            self._watch.step = None
            self._watch.ended(step, time.monotonic() - step[2])

    def throw(self, *args: Any) -> Any:
        step = self._watch.step = (self._task_id, self._kind, time.monotonic())
        try:
            return self._coro.throw(*args)
        finally:
            self._watch.step = None
            self._watch.ended(step, time.monotonic() - step[2])

    def close(self) -> None:
        self._coro.close()
