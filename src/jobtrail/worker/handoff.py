"""The worker's side of the hand-off (docs/design_idle_handoff.md): an idle worker registers
itself, and a single enqueue that would be claimed at once leases its task to it in the
enqueue's own commit; the task's row comes with the notification, so it starts without a claim
(one commit for an idle job instead of two).

A registration keeps one of the worker's slots for the task that may be handed to it at any
moment (``_armed``): its claims take one task fewer, or, with a single slot free, it leaves
the registry first. Whatever was handed to it is started exactly once: from the notification,
or, when it leaves the registry and learns of a task whose notification has not arrived (or
was lost with its LISTEN connection), from the row itself.
"""

from __future__ import annotations

import logging
from typing import Any

from . import logs
from .handlers import Handlers
from .state import WorkerState

log = logging.getLogger("jobtrail.worker")

#: How many handed task ids a worker remembers (to start each once, whichever way it came).
SEEN = 1024


class IdleHandOff:
    """The worker's side of the hand-off; owns its registration. Given the shared state and
    ``Handlers`` (a handed task starts like a claimed one)."""

    _registered: bool  # our row is in the registry (armed, or marked with a task we started)
    armed: bool  # registered and nothing handed yet: a task may be handed to us any moment
    _armed_epoch: int  # the LISTEN connection's epoch when we registered
    _handed_seen: dict[int, None]  # handed task ids already started (insertion-ordered)

    def __init__(self, w: WorkerState, handlers: Handlers) -> None:
        self._w = w
        self._handlers = handlers
        self._registered = False
        self.armed = False
        self._armed_epoch = 0
        self._handed_seen = {}

    def take_handed(self) -> int:
        """Start the tasks whose hand-off notifications arrived; how many. A notification
        too long for the whole row carries only the id: the row is read."""
        started = 0
        for row in self._w.driver.take_handed(self._w.owner):
            if "kind" in row:
                started += self._adopt(row)
            elif int(row["id"]) not in self._handed_seen:
                started += self._recover_handed(int(row["id"]))
        if started:
            self.armed = False  # our row is marked: nothing more is handed until we re-register
        return started

    def _adopt(self, row: dict[str, Any]) -> bool:
        task_id = int(row["id"])
        if task_id in self._handed_seen:
            return False
        with self._w._running_lock:
            if task_id in self._w.running:  # claimed again since (its hand-off's lease expired)
                return False
        self._handed_seen[task_id] = None
        if len(self._handed_seen) > SEEN:
            del self._handed_seen[next(iter(self._handed_seen))]
        self._handlers.start_rows([row])
        return True

    def kept_slot(self, free: int) -> int:
        """How many tasks the coming claim may take of ``free`` slots: one fewer while a task
        may be handed to us; with one free (or the LISTEN connection reconnected since we
        registered: a hand-off's notification may be lost), leave the registry first."""
        if not self.armed or free <= 0:
            return free
        if free > 1 and self._w.driver.listen_epoch == self._armed_epoch:
            return free - 1
        started = self.leave_registry()
        return free - 1 if started is None else free - started

    def register_if_idle(self) -> None:
        """Register when nothing runs (the last claim found nothing)."""
        if (
            self.armed
            or not self._w.driver.hands_off
            or self._w.options.burst
            or not self._w._kinds
            or self._w._stop.is_set()
        ):
            return
        with self._w._running_lock:
            if self._w.running:
                return
        epoch = self._w.driver.listen_epoch
        try:
            self._w.driver.idle_register(
                self._w.owner, self._w.options.queues, self._w._kinds, self._w.version
            )
        except Exception as exc:  # the store is away: we are found by claims as before
            logs.store_failed(self._w.driver, "idle registration", exc)
            return
        self._registered = self.armed = True
        self._armed_epoch = epoch

    def leave_registry(self) -> int | None:
        """Delete our registration and start what was handed to us meanwhile (how many);
        ``None`` when the store could not be reached (still registered)."""
        if not self._registered:
            return 0
        try:
            handed = self._w.driver.idle_unregister(self._w.owner)
        except Exception as exc:
            logs.store_failed(self._w.driver, "leaving the idle registry", exc)
            return None
        self._registered = self.armed = False
        started = self.take_handed()
        if handed is not None and handed not in self._handed_seen:
            started += self._recover_handed(handed)
        return started

    def _recover_handed(self, task_id: int) -> int:
        """A task handed to us whose notification has not come: start it from its row (its
        notification, if it comes, is then ignored); 1 when it was started."""
        try:
            with self._w.driver.transaction(write=False) as tx:
                row = self._w.driver.task_get(tx, task_id)
        except Exception as exc:  # _adopt_orphans starts it once the store answers
            self._w._unsure = True
            logs.store_failed(self._w.driver, f"reading handed task {task_id}", exc)
            return 0
        # only the handed attempt (a hand-off leases attempt 1): once its lease expired the
        # task may have been claimed again, by this very worker too, and that attempt is
        # already running here or done (issue 38: attempt 2 ran twice in one worker)
        if (
            row is None
            or row["state"] != "leased"
            or row["lease_owner"] != self._w.owner
            or int(row["attempts"]) != 1
        ):
            return 0
        return int(self._adopt(row))

    def adopt_orphans(self) -> int:
        """After a round trip that failed (its claim may have committed with the answer lost
        on the way, or a later statement of the round failed), start the tasks the store says
        are leased to us that we do not run: a committed claim reaches a handler instead of
        waiting out its lease. How many started; the look is retried after the
        next round when it fails."""
        try:
            with self._w.driver.transaction(write=False) as tx:
                rows = self._w.driver.task_held_by(tx, owner=self._w.owner, limit=10_000)
        except Exception as exc:
            log.debug("looking for tasks leased to us failed: %s", type(exc).__name__)
            return 0
        self._w._unsure = False
        with self._w._running_lock:
            # never an attempt this worker started: one whose outcome could not be written is
            # the sweeper's to decide when its lease ends, not ours to run again
            orphans = [
                row
                for row in rows
                if int(row["id"]) not in self._w.running
                and self._w._started.get(int(row["id"])) != row["attempts"]
            ]
        started = sum(int(self._adopt(row)) for row in orphans)
        if started:  # the outage itself was said once, by the driver's notice
            log.debug(
                "worker %s: started %d task(s) whose claim committed while the store's "
                "answer was lost",
                self._w.owner,
                started,
            )
        return started
