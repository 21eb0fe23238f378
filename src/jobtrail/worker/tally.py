"""What a worker's attempts did, for its stop line (tasks and attempts counted
separately — an attempt that schedules a retry is not a task done)."""

from __future__ import annotations

import threading
from collections import Counter

from ..model.machine import State

#: The states an attempt's outcome ends a task in, in the order the stop line names them.
_ENDED = (State.SUCCEEDED, State.DEAD, State.CANCELLED)


class Tally:
    """Counts of the states this worker's written outcomes moved tasks to (thread-safe: the
    pump and the handler threads write outcomes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._to: Counter[State] = Counter()

    def count(self, to_state: State, n: int = 1) -> None:
        if n:
            with self._lock:
                self._to[to_state] += n

    def finished(self) -> int:
        """Tasks this worker's attempts ended (succeeded, dead or cancelled)."""
        with self._lock:
            return sum(self._to[s] for s in _ENDED)

    def summary(self, attempts: int) -> str:
        """``3 attempts, 1 task finished (1 succeeded), 2 to run again``: attempts are every
        attempt this worker ran to an end (``processed``); the rest say what they did."""
        with self._lock:
            to = dict(self._to)
        ended = {s: to.get(s, 0) for s in _ENDED}
        done = sum(ended.values())
        parts = [
            f"{attempts} attempt{'s' if attempts != 1 else ''}",
            f"{done} task{'s' if done != 1 else ''} finished"
            + (
                " (" + ", ".join(f"{n} {s.value}" for s, n in ended.items() if n) + ")"
                if done
                else ""
            ),
        ]
        again = to.get(State.QUEUED, 0)
        if again:
            parts.append(f"{again} to run again (retry or snooze)")
        submitted = to.get(State.AWAITING_RECEIPT, 0)
        if submitted:
            parts.append(f"{submitted} awaiting a receipt")
        unwritten = attempts - sum(to.values())
        if unwritten > 0:
            parts.append(f"{unwritten} without an outcome written (lease lost)")
        return ", ".join(parts)
