"""The handler's ``ctx``: what an attempt may ask of the store while it runs.

Every call first checks that this attempt still holds the task; once the lease is lost (expired
and swept, taken over, force-fixed, or the attempt timed out) every call raises ``LeaseLost``
and the worker writes nothing further for the attempt.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import Cancelled, LeaseLost
from .kinds import KindSpec
from .machine import State
from .models import Task

if TYPE_CHECKING:
    from .store.base import Driver


@dataclass(eq=False)
class Attempt:
    """The worker's book-keeping for one running attempt (times are local monotonic, used only
    to schedule this process's own renewals — the store decides expiry by its own clock)."""

    task: Task
    spec: KindSpec
    owner: str
    number: int
    lease_seconds: float
    started: float = field(default_factory=time.monotonic)
    next_renew: float = 0.0
    lease_deadline: float = 0.0
    lost: bool = False
    lost_why: str = ""
    timed_out: bool = False
    cancel_seen: bool = False
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.next_renew = self.started + self.lease_seconds / 3.0
        self.lease_deadline = self.started + self.lease_seconds

    @property
    def task_id(self) -> int:
        return int(self.task.id)

    def mark_lost(self, why: str) -> None:
        with self.lock:
            if not self.lost:
                self.lost = True
                self.lost_why = why


class Context:
    """Passed as the first argument of every handler."""

    def __init__(self, attempt: Attempt, driver: Driver) -> None:
        self._attempt = attempt
        self._driver = driver

    @property
    def task(self) -> Task:
        """The task as it was claimed (a snapshot)."""
        return self._attempt.task

    @property
    def task_id(self) -> str:
        return self._attempt.task.id

    @property
    def attempt(self) -> int:
        """This attempt's number (from 1): the fencing token of every write it makes."""
        return self._attempt.number

    @property
    def payload(self) -> Any:
        return self._attempt.task.payload

    @property
    def cancel_requested(self) -> bool:
        """Whether a cancel was seen so far (by a renewal or a boundary check)."""
        return self._attempt.cancel_seen

    def _ensure_held(self) -> None:
        if self._attempt.timed_out:
            raise LeaseLost(f"attempt {self.attempt} of task {self.task_id} ran past its timeout")
        if self._attempt.lost:
            raise LeaseLost(
                f"attempt {self.attempt} of task {self.task_id} lost its lease: "
                f"{self._attempt.lost_why}"
            )

    def check_cancelled(self) -> None:
        """The explicit cancellation boundary: raises ``Cancelled`` if a cancel was requested,
        ``LeaseLost`` if this attempt no longer holds the task."""
        self._ensure_held()
        with self._driver.transaction(write=False) as tx:
            row = tx.one("task_holder", {"id": self._attempt.task_id})
        if (
            row is None
            or row["state"] not in (State.LEASED, State.CANCEL_REQUESTED)
            or row["lease_owner"] != self._attempt.owner
            or row["attempts"] != self._attempt.number
            or not row["lease_valid"]
        ):
            self._attempt.mark_lost("the task is no longer held by this attempt")
            self._ensure_held()
        if row is not None and row["state"] == State.CANCEL_REQUESTED:
            self._attempt.cancel_seen = True
            raise Cancelled(f"task {self.task_id}: cancel requested")

    def extend(self, seconds: float) -> None:
        """Renew the lease for ``seconds`` from now (database time); later automatic renewals
        keep that length. Raises ``LeaseLost`` when the renewal is refused."""
        if not seconds > 0:
            raise ValueError("extend() needs a positive number of seconds")
        self._ensure_held()
        with self._driver.transaction() as tx:
            row = self._driver.lease_extend(
                tx, self._attempt.task_id, self._attempt.owner, self._attempt.number, seconds
            )
        if row is None:
            self._attempt.mark_lost("lease renewal refused")
            self._ensure_held()
        assert row is not None
        now = time.monotonic()
        with self._attempt.lock:
            self._attempt.lease_seconds = float(seconds)
            self._attempt.lease_deadline = now + seconds
            self._attempt.next_renew = now + seconds / 3.0
            if row["state"] == State.CANCEL_REQUESTED:
                self._attempt.cancel_seen = True
