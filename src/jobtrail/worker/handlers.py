"""Running handlers: plain ones on the pool's threads, ``async def`` ones on one event loop
thread; each attempt's ``Context`` is built here."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from ..core.context import Attempt, Context
from ..core.results import encode_result
from ..model.models import task_from_row
from .outcomes import Outcomes
from .pool import _attempt_timeout

log = logging.getLogger("jobtrail.worker")


class Handlers(Outcomes):
    def _attempt(self, row: dict[str, Any]) -> Attempt:
        task = task_from_row(row)
        attempt = Attempt(
            task=task,
            spec=self.collab.kinds[task.kind],
            owner=self.owner,
            number=row["attempts"],
            lease_seconds=float(row["lease_seconds"]),
        )
        with self._running_lock:
            self.running[attempt.task_id] = attempt
        return attempt

    def _start(self, attempt: Attempt) -> None:
        if attempt.spec.is_async:
            loop = self._ensure_loop()
            asyncio.run_coroutine_threadsafe(self._run_async(attempt), loop)
        else:
            self._pool.submit(attempt)

    def _run_sync(self, attempt: Attempt) -> bool:
        """Run a plain handler on a pool thread; False when the thread was abandoned at the
        attempt's timeout meanwhile (a replacement took its place: this one ends)."""
        attempt.started = time.monotonic()  # a task claimed ahead times out from its start
        attempt.begun = True
        ctx = Context(attempt, self.driver)
        handler = attempt.spec.handler
        assert handler is not None
        outcome: BaseException | None = None
        try:
            value = handler(ctx, attempt.task.payload)
            attempt.result = encode_result(value, self.collab.result_limit)
        except BaseException as exc:  # noqa: BLE001 - every outcome is classified
            outcome = exc
        keep = self._handler_done(attempt)
        self._finish(attempt, outcome)
        return keep

    async def _run_async(self, attempt: Attempt) -> None:
        if self._async_slots is None:
            self._async_slots = asyncio.Semaphore(self.options.concurrency)
        async with self._async_slots:  # at most `concurrency` async handlers at once
            attempt.started = time.monotonic()
            attempt.begun = True
            outcome = await self._await_handler(attempt)
        self._handler_done(attempt)
        if outcome is None and self._finish_batched(attempt):
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._finish, attempt, outcome)

    async def _await_handler(self, attempt: Attempt) -> BaseException | None:
        ctx = Context(attempt, self.driver)
        handler = attempt.spec.handler
        assert handler is not None
        try:
            if attempt.spec.timeout is not None:
                value = await asyncio.wait_for(
                    handler(ctx, attempt.task.payload), attempt.spec.timeout
                )
            else:
                value = await handler(ctx, attempt.task.payload)
            attempt.result = encode_result(value, self.collab.result_limit)
        except TimeoutError:
            return _attempt_timeout(attempt)
        except BaseException as exc:  # noqa: BLE001
            return exc
        return None

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="jobtrail-async", daemon=True)
            thread.start()
            self._loop, self._loop_thread = loop, thread
        return self._loop

    def _stop_loop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._loop_thread is not None:
                self._loop_thread.join(timeout=5)
            if not self._loop.is_running():
                self._loop.close()
            self._loop = None

    # -- outcomes ------------------------------------------------------------------------------
    def _handler_done(self, attempt: Attempt) -> bool:
        """The attempt's handler returned, or was abandoned at its timeout: True for the first
        of the two (the other finds its handler slot already given back)."""
        with attempt.lock:
            if attempt.handler_done:
                return False
            attempt.handler_done = True
            return True
