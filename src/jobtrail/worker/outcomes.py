"""Where an attempt's outcome is written: the decision (``decide``) carried out by
``transition.apply`` under the worker guard, a plain success handed to the pump's batch, and
the slot freed once the outcome is committed."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

from ..core import results, transition
from ..core.context import Attempt
from ..core.decide import Decision, decide_failure, decide_success
from ..core.durable import Suspend
from ..core.suspension import write_suspension
from ..model.errors import LeaseLost, Snooze
from ..model.machine import HELD, State
from ..model.models import iso
from . import logs
from .pool import OutcomeNotRecorded, _batchable
from .state import WorkerState

log = logging.getLogger("jobtrail.worker")


class Outcomes:
    """Writes each attempt's outcome and frees its slot. Given the worker's shared state
    (``w``: the driver, the running attempts and their lock, the completion batch)."""

    def __init__(self, w: WorkerState) -> None:
        self._w = w

    def _close(self, attempt: Attempt) -> bool:
        """Claim the right to write this attempt's outcome (once: a timed-out attempt's
        handler may still return later)."""
        with attempt.lock:
            already = attempt.closed
            attempt.closed = True
        return not already

    def finish_batched(self, attempt: Attempt) -> bool:
        """A plain success goes to the pump, which commits it with its next round trip and
        then frees the slot. False when it must be written alone."""
        if attempt.lost or not _batchable(attempt):
            return False
        if not self._close(attempt):
            return True  # somebody else (the timeout) decided already
        first = self._w._completions.offer(attempt)
        if first is not None:
            if first:  # the pump is woken once per batch, not once per success
                self._w.driver.wake()
            return True
        attempt.closed = False  # the pump has stopped: write it alone
        return False

    def finish(self, attempt: Attempt, exc: BaseException | None) -> None:
        """Write the attempt's outcome (or nothing, if it lost its lease)."""
        if exc is None and self.finish_batched(attempt):
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
            self.release([attempt])

    def release(self, attempts: list[Attempt]) -> None:
        """Free the slots of attempts whose outcome is written (or given up)."""
        if not attempts:
            return
        with self._w._running_lock:
            for attempt in attempts:
                if self._w.running.get(attempt.task_id) is attempt:
                    del self._w.running[attempt.task_id]
            self._w.processed += len(attempts)
        self._w.driver.wake()

    def settle_alone(self, attempts: list[Attempt]) -> None:
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
                already = False
                with self._w.driver.transaction() as tx:
                    if exc is None:
                        moved = self._write_success(tx, attempt)
                        already = moved is None and self._succeeded_already(tx, attempt)
                    else:
                        moved = self._write_failure(tx, attempt, exc)
                if moved and attempt.outbox:
                    self._w._outbox_wake.set()
                if moved:
                    self._w.tally.count(moved.to_state)
                    category = moved.category.value if moved.category else None
                    logs.attempt_finished(
                        attempt, moved.to_state, moved.reason.value, category=category, exc=exc
                    )
                elif already:
                    # a batch whose commit's answer was lost (an outage): it was recorded
                    logs.attempt_finished(attempt, State.SUCCEEDED, "completed")
                else:
                    log.info(
                        "task %s attempt %d: outcome refused, the lease was lost",
                        attempt.task_id,
                        attempt.number,
                    )
                return
            except Exception as error:
                if not self._w.driver.is_outage(error):
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
                if time.monotonic() >= attempt.lease_deadline or self._w._done.is_set():
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

    def _write_success(self, tx: Any, attempt: Attempt) -> Decision | None:
        """The success's move (its return value stored with it) and its outbox
        messages; the decision carried out, or ``None`` when the guard failed."""
        receipt = attempt.pending_receipt
        for state in (State.LEASED, State.CANCEL_REQUESTED):
            decision = decide_success(
                cancel_requested=state is State.CANCEL_REQUESTED, submitted=receipt is not None
            )
            stored = {"set_result": True, "result": attempt.result}
            if self._apply(tx, attempt, state, decision, None, stored) is not None:
                for topic, payload in attempt.outbox:
                    self._w.driver.outbox_insert(
                        tx, task_id=attempt.task_id, topic=topic, payload=payload
                    )
                return decision
        return None

    def _succeeded_already(self, tx: Any, attempt: Attempt) -> bool:
        """Whether this attempt's success is recorded already: the batch that carried it
        committed, but its answer was lost with the connection. Only this attempt can have
        completed it (the attempt number is the fencing token: an outcome is written only
        under the attempt's own lease)."""
        row = self._w.driver.task_holder(tx, id=attempt.task_id)
        return (
            row is not None
            and row["state"] == State.SUCCEEDED.value
            and row["attempts"] == attempt.number
        )

    def _write_failure(self, tx: Any, attempt: Attempt, exc: BaseException) -> Decision | None:
        row = self._w.driver.task_get(tx, attempt.task_id)
        if (
            row is None
            or row["state"] not in HELD
            or row["lease_owner"] != attempt.owner
            or row["attempts"] != attempt.number
            or row["lease_expires_at"] <= row["db_now"]
        ):
            return None
        state = State(row["state"])
        confirmed = self._w.driver.effect_confirmed_count(tx, id=attempt.task_id)
        if isinstance(exc, Suspend):  # a durable handler waits: no failure, no attempt counted
            return write_suspension(
                self._w.driver,
                tx,
                task_id=attempt.task_id,
                owner=attempt.owner,
                attempt=attempt.number,
                actor=self._w.owner,
                suspend=exc,
                cancel_requested=state is State.CANCEL_REQUESTED,
                effect_confirmed=bool(confirmed and confirmed["n"]),
            )
        elapsed = (row["db_now"] - row["budget_started_at"]).total_seconds()
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
        # the failure's traceback and class path go with its transition (a snooze is
        # not a failure: it keeps none)
        failed = {} if isinstance(exc, Snooze) else _failure_facts(exc)
        if self._apply(tx, attempt, state, decision, data, failed) is None:
            return None
        return decision

    def _apply(
        self,
        tx: Any,
        attempt: Attempt,
        state: State,
        decision: Decision,
        data: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Any:
        receipt = attempt.pending_receipt if decision.to_state is State.AWAITING_RECEIPT else None
        move = transition.move_for(
            decision,
            task_id=attempt.task_id,
            from_state=state,
            actor=self._w.owner,
            owner=attempt.owner,
            attempt=attempt.number,
            receipt_id=receipt[0] if receipt else None,
            receipt_in=receipt[1] if receipt else None,
            data=data or {},
            **(extra or {}),
        )
        return transition.apply(self._w.driver, tx, move)


def _failure_facts(exc: BaseException) -> dict[str, Any]:
    """``Move``'s ``traceback`` and ``error_class`` for a failed attempt."""
    return {"traceback": results.traceback_text(exc), "error_class": results.class_path(exc)}
