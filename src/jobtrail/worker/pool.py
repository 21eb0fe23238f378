"""The worker's handler threads (``_HandlerPool``), the plain successes waiting for the pump
(``_Completions``), and the errors an attempt ends with when it cannot run to its outcome."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from ..core.context import Attempt
from ..model.machine import ErrorCategory


def _batchable(attempt: Attempt) -> bool:
    """A plain success (no receipt, no outbox messages, not a workflow child): the common case,
    written together with other plain successes and the next claim by the pump."""
    return attempt.pending_receipt is None and not attempt.outbox and attempt.task.parent_id is None


log = logging.getLogger("jobtrail.worker")


class _Completions:
    """Plain successes waiting for the pump's next round trip. Handler threads do not wait for
    the commit: the attempt's slot stays taken until the pump has committed it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[Attempt] = []
        self._open = False

    def open(self) -> None:
        with self._lock:
            self._open = True

    def offer(self, attempt: Attempt) -> bool | None:
        """Queue a success: True when it is the first waiting (wake the pump), False when
        others wait already, None once the pump has stopped (the caller writes it itself)."""
        with self._lock:
            if not self._open:
                return None
            self._items.append(attempt)
            return len(self._items) == 1

    def take(self) -> list[Attempt]:
        with self._lock:
            items, self._items = self._items, []
        return items

    def waiting(self) -> bool:
        return bool(self._items)

    def close(self) -> list[Attempt]:
        """Stop taking successes; returns those still waiting (to be written alone)."""
        with self._lock:
            self._open = False
            items, self._items = self._items, []
        return items


class _HandlerPool:
    """``size`` threads for plain handlers, reused (starting a thread per task costs more than
    a no-op task), taking attempts in claim order from one queue — so at most ``size``
    handlers run at once, and attempts claimed ahead wait in the queue. A handler abandoned at
    its timeout keeps its thread; ``replace`` starts another in its place, and the abandoned
    thread ends when its handler returns. Threads start on first use. A thread is named
    ``jobtrail-task-<id>`` while it runs that task."""

    def __init__(self, run: Callable[[Attempt], bool], size: int) -> None:
        self._run = run
        self._size = size
        self._queue: queue.SimpleQueue[Attempt | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._live = 0
        self._closed = False

    def submit(self, attempt: Attempt) -> None:
        with self._lock:
            spawn = self._live < self._size and not self._closed
            if spawn:
                self._live += 1
        if spawn:
            self._spawn()
        self._queue.put(attempt)

    def replace(self) -> None:
        """A live thread was abandoned: start one more to keep ``size`` serving."""
        with self._lock:
            if self._closed:
                return
        self._spawn()

    def _spawn(self) -> None:
        threading.Thread(target=self._serve, daemon=True, name="jobtrail-handler").start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            live, self._live = self._live, 0
        for _ in range(live):
            self._queue.put(None)

    def _serve(self) -> None:
        me = threading.current_thread()
        while True:
            item = self._queue.get()
            if item is None:
                return
            me.name = f"jobtrail-task-{item.task_id}"
            keep = True
            try:
                keep = self._run(item)
            except Exception:  # pragma: no cover - _run classifies every handler outcome
                log.exception("task %s: the handler thread failed", item.task_id)
            finally:
                me.name = "jobtrail-handler"
            if not keep:
                return  # abandoned at the timeout; its replacement serves on


class OutcomeNotRecorded(Exception):  # noqa: N818
    """The store refused to record an attempt's outcome (not an outage); recorded as its
    failure instead."""


def _attempt_timeout(attempt: Attempt) -> TimeoutError:
    error = TimeoutError(f"attempt {attempt.number} ran past its {attempt.spec.timeout}s timeout")
    error.jobtrail_category = ErrorCategory.TIMEOUT  # type: ignore[attr-defined]
    return error
