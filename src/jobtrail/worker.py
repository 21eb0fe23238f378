"""The worker: claims due tasks, runs handlers, renews leases, writes outcomes, sweeps.

One pump loop (this thread) that writes plain successes and claims new work in the same round
trip, one heartbeat thread that renews leases at a third of their length and enforces
per-attempt timeouts, a pool of ``concurrency`` handler threads (a handler abandoned at its
timeout keeps its thread and a replacement starts), and one event loop thread for
``async def`` handlers. Outcomes are decided by ``decide`` and written by ``transition.apply``
with the worker guard (owner + attempt + unexpired lease): an attempt that lost its lease
writes nothing.

A task holds one of the worker's ``concurrency`` slots from its claim until its outcome is
committed. A handler thread that returns plainly hands its attempt to the pump and takes the
next one; the pump commits that success together with the next claim (one statement on
PostgreSQL, one transaction — one fsync — on SQLite) and only then frees the slot.
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
from .machine import HELD, ErrorCategory, Reason, State
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
    #: Tasks claimed beyond the free handler slots and held ready (leased) for the next free
    #: handler: the round trip for the next tasks overlaps the handlers of the current ones.
    prefetch: int = 0
    poll_interval: float = 1.0
    sweep_interval: float = 1.0
    grace: float = 30.0
    install_signals: bool = True


class Worker:
    def __init__(self, app: App, options: WorkerOptions) -> None:
        if options.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if options.prefetch < 0:
            raise ValueError("prefetch must be 0 or more")
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
        self.round_trips = 0
        self._outbox_wake = threading.Event()
        self._completions = _Completions()
        self._pool = _HandlerPool(self._run_sync, options.concurrency)
        self._async_slots: asyncio.Semaphore | None = None
        self._limited: list[str] = []
        self._limited_read_at = float("-inf")
        self._kinds = [name for name, spec in app._kinds.items() if spec.handler is not None]

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
        self._completions.open()
        try:
            self._claim_loop()
            self._drain(self.options.grace)
        finally:
            # Successes handed over from now on are written one by one by their own threads.
            self._settle_alone(self._completions.close())
            self._pool.close()
            self._done.set()
            self._outbox_wake.set()
            heartbeat.join(timeout=5)
            if outbox is not None:
                outbox.join(timeout=5)
                self._dispatch_once()  # flush what the last attempts emitted
            self._stop_loop()
            if restore:
                restore()
        log.info(
            "worker %s stopped after %d tasks in %d round trips",
            self.owner,
            self.processed,
            self.round_trips,
        )
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

    # -- the pump: write successes, claim, start handlers ------------------------------------------
    def _claim_loop(self) -> None:
        next_sweep = 0.0
        failures = 0
        burst = self.options.burst
        while not self._stop.is_set():
            # A burst worker sweeps before it claims (what the sweep requeues is claimed before
            # it decides it is done); a running worker after, so that a task that woke it
            # starts before the sweep's round trips.
            if burst and time.monotonic() >= next_sweep:
                next_sweep = self._sweep()
            done = self._completions.take()
            with self._running_lock:
                # Read before claiming: a handler that finishes during the claim may release
                # more work (a workflow's next step) that this claim could not see yet.
                busy_before = len(self.running) - len(done)
            room = self.options.concurrency + self.options.prefetch
            free = room - busy_before if self._kinds else 0
            claimed = 0
            if done or free > 0:
                try:
                    claimed = self._round(done, free)
                    failures = 0
                except Exception as exc:
                    failures += 1
                    delay = min(5.0, 0.1 * 2 ** min(failures, 6))
                    log.warning("claim failed (%s); retrying in %.1fs", type(exc).__name__, delay)
                    if not burst and time.monotonic() >= next_sweep:
                        next_sweep = self._sweep()  # other workers' expired leases all the same
                    self._stop.wait(delay)
                    continue
            if not burst and time.monotonic() >= next_sweep:
                next_sweep = self._sweep()
            if burst and claimed == 0 and busy_before == 0:
                return
            if (claimed and claimed == free) or self._completions.waiting():
                continue  # there may be more due work, or successes to write: go again at once
            self.driver.wait_for_work(
                min(self.options.poll_interval, max(0.01, next_sweep - time.monotonic()))
            )

    def _sweep(self) -> float:
        """Expired leases and receipt deadlines, then cron windows; returns the next time."""
        try:
            sweep(self.driver, self.app._kinds)
        except Exception as exc:  # the store is down: keep running, try later
            log.warning("sweep failed: %s", type(exc).__name__)
        self.app._cron_tick()  # cron windows (scheduler.py): leader-free, never raises
        return time.monotonic() + self.options.sweep_interval

    def _round(self, done: list[Attempt], free: int) -> int:
        """One round trip: commit the successes in ``done`` and claim up to ``free`` tasks in
        the same transaction; then free the slots of what completed, start what was claimed,
        and hand each success whose guard failed to its own path."""
        pairs = [(a.task_id, a.number) for a in done]
        self.round_trips += 1
        try:
            if pairs:
                transition.check("batch", State.LEASED, State.SUCCEEDED, "completed")
            moved, rows = self._complete_and_claim(pairs, free)
        except Exception:
            self._settle_alone(done)  # each retries on its own path while its lease lasts
            raise
        if done:
            self._release([a for a in done if a.task_id in moved])
            # The guard failed (a cancel was requested, or the lease was lost): decide alone.
            self._settle_alone([a for a in done if a.task_id not in moved])
        for row in rows:
            self._start(self._attempt(row))
        return len(rows)

    def _complete_and_claim(
        self, pairs: list[tuple[int, int]], free: int
    ) -> tuple[set[int], list[dict[str, Any]]]:
        request = None
        if free > 0:
            request = Claim(
                owner=self.owner,
                queues=self.options.queues,
                kinds=self._kinds,
                limit=free,
                version=self.version,
            )
        driver = self.driver
        if not driver.claims_in_one_statement:
            # One transaction (one fsync on SQLite) for the successes and the claim from
            # unlimited queues. Limited queues are claimed after that commit, in their own
            # transaction, so that the slots freed here are open to every worker first.
            with driver.transaction() as tx:
                moved = driver.task_complete_many(tx, self.owner, self.owner, pairs)
                if request is None:
                    return moved, []
                rows = transition.claim(driver, tx, replace(request, skip_limited=True))
            return moved, rows + self._claim_limited(request, free - len(rows), soon=not rows)
        if request is None:
            with driver.single_statement(pinned=True) as tx:
                return driver.task_complete_many(tx, self.owner, self.owner, pairs), []
        first = request.queues[0]
        if first in self._limited:
            moved = set()
            if pairs:
                with driver.single_statement(pinned=True) as tx:
                    moved = driver.task_complete_many(tx, self.owner, self.owner, pairs)
            return moved, self._claim_fast(request)
        transition.check("claim", State.QUEUED, State.LEASED, Reason.CLAIMED)
        with driver.single_statement(pinned=True) as tx:
            moved, rows = driver.task_complete_and_claim(tx, pairs, request, first, free)
        rest = request.queues[1:]
        if len(rows) < free and rest:
            rows += self._claim_fast(replace(request, queues=rest, limit=free - len(rows)))
        elif len(rows) < free:
            rows += self._claim_limited(request, free - len(rows), soon=not rows)
        return moved, rows

    def _claim_fast(self, request: Claim) -> list[dict[str, Any]]:
        """Unlimited queues with one autocommit statement each (no BEGIN, queue lock or
        COMMIT round trips); queues with concurrency limits through ``task_claim`` under
        their queue locks."""
        with self.driver.single_statement(pinned=True) as tx:
            rows = transition.claim_unlimited(self.driver, tx, request)
        return rows + self._claim_limited(request, request.limit - len(rows), soon=not rows)

    def _claim_limited(self, request: Claim, room: int, *, soon: bool) -> list[dict[str, Any]]:
        """Which queues are limited is re-read every sweep interval: it only decides where to
        look — the fast statements never take from a limited queue, so a limit set meanwhile
        holds at once, and a lifted one is served within a second."""
        age = time.monotonic() - self._limited_read_at
        # re-read at least every sweep interval, and soon (0.1 s) when the fast claim found
        # nothing, so an idle or burst worker sees a new limit at once — but not when it found
        # some: the task it claimed starts first (an idle worker's one new task would wait
        # for this read's round trips)
        if age >= self.options.sweep_interval or (room > 0 and soon and age >= 0.1):
            with self.driver.transaction(write=False) as tx:
                self._limited = self.driver.queues_limited(tx, self.options.queues)
            self._limited_read_at = time.monotonic()
        limited = [q for q in self._limited if q in request.queues]
        if not limited or room <= 0:
            return []
        with self.driver.transaction() as tx:
            return transition.claim(self.driver, tx, replace(request, queues=limited, limit=room))

    def _attempt(self, row: dict[str, Any]) -> Attempt:
        task = self.app._task_from_row(row)
        attempt = Attempt(
            task=task,
            spec=self.app._kinds[task.kind],
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
            handler(ctx, attempt.task.payload)
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
                await asyncio.wait_for(handler(ctx, attempt.task.payload), attempt.spec.timeout)
            else:
                await handler(ctx, attempt.task.payload)
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

    def _close(self, attempt: Attempt) -> bool:
        """Claim the right to write this attempt's outcome (once: a timed-out attempt's
        handler may still return later)."""
        with attempt.lock:
            already = attempt.closed
            attempt.closed = True
        return not already

    def _finish_batched(self, attempt: Attempt) -> bool:
        """A plain success goes to the pump, which commits it with its next round trip and
        then frees the slot. False when it must be written alone."""
        if attempt.lost or not _batchable(attempt):
            return False
        if not self._close(attempt):
            return True  # somebody else (the timeout) decided already
        first = self._completions.offer(attempt)
        if first is not None:
            if first:  # the pump is woken once per batch, not once per success
                self.driver.wake()
            return True
        attempt.closed = False  # the pump has stopped: write it alone
        return False

    def _finish(self, attempt: Attempt, exc: BaseException | None) -> None:
        """Write the attempt's outcome (or nothing, if it lost its lease)."""
        if exc is None and self._finish_batched(attempt):
            return
        if self._close(attempt):
            self._write_and_release(attempt, exc)

    def _write_and_release(self, attempt: Attempt, exc: BaseException | None) -> None:
        """Write the outcome of an attempt this thread has closed, then free its slot."""
        try:
            if attempt.lost or isinstance(exc, LeaseLost):
                log.info(
                    "task %s attempt %d lost its lease (%s); writing nothing",
                    attempt.task_id,
                    attempt.number,
                    attempt.lost_why or "LeaseLost",
                )
                return
            self._write_outcome(attempt, exc)
        finally:
            self._release([attempt])

    def _release(self, attempts: list[Attempt]) -> None:
        """Free the slots of attempts whose outcome is written (or given up)."""
        if not attempts:
            return
        with self._running_lock:
            for attempt in attempts:
                if self.running.get(attempt.task_id) is attempt:
                    del self.running[attempt.task_id]
            self.processed += len(attempts)
        self.driver.wake()

    def _settle_alone(self, attempts: list[Attempt]) -> None:
        """Write each success on its own path (in its own thread: it may retry while its
        lease lasts) — for successes the batch could not move."""
        for attempt in attempts:
            threading.Thread(
                target=self._write_and_release,
                args=(attempt, None),
                daemon=True,
                name="jobtrail-settle",
            ).start()

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
                    and attempt.begun
                    and not attempt.spec.is_async
                    and now - attempt.started >= timeout
                ):
                    attempt.timed_out = True
                    if self._handler_done(attempt):  # its thread is abandoned; the slot is not
                        self._pool.replace()
                    threading.Thread(
                        target=self._finish, args=(attempt, _attempt_timeout(attempt)), daemon=True
                    ).start()
                    continue
                if now >= attempt.next_renew:
                    self._renew(attempt)
                wait = min(wait, max(0.005, attempt.next_renew - time.monotonic()))
                if timeout is not None and attempt.begun:
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
        """Claim nothing more; keep writing the successes of running handlers until they have
        all finished or the grace period is over."""
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            done = self._completions.take()
            if done:
                try:
                    self._round(done, 0)
                except Exception as exc:  # they were handed to their own paths
                    log.warning("writing completions failed (%s)", type(exc).__name__)
                continue
            with self._running_lock:
                if not self.running:
                    return
            self.driver.wait_for_work(min(0.05, max(0.0, deadline - time.monotonic())))
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
    written together with other plain successes and the next claim by the pump."""
    return attempt.pending_receipt is None and not attempt.outbox and attempt.task.parent_id is None


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
