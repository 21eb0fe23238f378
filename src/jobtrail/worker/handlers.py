"""Running handlers: plain ones on the pool's threads, ``async def`` ones on one event loop
thread; each attempt's ``Context`` is built here."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
import time
from datetime import datetime
from typing import Any

from ..core import tracing, typed
from ..core.context import Attempt, Context
from ..core.decide import classify
from ..core.durable import Suspend
from ..core.results import encode_result
from ..model.errors import Cancelled, Snooze
from ..model.models import task_from_row
from .loopwatch import LoopWatch, Watched
from .outcomes import Outcomes
from .pool import _attempt_timeout
from .state import WorkerState

log = logging.getLogger("jobtrail.worker")

#: Seconds a stopping worker gives the coroutines still on its event loop to end.
LOOP_SETTLE = 0.5
#: How many task ids (with the attempt started) a worker remembers having started: far more
#: than one claim can return, which is what ``_adopt_orphans`` (handoff.py) looks for.
STARTED_KEPT = 4096


class Handlers:
    """Runs handlers: plain ones on the pool's threads, ``async def`` ones on one event loop.
    Given the shared state and ``Outcomes``, which records what each handler did."""

    def __init__(self, w: WorkerState, outcomes: Outcomes) -> None:
        self._w = w
        self._outcomes = outcomes
        #: the blocked-loop lines' rate limit, made with the loop (``loopwatch``)
        self._loopwatch: LoopWatch | None = None

    def _attempt(self, row: dict[str, Any]) -> Attempt:
        task = task_from_row(row)
        attempt = Attempt(
            task=task,
            spec=self._w.collab.kinds[task.kind],
            owner=self._w.owner,
            number=row["attempts"],
            lease_seconds=float(row["lease_seconds"]),
        )
        with self._w._running_lock:
            self._w.running[attempt.task_id] = attempt
            # what ran here is never started again by the look after a failed round trip
            started = self._w._started
            started[attempt.task_id] = attempt.number
            if len(started) > STARTED_KEPT:
                del started[next(iter(started))]
        return attempt

    def start_rows(self, rows: list[dict[str, Any]]) -> None:
        """Start the attempts of claimed (or handed) task rows."""
        traces = self._traces(rows) if rows and tracing.recording() else None
        records = self._records(rows)
        for row in rows:
            attempt = self._attempt(row)
            if records is not None and attempt.task_id in records:
                resumed(attempt, row, records[attempt.task_id])
            if traces is not None:
                attempt.traced = True
                attempt.trace = traces.get(row["id"])
            self._start(attempt)

    def _records(self, rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]] | None:
        """The records of the resumed durable handlers among the rows (those that suspended
        before: ``wait_kind`` set), in one read for the claim: their runs replay from them
        without a read each. None when there are none, or the read failed (each handler then
        reads its own)."""
        ids = [int(r["id"]) for r in rows if r.get("wait_kind") is not None]
        if not ids:
            return None
        try:
            found = self._w.driver.durable_records(ids=ids)
        except Exception as exc:
            log.warning("reading resumed handlers' records failed: %s", type(exc).__name__)
            return None
        out: dict[int, list[dict[str, Any]]] = {i: [] for i in ids}
        for r in found:
            out[int(r["task_id"])].append(r)
        return out

    def _traces(self, rows: list[dict[str, Any]]) -> dict[int, dict[str, str]]:
        """The trace contexts stored with the claimed tasks (one read, only when tracing)."""
        try:
            with self._w.driver.transaction(write=False) as tx:
                found = self._w.driver.trace_contexts(
                    tx, ids=self._w.driver._list([r["id"] for r in rows])
                )
        except Exception as exc:  # the attempts run all the same, in traces of their own
            log.warning("reading trace contexts failed: %s", type(exc).__name__)
            return {}
        out = {}
        for r in found:
            trace = json.loads(r["trace"]) if isinstance(r["trace"], str) else r["trace"]
            if isinstance(trace, dict):
                out[r["task_id"]] = {str(k): str(v) for k, v in trace.items()}
        return out

    def _start(self, attempt: Attempt) -> None:
        if attempt.spec.is_async:
            loop = self._ensure_loop()
            asyncio.run_coroutine_threadsafe(self._run_async(attempt), loop)
        else:
            self._w._pool.submit(attempt)

    def run_sync(self, attempt: Attempt) -> bool:
        """Run a plain handler on a pool thread; False when the thread was abandoned at the
        attempt's timeout meanwhile (a replacement took its place: this one ends)."""
        attempt.started = time.monotonic()  # a task claimed ahead times out from its start
        attempt.begun = True
        ctx = Context(attempt, self._w.driver, self._w.collab.new_task)
        handler = attempt.spec.handler
        assert handler is not None
        outcome: BaseException | None = None
        limit = self._w.collab.result_limit
        if attempt.traced:
            with _processing(attempt) as span:
                try:
                    value = handler(ctx, _payload(attempt))
                    attempt.result = encode_result(value, limit)
                except BaseException as exc:  # noqa: BLE001 - every outcome is classified
                    outcome = exc
                    _failed(span, attempt, exc)
        else:
            try:
                value = handler(ctx, _payload(attempt))
                attempt.result = encode_result(value, limit)
            except BaseException as exc:  # noqa: BLE001 - every outcome is classified
                outcome = exc
        keep = self.handler_done(attempt)
        self._outcomes.finish(attempt, outcome)
        return keep

    async def _run_async(self, attempt: Attempt) -> None:
        if self._w._async_slots is None:
            self._w._async_slots = asyncio.Semaphore(self._w.options.concurrency)
        async with self._w._async_slots:  # at most `concurrency` async handlers at once
            attempt.started = time.monotonic()
            attempt.begun = True
            if attempt.traced:
                with _processing(attempt) as span:
                    outcome = await self._await_handler(attempt)
                    if outcome is not None:
                        _failed(span, attempt, outcome)
            else:
                outcome = await self._await_handler(attempt)
        self.handler_done(attempt)
        if outcome is None and self._outcomes.finish_batched(attempt):
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._outcomes.finish, attempt, outcome)

    async def _await_handler(self, attempt: Attempt) -> BaseException | None:
        ctx = Context(attempt, self._w.driver, self._w.collab.new_task)
        handler = attempt.spec.handler
        assert handler is not None and self._loopwatch is not None
        try:
            # each step of the handler's coroutine is timed: one that blocks the loop is logged
            coro = Watched(
                handler(ctx, _payload(attempt)),
                self._loopwatch,
                attempt.task_id,
                attempt.task.kind,
            )
            if attempt.spec.timeout is not None:
                value: Any = await asyncio.wait_for(coro, attempt.spec.timeout)
            else:
                value = await coro
            attempt.result = encode_result(value, self._w.collab.result_limit)
        except TimeoutError:
            return _attempt_timeout(attempt)
        except BaseException as exc:  # noqa: BLE001
            return exc
        return None

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._w._loop is None:
            if self._loopwatch is None:
                self._loopwatch = LoopWatch(self._w.owner)
                self._loopwatch.start(self._w._done)
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="jobtrail-async", daemon=True)
            thread.start()
            self._w._loop, self._w._loop_thread = loop, thread
        return self._w._loop

    def stop_loop(self) -> None:
        if self._w._loop is not None:
            # Every attempt's outcome is recorded by now, but a coroutine may not have resumed
            # yet from its last await (the recording ran on a thread), and a handler may have
            # started coroutines of its own: they get LOOP_SETTLE seconds to end before the loop
            # stops (a pending task is destroyed unfinished, with asyncio's "Task was destroyed
            # but it is pending!"). A handler still running past the grace is left as before,
            # to the lease rules: cancelling it would record its CancelledError as an outcome.
            settle = asyncio.run_coroutine_threadsafe(_settle(LOOP_SETTLE), self._w._loop)
            try:
                settle.result(LOOP_SETTLE + 1.0)
            except (concurrent.futures.TimeoutError, RuntimeError):  # pragma: no cover
                log.warning("the async handlers' loop did not settle; stopping it anyway")
            self._w._loop.call_soon_threadsafe(self._w._loop.stop)
            if self._w._loop_thread is not None:
                self._w._loop_thread.join(timeout=5)
            if not self._w._loop.is_running():
                self._w._loop.close()
            self._w._loop = None

    # -- outcomes ------------------------------------------------------------------------------
    def handler_done(self, attempt: Attempt) -> bool:
        """The attempt's handler returned, or was abandoned at its timeout: True for the first
        of the two (the other finds its handler slot already given back)."""
        with attempt.lock:
            if attempt.handler_done:
                return False
            attempt.handler_done = True
        now = time.monotonic()
        self._w._prefetch.observe(attempt.task.kind, now - attempt.started, now)
        return True


def _payload(attempt: Attempt) -> Any:
    """The handler's payload argument: the stored JSON, or the kind's payload type rebuilt
    from it (a payload that does not fit is a ``PermanentError``)."""
    spec = attempt.spec
    if spec.payload_type is None:
        return attempt.task.payload
    return typed.load(spec.name, spec.payload_type, attempt.task.payload)


def _processing(attempt: Attempt) -> Any:
    """The attempt's CONSUMER span (``tracing.process``)."""
    task = attempt.task
    return tracing.process(
        queue=task.queue,
        task_id=task.id,
        kind=task.kind,
        attempt=attempt.number,
        stored=attempt.trace,
    )


def _failed(span: tracing.Processing | None, attempt: Attempt, exc: BaseException) -> None:
    """Error status and category on the span of an attempt that raised (a snooze and a
    confirmed cancel are outcomes, not errors)."""
    if span is None or isinstance(exc, Snooze | Cancelled | Suspend):
        return
    try:
        category = classify(exc, attempt.spec.classify).value
    except Exception:  # noqa: BLE001 - the kind's hook failed: decide() records that
        category = "unclassified"
    span.failed(exc, category)


async def _settle(timeout: float) -> None:
    """Wait up to ``timeout`` for the loop's other tasks to end."""
    me = asyncio.current_task()
    pending = [t for t in asyncio.all_tasks() if t is not me]
    if pending:
        await asyncio.wait(pending, timeout=timeout)


def resumed(attempt: Attempt, row: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """Give a resumed durable handler's attempt its records (read with its claim) and the
    claim's database time (the row's ``updated_at``: the clock has passed it), so that its
    recorded sleeps and waits return without a read of the store."""
    attempt.steps = {r["name"]: r for r in records}
    seen = row.get("updated_at")
    if isinstance(seen, datetime):
        attempt.clock_seen = seen
