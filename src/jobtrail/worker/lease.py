"""Where a lease is renewed: the heartbeat thread renews every running attempt's lease at a
third of its length, marks an attempt lost when renewal is refused or the store stays away
past the lease, and enforces per-attempt timeouts."""

from __future__ import annotations

import logging
import threading
import time

from ..core.context import Attempt
from ..model.machine import State
from .handlers import Handlers
from .outcomes import Outcomes
from .pool import _attempt_timeout
from .state import WorkerState

log = logging.getLogger("jobtrail.worker")


class LeaseRenewal:
    """The heartbeat thread (``heartbeat``). Given the shared state, ``Handlers`` (a timed-out
    handler gives its slot back) and ``Outcomes`` (a timeout is written as one)."""

    def __init__(self, w: WorkerState, handlers: Handlers, outcomes: Outcomes) -> None:
        self._w = w
        self._handlers = handlers
        self._outcomes = outcomes

    # -- heartbeat: renewals and timeouts --------------------------------------------------------
    def heartbeat(self) -> None:
        while not self._w._done.is_set():
            now = time.monotonic()
            with self._w._running_lock:
                attempts = list(self._w.running.values())
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
                    # its thread is abandoned; the slot is not
                    if self._handlers.handler_done(attempt):
                        self._w._pool.replace()
                    threading.Thread(
                        target=self._outcomes.finish,
                        args=(attempt, _attempt_timeout(attempt)),
                        daemon=True,
                    ).start()
                    continue
                if now >= attempt.next_renew:
                    self._renew(attempt)
                wait = min(wait, max(0.005, attempt.next_renew - time.monotonic()))
                if timeout is not None and attempt.begun:
                    wait = min(wait, max(0.005, attempt.started + timeout - time.monotonic()))
            self._w._done.wait(wait)

    def _renew(self, attempt: Attempt) -> None:
        try:
            with self._w.driver.transaction() as tx:
                row = self._w.driver.lease_extend(
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
