"""How many tasks the pump claims beyond its free handler slots (``WorkerOptions.prefetch``).

A task claimed ahead is leased to this worker and waits for one of its handler slots, so the
next claim's round trip overlaps the handlers that run now: for short tasks that is most of
the throughput. It is also a risk: a task held behind a long handler waits for it even when
another worker has a slot free.

``prefetch=None`` (the default) adapts to what the worker has seen run. While all its recent
work is short it claims ``ahead_for(concurrency, slowest)`` tasks ahead, and none otherwise.
How many: as many as its slots get through in about ``WAIT`` at the slowest recent run's pace
(a held task waits about that long at most), so about ``BATCH`` per round trip in all for
tasks of a millisecond or less whatever the concurrency, and four per slot for tasks of 20 ms;
at least ``concurrency - 1``. None:

- none with one handler slot (the next task would wait behind whatever the slot runs);
- none until a handler has returned, and none while a task it holds is of a kind it has not
  seen run or whose recent runs were not all shorter than ``SHORT`` (a decaying maximum per
  kind: one long run withdraws a kind for about a hundred runs);
- none while any handler has been running for ``SHORT`` or more;
- none while a kind that ran long was seen within ``MEMORY`` seconds (its tasks may come next).

So a worker that is running a long task claims only into its free slots, and a task claimed
ahead follows short tasks. For short tasks that is the throughput of a fixed prefetch (the
claim's round trip overlaps the handlers). A held task can still wait behind long runs in
one case: when ``concurrency`` tasks that each run long arrive in one claim, of kinds this
worker has not seen run long — every slot takes one of them, and what was claimed with them
waits for the first to end.

``prefetch=N`` holds up to ``N`` whatever the handlers do (0: never).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from ..core.context import Attempt

#: seconds: handlers that take no longer than this are short. Ten round trips or more: below
#: it the round trip is a large part of a task's time in a slot, and worth overlapping; above
#: it prefetching gains a few percent at most, and is not worth a wait behind a long run.
SHORT = 0.02
#: tasks per round trip the adaptive prefetch aims at at most: a round trip
#: costs the worker and the server about the same whatever it carries, and waits for its
#: commit's WAL flush, so a worker of four slots that claimed only four at a time spent three
#: times the CPU per task of one that claims twenty, and two workers of ten slots drained
#: 1.4x as fast claiming 30 at a time as 20, 1.8x claiming 60 (many-workers bench,
#: docs/performance.md)
BATCH = 60
#: seconds a task claimed ahead may wait behind short runs, about: the adaptive prefetch claims
#: ahead what the worker's slots run in this time at the slowest recent pace (four per slot
#: for runs just under ``SHORT``; a worker of four slots running 0.1 ms tasks, as sixteen of
#: them on two cores do in the many-workers bench, fills its round trip to ``BATCH``)
WAIT = 4 * SHORT
#: seconds a long run keeps the worker from claiming ahead
MEMORY = 60.0
#: how fast a kind's recorded longest run decays with each run (0.95: a 2 s run falls below
#: SHORT after about 90 runs)
DECAY = 0.95


def ahead_for(concurrency: int, slowest: float = SHORT) -> int:
    """How many the adaptive prefetch claims ahead with ``concurrency`` slots while the
    slowest recent run took ``slowest`` seconds: none with one slot; else what the slots get
    through in ``WAIT`` at that pace (at least one per slot), at most ``BATCH`` per round
    trip with the free slots, and at least ``concurrency - 1``."""
    if concurrency <= 1:
        return 0
    per_slot = max(1, int(WAIT / max(slowest, 1e-6)))
    return max(concurrency - 1, min(BATCH - concurrency, per_slot * concurrency))


class Prefetch:
    def __init__(self, fixed: int | None, concurrency: int) -> None:
        if fixed is not None and fixed < 0:
            raise ValueError("prefetch must be 0 or more, or None (adaptive)")
        self.fixed = fixed
        self.concurrency = concurrency
        self._longest: dict[str, float] = {}  # kind -> decaying maximum of its run times
        self._long_seen_at = float("-inf")  # when a run of a kind not short last ended
        self._lock = threading.Lock()

    def observe(self, kind: str, seconds: float, now: float) -> None:
        """A handler of ``kind`` ran for ``seconds``, ending at ``now`` (monotonic)."""
        with self._lock:
            before = self._longest.get(kind)
            longest = seconds if before is None else max(seconds, before * DECAY)
            self._longest[kind] = longest
            if longest >= SHORT:
                self._long_seen_at = now

    def short(self, kind: str) -> bool:
        longest = self._longest.get(kind)
        return longest is not None and longest < SHORT

    def room(self, holding: Iterable[Attempt], now: float) -> int:
        """How many tasks may be claimed beyond the free slots now; ``holding``: the attempts
        this worker holds (running, held for a slot, or finished and not yet written), read
        under the worker's lock."""
        if self.fixed is not None:
            return self.fixed
        if self.concurrency <= 1 or not self._longest or now - self._long_seen_at < MEMORY:
            return 0
        for attempt in holding:
            if attempt.handler_done:
                continue
            if attempt.begun and now - attempt.started >= SHORT:
                return 0  # a handler runs long now
            if not self.short(attempt.task.kind):
                return 0  # a kind not seen to run short is about to run, or runs
        with self._lock:  # once a round trip, not once a task (observe): a few kinds at most
            slowest = max(self._longest.values())
        return ahead_for(self.concurrency, slowest)
