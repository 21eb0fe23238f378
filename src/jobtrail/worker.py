"""The worker: claims due tasks, runs handlers, renews leases, writes outcomes, sweeps.

One claim loop (this thread), one heartbeat thread that renews leases at a third of their length
and enforces per-attempt timeouts, a thread per running plain handler, and one event loop thread
for ``async def`` handlers. Outcomes are decided by ``decide`` and written by
``transition.apply`` with the worker guard (owner + attempt + unexpired lease): an attempt that
lost its lease writes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from . import transition
from .context import Attempt, Context
from .decide import Decision, decide_failure, decide_success
from .errors import LeaseLost
from .machine import HELD, ErrorCategory, State
from .models import iso
from .outbox import dispatch
from .store.base import Claim, Move
from .sweeper import sweep

if TYPE_CHECKING:
    from .app import App

log = logging.getLogger("jobtrail.worker")


def make_owner_id() -> str:
    """``host:pid:boot`` — one process incarnation; ``boot`` is random per worker start."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass
class WorkerOptions:
    queues: list[str]
    concurrency: int = 4
    burst: bool = False
    poll_interval: float = 1.0
    sweep_interval: float = 1.0
    grace: float = 30.0
    install_signals: bool = True


class Worker:
    def __init__(self, app: App, options: WorkerOptions) -> None:
        if options.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.app = app
        self.driver = app._driver
        self.options = options
        self.owner = make_owner_id()
        self.version = app.version
        self.running: dict[int, Attempt] = {}
        self._running_lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self.processed = 0
        self._outbox_wake = threading.Event()
        self._completions = _Completions(self)
        self._limited: list[str] = []
        self._limited_read_at = float("-inf")

    # -- control -----------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop claiming; running handlers get the grace period to reach an outcome."""
        self._stop.set()
        self.driver.wake()

    def run(self) -> int:
        """Run until stopped (or, in burst mode, until nothing is due and nothing runs)."""
        restore = self._install_signals() if self.options.install_signals else None
        heartbeat = threading.Thread(target=self._heartbeat, name="jobtrail-heartbeat", daemon=True)
        heartbeat.start()
        outbox = None
        if self.app._sinks:
            outbox = threading.Thread(
                target=self._dispatch_loop, name="jobtrail-outbox", daemon=True
            )
            outbox.start()
        log.info(
            "worker %s started: queues=%s concurrency=%d",
            self.owner,
            ",".join(self.options.queues),
            self.options.concurrency,
        )
        self._completions.start()
        try:
            self._claim_loop()
            self._drain(self.options.grace)
        finally:
            self._completions.stop()
            self._done.set()
            self._outbox_wake.set()
            heartbeat.join(timeout=5)
            if outbox is not None:
                outbox.join(timeout=5)
                self._dispatch_once()  # flush what the last attempts emitted
            self._stop_loop()
            if restore:
                restore()
        log.info("worker %s stopped after %d tasks", self.owner, self.processed)
        return self.processed

    def _install_signals(self) -> Callable[[], None] | None:
        if threading.current_thread() is not threading.main_thread():
            return None
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def handler(signum: int, _frame: Any) -> None:
            log.info(
                "worker %s: signal %d, stopping (grace %.1fs)",
                self.owner,
                signum,
                self.options.grace,
            )
            self.stop()

        for sig in previous:
            signal.signal(sig, handler)

        def restore() -> None:
            for sig, old in previous.items():
                signal.signal(sig, old)

        return restore

    # -- the claim loop ------------------------------------------------------------------------
    def _claim_loop(self) -> None:
        kinds = [name for name, spec in self.app._kinds.items() if spec.handler is not None]
        next_sweep = 0.0
        failures = 0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_sweep:
                try:
                    sweep(self.driver, self.app._kinds)
                except Exception as exc:  # the store is down: keep running, try later
                    log.warning("sweep failed: %s", type(exc).__name__)
                self.app._cron_tick()  # cron windows (scheduler.py): leader-free, never raises
                next_sweep = now + self.options.sweep_interval
            with self._running_lock:
                # Read before claiming: a handler that finishes during the claim may release
                # more work (a workflow's next step) that this claim could not see yet.
                busy_before = len(self.running)
            free = self.options.concurrency - busy_before
            claimed = 0
            if free > 0 and kinds:
                try:
                    claimed = self._claim(kinds, free)
                    failures = 0
                except Exception as exc:
                    failures += 1
                    delay = min(5.0, 0.1 * 2 ** min(failures, 6))
                    log.warning("claim failed (%s); retrying in %.1fs", type(exc).__name__, delay)
                    self._stop.wait(delay)
                    continue
            if self.options.burst and claimed == 0 and busy_before == 0:
                return
            if claimed and claimed == free:
                continue  # there may be more due work: claim again at once
            self.driver.wait_for_work(
                min(self.options.poll_interval, max(0.01, next_sweep - time.monotonic()))
            )

    def _claim(self, kinds: list[str], limit: int) -> int:
        request = Claim(
            owner=self.owner,
            queues=self.options.queues,
            kinds=kinds,
            limit=limit,
            version=self.version,
        )
        if self.driver.claims_in_one_statement:
            rows = self._claim_fast(request)
        else:
            with self.driver.transaction() as tx:
                rows = transition.claim(self.driver, tx, request)
        for row in rows:
            task = self.app._task_from_row(row)
            spec = self.app._kinds[task.kind]
            attempt = Attempt(
                task=task,
                spec=spec,
                owner=self.owner,
                number=row["attempts"],
                lease_seconds=float(row["lease_seconds"]),
            )
            with self._running_lock:
                self.running[attempt.task_id] = attempt
            self._start(attempt)
        return len(rows)

    def _claim_fast(self, request: Claim) -> list[dict[str, Any]]:
        """Unlimited queues with one autocommit statement each (no BEGIN, queue lock or
        COMMIT round trips); queues with concurrency limits through ``task_claim`` under
        their queue locks. Which queues are limited is re-read every sweep interval: it only
        decides where to look — the fast statement itself never takes from a limited queue,
        so a limit set meanwhile holds at once, and a lifted one is served within a second."""
        with self.driver.single_statement() as tx:
            rows = transition.claim_unlimited(self.driver, tx, request)
        room = request.limit - len(rows)
        age = time.monotonic() - self._limited_read_at
        # re-read at least every sweep interval, and soon whenever the fast claim came up
        # short (so an idle or burst worker sees a new limit within 0.1 s)
        if age >= self.options.sweep_interval or (room > 0 and age >= 0.1):
            with self.driver.transaction(write=False) as tx:
                self._limited = self.driver.queues_limited(tx, request.queues)
            self._limited_read_at = time.monotonic()
        if self._limited and room > 0:
            limited = replace(request, queues=self._limited, limit=room)
            with self.driver.transaction() as tx:
                rows += transition.claim(self.driver, tx, limited)
        return rows

    def _start(self, attempt: Attempt) -> None:
        if attempt.spec.is_async:
            loop = self._ensure_loop()
            asyncio.run_coroutine_threadsafe(self._run_async(attempt), loop)
        else:
            threading.Thread(
                target=self._run_sync,
                args=(attempt,),
                daemon=True,
                name=f"jobtrail-task-{attempt.task_id}",
            ).start()

    def _run_sync(self, attempt: Attempt) -> None:
        ctx = Context(attempt, self.driver)
        handler = attempt.spec.handler
        assert handler is not None
        try:
            handler(ctx, attempt.task.payload)
        except BaseException as exc:  # noqa: BLE001 - every outcome is classified
            self._finish(attempt, exc)
        else:
            self._finish(attempt, None)

    async def _run_async(self, attempt: Attempt) -> None:
        ctx = Context(attempt, self.driver)
        handler = attempt.spec.handler
        assert handler is not None
        outcome: BaseException | None = None
        try:
            if attempt.spec.timeout is not None:
                await asyncio.wait_for(handler(ctx, attempt.task.payload), attempt.spec.timeout)
            else:
                await handler(ctx, attempt.task.payload)
        except TimeoutError:
            outcome = _attempt_timeout(attempt)
        except BaseException as exc:  # noqa: BLE001
            outcome = exc
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._finish, attempt, outcome)

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
    def _finish(self, attempt: Attempt, exc: BaseException | None) -> None:
        """Write the attempt's outcome (or nothing, if it lost its lease)."""
        with attempt.lock:
            already = attempt.closed
            attempt.closed = True
        if already:
            return
        try:
            if attempt.lost or isinstance(exc, LeaseLost):
                log.info(
                    "task %s attempt %d lost its lease (%s); writing nothing",
                    attempt.task_id,
                    attempt.number,
                    attempt.lost_why or "LeaseLost",
                )
                return
            if exc is None and _batchable(attempt):
                if self._completions.complete(attempt):
                    return
                # The guard failed in the batch (cancel requested, or the lease was lost) or
                # the batch could not be written: decide for this attempt alone, as always.
            self._write_outcome(attempt, exc)
        finally:
            with self._running_lock:
                if self.running.get(attempt.task_id) is attempt:
                    del self.running[attempt.task_id]
            self.processed += 1
            self.driver.wake()

    def _write_outcome(self, attempt: Attempt, exc: BaseException | None) -> None:
        delay = 0.05
        while True:
            try:
                with self.driver.transaction() as tx:
                    if exc is None:
                        moved = self._write_success(tx, attempt)
                    else:
                        moved = self._write_failure(tx, attempt, exc)
                if moved and attempt.outbox:
                    self._outbox_wake.set()
                if not moved:
                    log.info(
                        "task %s attempt %d: outcome refused, the lease was lost",
                        attempt.task_id,
                        attempt.number,
                    )
                return
            except Exception as error:
                if not self.driver.is_outage(error):
                    # Not an outage: the write itself is refused (a constraint, a bug). Record
                    # that as the attempt's failure once, so the cause is on the timeline.
                    if isinstance(exc, OutcomeNotRecorded):
                        log.error(
                            "task %s attempt %d: the failure could not be recorded "
                            "either (%s); the sweeper will decide",
                            attempt.task_id,
                            attempt.number,
                            type(error).__name__,
                        )
                        return
                    log.error(
                        "task %s attempt %d: the outcome was refused by the store (%s)",
                        attempt.task_id,
                        attempt.number,
                        type(error).__name__,
                    )
                    exc = OutcomeNotRecorded(
                        f"the outcome could not be recorded: {type(error).__name__}: {error}"
                    )
                    continue
                # the store is unreachable: retry while the lease lasts
                if time.monotonic() >= attempt.lease_deadline or self._done.is_set():
                    log.warning(
                        "task %s attempt %d: could not write the outcome (%s); the "
                        "sweeper will decide",
                        attempt.task_id,
                        attempt.number,
                        type(error).__name__,
                    )
                    return
                time.sleep(delay)
                delay = min(1.0, delay * 2)

    def _write_success(self, tx: Any, attempt: Attempt) -> bool:
        receipt = attempt.pending_receipt
        for state in (State.LEASED, State.CANCEL_REQUESTED):
            decision = decide_success(
                cancel_requested=state is State.CANCEL_REQUESTED, submitted=receipt is not None
            )
            if self._apply(tx, attempt, state, decision) is not None:
                for topic, payload in attempt.outbox:
                    tx.run(
                        "outbox_insert",
                        {"task_id": attempt.task_id, "topic": topic, "payload": payload},
                    )
                return True
        return False

    def _write_failure(self, tx: Any, attempt: Attempt, exc: BaseException) -> bool:
        row = self.driver.task_get(tx, attempt.task_id)
        if (
            row is None
            or row["state"] not in HELD
            or row["lease_owner"] != attempt.owner
            or row["attempts"] != attempt.number
            or row["lease_expires_at"] <= row["db_now"]
        ):
            return False
        state = State(row["state"])
        elapsed = (row["db_now"] - row["budget_started_at"]).total_seconds()
        confirmed = tx.one("effect_confirmed_count", {"id": attempt.task_id})
        decision = decide_failure(
            exc,
            spec=attempt.spec,
            attempt=attempt.number,
            max_attempts=row["max_attempts"],
            elapsed=elapsed,
            cancel_requested=state is State.CANCEL_REQUESTED,
            effect_confirmed=bool(confirmed and confirmed["n"]),
        )
        data: dict[str, Any] = {}
        if decision.delay is not None:
            data["delay"] = round(decision.delay, 6)
            data["retry_at"] = iso(row["db_now"] + timedelta(seconds=decision.delay))
        return self._apply(tx, attempt, state, decision, data) is not None

    def _apply(
        self,
        tx: Any,
        attempt: Attempt,
        state: State,
        decision: Decision,
        data: dict[str, Any] | None = None,
    ) -> Any:
        receipt = attempt.pending_receipt if decision.to_state is State.AWAITING_RECEIPT else None
        move = Move(
            task_id=attempt.task_id,
            from_state=state,
            to_state=decision.to_state,
            reason=decision.reason,
            actor=self.owner,
            owner=attempt.owner,
            attempt=attempt.number,
            run_in=decision.delay,
            receipt_id=receipt[0] if receipt else None,
            receipt_in=receipt[1] if receipt else None,
            uncount_attempt=not decision.counts_attempt,
            set_error=decision.category is not None or decision.error is not None,
            error_category=decision.category,
            error=decision.error,
            data=data or {},
        )
        return transition.apply(self.driver, tx, move)

    # -- outbox dispatch ---------------------------------------------------------------------------
    def _dispatch_loop(self) -> None:
        while not self._done.is_set():
            delivered = self._dispatch_once()
            if not delivered:
                self._outbox_wake.wait(0.5)
                self._outbox_wake.clear()

    def _dispatch_once(self) -> int:
        try:
            return dispatch(self.driver, self.app._sinks)
        except Exception as exc:  # the store is down: try again later
            log.warning("outbox dispatch failed: %s", type(exc).__name__)
            return 0

    # -- heartbeat: renewals and timeouts --------------------------------------------------------
    def _heartbeat(self) -> None:
        while not self._done.is_set():
            now = time.monotonic()
            with self._running_lock:
                attempts = list(self.running.values())
            wait = 0.25
            for attempt in attempts:
                if attempt.closed or attempt.lost:
                    continue
                timeout = attempt.spec.timeout
                if (
                    timeout is not None
                    and not attempt.spec.is_async
                    and now - attempt.started >= timeout
                ):
                    attempt.timed_out = True
                    threading.Thread(
                        target=self._finish, args=(attempt, _attempt_timeout(attempt)), daemon=True
                    ).start()
                    continue
                if now >= attempt.next_renew:
                    self._renew(attempt)
                wait = min(wait, max(0.005, attempt.next_renew - time.monotonic()))
                if timeout is not None:
                    wait = min(wait, max(0.005, attempt.started + timeout - time.monotonic()))
            self._done.wait(wait)

    def _renew(self, attempt: Attempt) -> None:
        try:
            with self.driver.transaction() as tx:
                row = self.driver.lease_extend(
                    tx, attempt.task_id, attempt.owner, attempt.number, attempt.lease_seconds
                )
        except Exception as exc:  # store unreachable: try again soon; give up at the deadline
            if time.monotonic() >= attempt.lease_deadline:
                attempt.mark_lost(
                    f"could not renew before the lease ran out ({type(exc).__name__})"
                )
            else:
                attempt.next_renew = time.monotonic() + min(0.5, attempt.lease_seconds / 10)
            return
        now = time.monotonic()
        if row is None:
            attempt.mark_lost("lease renewal refused")
            return
        attempt.lease_deadline = now + attempt.lease_seconds
        attempt.next_renew = now + attempt.lease_seconds / 3.0
        if row["state"] == State.CANCEL_REQUESTED:
            attempt.cancel_seen = True

    # -- stopping ------------------------------------------------------------------------------
    def _drain(self, grace: float) -> None:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with self._running_lock:
                if not self.running:
                    return
            time.sleep(0.01)
        with self._running_lock:
            left = list(self.running)
        if left:
            log.warning(
                "grace period over with %d tasks still running: their leases will "
                "expire and the sweeper will decide (%s)",
                len(left),
                left,
            )


def _batchable(attempt: Attempt) -> bool:
    """A plain success (no receipt, no outbox messages, not a workflow child): the common case,
    written together with other plain successes by ``_Completions``."""
    return attempt.pending_receipt is None and not attempt.outbox and attempt.task.parent_id is None


class _Pending:
    __slots__ = ("attempt", "done", "moved")

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self.done = threading.Event()
        self.moved = False


class _Completions:
    """One writer for plain successes: handler threads hand their attempt over and wait; the
    writer takes everything waiting, moves it in one transaction (one statement on
    PostgreSQL), commits, and only then tells each thread whether its task moved. While one
    batch commits the next one gathers, so the batch size follows the load by itself."""

    MAX_BATCH = 500

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.open = False
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        with self.lock:
            self.open = True
        self.thread = threading.Thread(target=self._loop, name="jobtrail-completions", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        with self.lock:
            if not self.open:
                return
            self.open = False
            self.queue.put(None)
        if self.thread is not None:
            self.thread.join(timeout=30)

    def complete(self, attempt: Attempt) -> bool:
        """True once the success is committed; False when this attempt must be decided alone
        (its guard failed in the batch, the batch failed, or the writer has stopped)."""
        pending = _Pending(attempt)
        with self.lock:
            if not self.open:
                return False
            self.queue.put(pending)
        pending.done.wait()
        return pending.moved

    def _loop(self) -> None:
        while True:
            first = self.queue.get()
            if first is None:
                return
            batch = [first]
            stopping = False
            while len(batch) < self.MAX_BATCH:
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            self._write(batch)
            if stopping:
                return

    def _write(self, batch: list[_Pending]) -> None:
        worker = self.worker
        try:
            transition.check("batch", State.LEASED, State.SUCCEEDED, "completed")
            with worker.driver.single_statement() as tx:
                moved = worker.driver.task_complete_many(
                    tx,
                    worker.owner,
                    worker.owner,
                    [(p.attempt.task_id, p.attempt.number) for p in batch],
                )
        except Exception as exc:  # each attempt retries on its own path
            log.info("batched completion failed (%s); writing one by one", type(exc).__name__)
            moved = set()
        for pending in batch:
            pending.moved = pending.attempt.task_id in moved
            pending.done.set()


class OutcomeNotRecorded(Exception):  # noqa: N818
    """The store refused to record an attempt's outcome (not an outage); recorded as its
    failure instead."""


def _attempt_timeout(attempt: Attempt) -> TimeoutError:
    error = TimeoutError(f"attempt {attempt.number} ran past its {attempt.spec.timeout}s timeout")
    error.jobtrail_category = ErrorCategory.TIMEOUT  # type: ignore[attr-defined]
    return error
