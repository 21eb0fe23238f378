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
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..core import transition
from ..core.context import Attempt
from ..model.machine import State
from ..services.outbox import dispatch
from ..services.retention import EVENTS_EVERY, prune_retained
from ..services.sweeper import sweep
from ..store.base import Claim
from . import logs
from .handlers import Handlers
from .handoff import IdleHandOff
from .lease import LeaseRenewal
from .options import Collaborators, ProvidesCollaborators, WorkerOptions, make_owner_id
from .outcomes import Outcomes
from .pool import _Completions, _HandlerPool
from .prefetch import Prefetch
from .presence import Presence
from .state import WorkerState
from .tally import Tally

log = logging.getLogger("jobtrail.worker")


class Worker(WorkerState):
    """The claim loop. It is the state its parts share (``WorkerState``) and holds the parts:
    ``Outcomes``, ``Handlers``, ``LeaseRenewal`` (the heartbeat thread) and ``IdleHandOff``."""

    def __init__(
        self, given: Collaborators | ProvidesCollaborators, options: WorkerOptions
    ) -> None:
        """``given``: the collaborators (``App.run_worker`` builds them), or an object that
        gives them (an ``App``: ``Worker(app, options)``)."""
        collab = given if isinstance(given, Collaborators) else given.worker_collaborators()
        self.collab = collab
        self.driver = collab.driver
        self.options = options
        self.owner = make_owner_id()
        self.version = collab.version
        self.running: dict[int, Attempt] = {}
        self._started: dict[int, int] = {}
        self._running_lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self.processed = 0
        self.tally = Tally()  # what the attempts did, for the stop line
        self.round_trips = 0
        self._outbox_wake = threading.Event()
        self._completions = _Completions()
        self._outcomes = Outcomes(self)
        self._handlers = Handlers(self, self._outcomes)
        self._lease = LeaseRenewal(self, self._handlers, self._outcomes)
        self._pool = _HandlerPool(self._handlers.run_sync, options.concurrency)
        self._prefetch = Prefetch(
            options.prefetch, options.concurrency
        )  # raises on a negative prefetch
        self._async_slots: asyncio.Semaphore | None = None
        self._limited: list[str] = []
        self._limited_read_at = float("-inf")
        #: seconds until the next slot of a rate-limited queue the last claim found due work in
        self._slot: float | None = None
        self._kinds = [name for name, spec in collab.kinds.items() if spec.handler is not None]
        #: a failure after part of a round trip committed (``_then``), raised once it is done
        self._late: Exception | None = None
        #: a failed round may have committed a claim: look for tasks leased to us (handoff.py)
        self._unsure = False
        self._handoff = IdleHandOff(self, self._handlers)
        self._presence = Presence(
            self.driver,
            self.owner,
            queues=options.queues,
            kinds=self._kinds,
            concurrency=options.concurrency,
            version=self.version,
            interval=options.beat_interval,
            # the beat rides on the sweep: a sweep interval longer than the beat's sets the pace
            stale_after=max(
                options.stale_after, 3 * max(options.beat_interval, options.sweep_interval)
            ),
        )

    # -- control -----------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop claiming; running handlers get the grace period to reach an outcome."""
        self._stop.set()
        self.driver.wake()

    def run(self) -> int:
        """Run until stopped (or, in burst mode, until nothing is due and nothing runs)."""
        restore = self._install_signals() if self.options.install_signals else None
        heartbeat = threading.Thread(
            target=self._lease.heartbeat, name="jobtrail-heartbeat", daemon=True
        )
        heartbeat.start()
        outbox = None
        if self.collab.sinks:
            outbox = threading.Thread(
                target=self._dispatch_loop, name="jobtrail-outbox", daemon=True
            )
            outbox.start()
        log.info(
            "worker %s started: database=%s queues=%s kinds=%s concurrency=%d",
            self.owner,
            self.collab.database or "?",
            ",".join(self.options.queues),
            ",".join(sorted(self.collab.kinds)) or "-",
            self.options.concurrency,
        )
        self._check_wakeups()
        self._presence.beat(force=True)  # listed from its start (app.workers(), explain)
        self._completions.open()
        pruner = self._start_retention()
        try:
            self._claim_loop()
            self._handoff.leave_registry()  # what was handed to us meanwhile runs in the grace
            self._drain(self.options.grace)
        finally:
            # Successes handed over from now on are written one by one by their own threads.
            self._outcomes.settle_alone(self._completions.close())
            self._pool.close()
            self._done.set()
            self._outbox_wake.set()
            heartbeat.join(timeout=5)
            if pruner is not None:
                pruner.join(timeout=5)
            if outbox is not None:
                outbox.join(timeout=5)
                self._dispatch_once()  # flush what the last attempts emitted
            self._handlers.stop_loop()
            if restore:
                restore()
            self._presence.leave()
        log.info(
            "worker %s stopped: %s, in %d round trips",
            self.owner,
            self.tally.summary(self.processed),
            self.round_trips,
        )
        return self.processed

    def _check_wakeups(self) -> None:
        """Say how this worker learns of new work: polling (no LISTEN behind a transaction
        pooler without a listen_url), or LISTEN, checked with a NOTIFY of its own."""
        if self.driver.polls_only:
            log.info(
                "worker %s: no LISTEN connection (pooler=transaction and no listen_url); "
                "polling for new work every %.2fs",
                self.owner,
                self.options.poll_interval,
            )
            return
        if self.driver.check_wakeups() is False:
            if self.driver.outage.down:  # the store went away meanwhile: nothing is proven
                log.debug("worker %s: the LISTEN check met an outage", self.owner)
                return
            log.warning(
                "worker %s: a NOTIFY of its own did not reach its LISTEN connection (a "
                "transaction pooler without pooler='transaction', or a listen_url to another "
                "database?); new work is found by polling every %.2fs",
                self.owner,
                self.options.poll_interval,
            )

    def _install_signals(self) -> Callable[[], None] | None:
        if threading.current_thread() is not threading.main_thread():
            return None
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def handler(signum: int, _frame: Any) -> None:
            if signum == signal.SIGINT and self._stop.is_set():
                # a second Ctrl-C: whoever presses it wants out now, not after the grace.
                # What runs is abandoned as a crash would abandon it: its lease expires and
                # the sweeper requeues it (or marks it for reconciliation).
                os.write(
                    2,
                    f"worker {self.owner}: second SIGINT, exiting now; the tasks still running "
                    "are recovered when their leases expire\n".encode(),
                )
                os._exit(128 + signal.SIGINT)  # what a shell reports for Ctrl-C (130)
            log.info(
                "worker %s: signal %d, stopping (grace %.1fs; Ctrl-C again to exit at once)",
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
        heard = -1  # the driver's wake-ups of new work counted when the last claim was sent
        timed_out = True  # whether the last wait ended without a wake-up (a poll)
        while not self._stop.is_set():
            # A burst worker sweeps before it claims (what the sweep requeues is claimed before
            # it decides it is done); a running worker after, so that a task that woke it
            # starts before the sweep's round trips.
            if burst and time.monotonic() >= next_sweep:
                next_sweep = self._sweep()
            handed = self._handoff.take_handed()  # tasks handed to us at their enqueue hold slots
            done = self._completions.take()
            with self._running_lock:
                # Read before claiming: a handler that finishes during the claim may release
                # more work (a workflow's next step) that this claim could not see yet.
                busy_before = len(self.running) - len(done)
                ahead = self._prefetch.room(self.running.values(), time.monotonic())
            room = self.options.concurrency + ahead
            free = self._handoff.kept_slot(room - busy_before) if self._kinds else 0
            if handed and not timed_out and self.driver.queued_heard == heard:
                free = 0  # woken by a hand-off alone: it came from an empty queue
            claimed = 0
            if done or free > 0:
                if free > 0:  # a wake-up counted after this may bring work the claim missed
                    heard = self.driver.queued_heard
                try:
                    claimed = self._round(done, free)
                    failures = 0
                except Exception as exc:
                    # A claim may have committed without its answer reaching us: the tasks
                    # leased to us meanwhile are started once the store answers again.
                    self._unsure = self._unsure or free > 0
                    failures += 1
                    # at most a second between tries: the store is back within seconds
                    delay = min(1.0, 0.1 * 2 ** min(failures, 6))
                    logs.store_failed(
                        self.driver, "claim", exc, retry=f"; retrying in {delay:.1f}s"
                    )
                    if not burst and time.monotonic() >= next_sweep:
                        next_sweep = self._sweep()  # other workers' expired leases all the same
                    self._stop.wait(delay)
                    continue
                self.driver.outage.answered()
                if self._unsure:
                    claimed += self._handoff.adopt_orphans()
            if not burst and time.monotonic() >= next_sweep:
                next_sweep = self._sweep()
            slot = self._slot  # a rate-limited queue's next slot, seconds (None: no such wait)
            if burst and claimed == 0 and busy_before == 0 and slot is None:
                slot = self._next_due()  # draining: wait for what is due within the horizon
                if slot is None:
                    return
            if claimed and self._handoff.armed:
                self._handoff.leave_registry()  # busy now: no slot kept for a hand-off
            if (claimed and claimed == free) or self._completions.waiting():
                continue  # there may be more due work, or successes to write: go again at once
            if not claimed and not burst:
                self._handoff.register_if_idle()
            wait = min(self.options.poll_interval, max(0.01, next_sweep - time.monotonic()))
            woke = self.driver.wait_for_work(wait if slot is None else min(wait, max(0.005, slot)))
            timed_out = not woke

    def _next_due(self) -> float | None:
        """A draining burst worker's wait (seconds) for the first of its tasks due within
        ``drain`` seconds; ``None`` (return) when there is none, or without ``drain``. A task
        due now that the last claim did not get (a limit another worker holds) is looked at
        again after a short wait, not in a busy loop."""
        if not self.options.drain or not self._kinds:
            return None
        try:
            with self.driver.transaction(write=False) as tx:
                wait = self.driver.task_next_due(
                    tx, self.options.queues, self._kinds, self.options.drain
                )
        except Exception as exc:  # the store is down: try again after a poll interval
            log.warning("drain check failed (%s)", type(exc).__name__)
            return self.options.poll_interval
        if wait is None:
            return None
        return wait if wait > 0.05 else 0.05

    # -- retention: pruning finished tasks on a thread of its own ----------------------------
    def _start_retention(self) -> threading.Thread | None:
        """A burst worker prunes once before it claims; a running one on its own thread, one
        pass every sweep interval, so that no prune batch ever waits in the claim loop."""
        retention = self.collab.retention
        if not retention or all(age is None for age in retention.values()):
            return None
        if self.options.burst:
            self._prune(retention)
            return None
        thread = threading.Thread(
            target=self._retention_loop, args=(retention,), name="jobtrail-retention", daemon=True
        )
        thread.start()
        return thread

    def _retention_loop(self, retention: dict[str, float | None]) -> None:
        events_at = 0.0
        while not self._done.is_set():
            events = time.monotonic() >= events_at
            if events:
                events_at = time.monotonic() + EVENTS_EVERY
            self._prune(retention, events=events)
            self._done.wait(self.options.sweep_interval)

    def _prune(self, retention: dict[str, float | None], *, events: bool = True) -> None:
        try:
            # a short pause between batches leaves the store to the claims
            prune_retained(self.driver, retention, stop=self._done, pause=0.005, events=events)
        except Exception as exc:  # the store is down: keep running, try later
            logs.store_failed(self.driver, "retention pass", exc)

    def _sweep(self) -> float:
        """Expired leases and receipt deadlines, then cron windows, and this worker's heartbeat
        when one is due; returns the next time."""
        self._presence.beat()
        try:
            sweep(self.driver, self.collab.kinds, ended=self.collab.ended)
        except Exception as exc:  # the store is down: keep running, try later
            logs.store_failed(self.driver, "sweep", exc)
        self.collab.cron_tick()  # cron windows (scheduler.py): leader-free, never raises
        return time.monotonic() + self.options.sweep_interval

    def _round(self, done: list[Attempt], free: int) -> int:
        """One round trip: commit the successes in ``done`` and claim up to ``free`` tasks in
        the same transaction; then free the slots of what completed, start what was claimed,
        and hand each success whose guard failed to its own path."""
        pairs = [(a.task_id, a.number) for a in done]
        results = {a.task_id: a.result for a in done if a.result is not None}
        self.round_trips += 1
        self._late = None
        try:
            if pairs:
                transition.check("batch", State.LEASED, State.SUCCEEDED, "completed")
            moved, rows = self._complete_and_claim(pairs, free, results)
        except Exception:
            self._outcomes.settle_alone(done)  # each retries on its own path while its lease lasts
            raise
        if done:
            completed = [a for a in done if a.task_id in moved]
            self.tally.count(State.SUCCEEDED, len(completed))
            logs.batch_finished(completed)
            self._outcomes.release(completed)
            # The guard failed (a cancel was requested, or the lease was lost): decide alone.
            self._outcomes.settle_alone([a for a in done if a.task_id not in moved])
        self._handlers.start_rows(rows)
        late, self._late = self._late, None
        if late is not None:  # what committed before it has been carried out above
            raise late
        return len(rows)

    def _then(
        self, rows: list[dict[str, Any]], more: Callable[[], list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """``rows`` (committed) and what ``more`` claims after them. A failure in ``more``
        must not lose ``rows``: the tasks are leased to us, and dropping them would leave them
        to wait out their lease (issue 40); it is raised by ``_round`` once they started."""
        try:
            return rows + more()
        except Exception as exc:
            self._late = exc
            return rows

    def _complete_and_claim(
        self, pairs: list[tuple[int, int]], free: int, results: dict[int, str]
    ) -> tuple[set[int], list[dict[str, Any]]]:
        request = None
        self._slot = None
        if free > 0:
            request = Claim(
                owner=self.owner,
                queues=self.options.queues,
                kinds=self._kinds,
                limit=free,
                version=self.version,
            )
        try:
            return self._complete_and_claim_in(pairs, free, request, results)
        finally:
            if request is not None and request.slots:
                self._slot = min(request.slots)

    def _complete_and_claim_in(
        self,
        pairs: list[tuple[int, int]],
        free: int,
        request: Claim | None,
        results: dict[int, str],
    ) -> tuple[set[int], list[dict[str, Any]]]:
        driver = self.driver
        if not driver.claims_in_one_statement:
            # One transaction (one fsync on SQLite) for the successes and the claim from
            # unlimited queues. Limited queues are claimed after that commit, in their own
            # transaction, so that the slots freed here are open to every worker first.
            with driver.transaction() as tx:
                moved = transition.complete_many(driver, tx, self.owner, self.owner, pairs, results)
                if request is None:
                    return moved, []
                rows = transition.claim(driver, tx, replace(request, skip_limited=True))
            return moved, self._then(
                rows, lambda: self._claim_limited(request, free - len(rows), soon=not rows)
            )
        if request is None:
            with driver.single_statement(pinned=True) as tx:
                return transition.complete_many(
                    driver, tx, self.owner, self.owner, pairs, results
                ), []
        first = request.queues[0]
        if first in self._limited:
            moved = set()
            if pairs:
                with driver.single_statement(pinned=True) as tx:
                    moved = transition.complete_many(
                        driver, tx, self.owner, self.owner, pairs, results
                    )
            return moved, self._then([], lambda: self._claim_fast(request))
        with driver.single_statement(pinned=True) as tx:
            moved, rows = transition.complete_and_claim(
                driver, tx, pairs, request, first, free, results
            )
        # committed: a failure from here on keeps these rows (``_then``)
        rest = request.queues[1:]
        if len(rows) < free and rest:
            more = replace(request, queues=rest, limit=free - len(rows))
            rows = self._then(rows, lambda: self._claim_fast(more))
        elif len(rows) < free:
            room = free - len(rows)
            rows = self._then(rows, lambda: self._claim_limited(request, room, soon=not rows))
        return moved, rows

    def _claim_fast(self, request: Claim) -> list[dict[str, Any]]:
        """Unlimited queues with one autocommit statement each (no BEGIN, queue lock or
        COMMIT round trips); queues with concurrency limits through ``task_claim`` under
        their queue locks."""
        with self.driver.single_statement(pinned=True) as tx:
            rows = transition.claim_unlimited(self.driver, tx, request)
        room = request.limit - len(rows)
        return self._then(rows, lambda: self._claim_limited(request, room, soon=not rows))

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

    # -- outbox dispatch ---------------------------------------------------------------------------
    def _dispatch_loop(self) -> None:
        while not self._done.is_set():
            delivered = self._dispatch_once()
            if not delivered:
                self._outbox_wake.wait(0.5)
                self._outbox_wake.clear()

    def _dispatch_once(self) -> int:
        try:
            return dispatch(self.driver, self.collab.sinks)
        except Exception as exc:  # the store is down: try again later
            logs.store_failed(self.driver, "outbox dispatch", exc)
            return 0

    # -- stopping ------------------------------------------------------------------------------
    def _drain(self, grace: float) -> None:
        """Claim nothing more; keep writing the successes of running handlers until they have
        all finished or the grace period is over."""
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            self._presence.beat()  # still listed while its handlers finish (a long grace)
            done = self._completions.take()
            if done:
                try:
                    self._round(done, 0)
                except Exception as exc:  # they were handed to their own paths
                    logs.store_failed(self.driver, "writing completions", exc)
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
