"""Result waits that hold no request thread and no connection each.

``GET /api/tasks/{id}/result?timeout=30`` once waited in a request thread with a ``LISTEN``
connection of its own: 40 such requests from one read token took all 40 of the server's
request threads and 40 PostgreSQL connections, and every other request (the dashboard, an
enqueue, ``/metrics``) waited ~28 s behind them.

Here a waiting request is a future on the event loop. One thread per server, alive while
anything waits, holds the one wake-up source (``app.watch_finished()``: one ``LISTEN``
connection on PostgreSQL, the data version on SQLite) and, at each wake-up and at least every
second, reads all the waited ids in one transaction (``app.finished_among``), then resolves
the futures of those that finished. A request registers its future before its own first read,
so a task that finishes between the two is never missed.

Each token may have ``per_token`` waits at once (the open, token-less loopback mode counts as
one token); one more is answered 429 with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading

from starlette.concurrency import run_in_threadpool

from ..app import App
from .connections import OncePerMinute

log = logging.getLogger("jobtrail.web")
#: Waits one token may have at once.
PER_TOKEN = 10
#: Seconds between two reads of the waited ids when no wake-up comes.
POLL = 1.0
#: What a 429 asks the client to wait (a wait ends within 30 s; most end sooner).
RETRY_AFTER = 2

_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]


def token_key(authorization: str | None) -> str:
    """What a wait is counted under: a digest of the request's credential (never the token
    itself), or ``open`` without one."""
    if not authorization:
        return "open"
    return hashlib.sha256(authorization.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class TooManyWaits(Exception):
    """The token already has ``per_token`` waits: the answer is 429."""


class ResultWaits:
    """The server's result waits: ``await waits.wait(key, task_id, seconds)``."""

    def __init__(self, app: App, per_token: int = PER_TOKEN, poll: float = POLL) -> None:
        if per_token < 1:
            raise ValueError("result waits per token must be at least 1")
        self.app = app
        self.per_token = per_token
        self.poll = poll
        self._lock = threading.Lock()
        self._waiting: dict[str, list[_Waiter]] = {}
        self._per_key: dict[str, int] = {}
        self._thread: threading.Thread | None = None
        self._reporter = OncePerMinute(log)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._waiting.values())

    async def wait(self, key: str, task_id: str, seconds: float) -> None:
        """Return once ``task_id`` finished (or is unknown) or ``seconds`` passed; raise
        ``TooManyWaits`` when ``key`` has its ``per_token`` waits already."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        waiter = (loop, future)
        with self._lock:
            if self._per_key.get(key, 0) >= self.per_token:
                raise TooManyWaits(key)
            self._per_key[key] = self._per_key.get(key, 0) + 1
            self._waiting.setdefault(task_id, []).append(waiter)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="jobtrail-result-waits", daemon=True
                )
                self._thread.start()
        try:
            # registered first, read second: a finish between the two still wakes the watch
            if task_id in await run_in_threadpool(self.app.finished_among, [task_id]):
                return
            await asyncio.wait_for(asyncio.shield(future), seconds)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                waiters = self._waiting.get(task_id, [])
                if waiter in waiters:
                    waiters.remove(waiter)
                if not waiters:
                    self._waiting.pop(task_id, None)
                left = self._per_key.pop(key, 1) - 1
                if left:
                    self._per_key[key] = left

    def _watch(self) -> None:
        while True:
            try:
                with self.app.watch_finished() as woken:
                    while self._step():
                        woken(self.poll)
                return
            except Exception as exc:  # the store went away: the waits time out meanwhile
                self._reporter.warn(
                    "store", "result waits cannot read the store (%s); retrying", type(exc).__name__
                )
                with self._lock:
                    if not self._waiting:
                        self._thread = None
                        return
                threading.Event().wait(self.poll)

    def _step(self) -> bool:
        """Resolve the waits whose task finished; ``False`` (and the thread forgotten) when
        nothing waits any more."""
        with self._lock:
            ids = list(self._waiting)
            if not ids:
                self._thread = None
                return False
        finished = self.app.finished_among(ids)
        with self._lock:
            done = [w for task_id in finished for w in self._waiting.get(task_id, [])]
        for loop, future in done:
            try:
                loop.call_soon_threadsafe(_resolve, future)
            except RuntimeError:  # its loop has closed: nobody waits for it any more
                pass
        return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
