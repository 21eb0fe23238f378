"""How many tasks the pump claims beyond its free handler slots (``WorkerOptions.prefetch``).

A task claimed ahead is leased to this worker and waits for one of its handler slots, so the
next claim's round trip overlaps the handlers that run now: for short tasks that is most of
the throughput. It is also a risk: a task held behind a long handler waits for it even when
another worker has a slot free.

``prefetch=None`` (the default) adapts: a task is claimed ahead only behind the tasks this
worker holds that are of a kind whose recent runs all took less than ``SHORT`` (a decaying
maximum per kind: one long run withdraws the kind for about a hundred runs) and that have not
run for ``SHORT`` yet — one behind each, and at most ``concurrency`` in all. So an idle worker
claims only what its free slots start at once; nothing is claimed behind a kind this worker
has not seen run, nor behind a handler that has run long: a long task never has a task
waiting behind it, and a held task waits behind short ones only. The one way a held task
can wait longer is when the short tasks it follows turn long, on kinds that were short until
then.

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
#: how fast a kind's recorded longest run decays with each run (0.95: a 2 s run falls below
#: SHORT after about 90 runs)
DECAY = 0.95


class Prefetch:
    def __init__(self, fixed: int | None, concurrency: int) -> None:
        if fixed is not None and fixed < 0:
            raise ValueError("prefetch must be 0 or more, or None (adaptive)")
        self.fixed = fixed
        self.most = concurrency
        self._longest: dict[str, float] = {}  # kind -> decaying maximum of its run times
        self._lock = threading.Lock()

    def observe(self, kind: str, seconds: float) -> None:
        """A handler of ``kind`` ran for ``seconds`` (called as each handler returns)."""
        with self._lock:
            before = self._longest.get(kind)
            self._longest[kind] = seconds if before is None else max(seconds, before * DECAY)

    def short(self, kind: str) -> bool:
        longest = self._longest.get(kind)
        return longest is not None and longest < SHORT

    def room(self, holding: Iterable[Attempt], now: float) -> int:
        """How many tasks may be claimed beyond the free slots now; ``holding``: the attempts
        this worker holds (running, held for a slot, or finished and not yet written), read
        under the worker's lock."""
        if self.fixed is not None:
            return self.fixed
        return min(self.most, sum(1 for a in holding if self._short_ahead(a, now)))

    def _short_ahead(self, attempt: Attempt, now: float) -> bool:
        """A task may wait behind ``attempt``: its handler has not returned, has not run for
        ``SHORT`` yet (or has not begun), and its kind runs short."""
        if attempt.handler_done or (attempt.begun and now - attempt.started >= SHORT):
            return False
        return self.short(attempt.task.kind)
