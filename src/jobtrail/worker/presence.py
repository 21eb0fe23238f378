"""The worker's heartbeat row (``jobtrail_workers``): who it is, what it claims
from, and when it was last seen, so that ``app.workers()``, ``explain`` and ``doctor`` can
tell due work that no live worker takes.

The beat rides on the pump's sweep (every ``sweep_interval``, a statement every
``beat_interval`` seconds on the pump's own connection): no thread or connection of its own.
A stopping worker deletes its row; a killed one is forgotten once it has been silent for
``stale_after`` seconds (readers skip it, the next beat of any worker deletes it).
"""

from __future__ import annotations

import logging
import os
import socket
import time

from ..store.base import Driver, dumps

log = logging.getLogger("jobtrail.worker")


class Presence:
    """One worker's heartbeat row: ``beat`` at start and from the sweep, ``leave`` at stop."""

    def __init__(
        self,
        driver: Driver,
        owner: str,
        *,
        queues: list[str],
        kinds: list[str],
        concurrency: int,
        version: str | None,
        interval: float,
        stale_after: float,
    ) -> None:
        self.driver = driver
        self.owner = owner
        self.interval = interval
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.version = version
        self.queues = dumps(sorted(set(queues)))
        self.kinds = dumps(sorted(set(kinds)))
        self.concurrency = concurrency
        self.stale_after = stale_after
        self._next = float("-inf")

    def beat(self, *, force: bool = False) -> None:
        """Write the row (or move its ``last_seen_at``) when a beat is due, or at once with
        ``force``. A store that does not answer is the sweep's and the claim's to report: the
        next beat tries again."""
        now = time.monotonic()
        if not force and now < self._next:
            return
        self._next = now + self.interval
        try:
            with self.driver.single_statement(pinned=True) as tx:
                self.driver.worker_beat(
                    tx,
                    id=self.owner,
                    host=self.host,
                    pid=self.pid,
                    version=self.version,
                    queues=self.queues,
                    kinds=self.kinds,
                    concurrency=self.concurrency,
                    stale_after=self.stale_after,
                )
        except Exception as exc:
            log.debug("worker %s: heartbeat failed (%s)", self.owner, type(exc).__name__)
            self._next = now + min(self.interval, 1.0)

    def leave(self) -> None:
        """Delete the row: a stopped worker is no longer listed (a failure here leaves it to be
        forgotten after ``stale_after``)."""
        try:
            with self.driver.transaction() as tx:
                self.driver.worker_forget(tx, id=self.owner)
        except Exception as exc:
            log.debug("worker %s: could not remove its row (%s)", self.owner, type(exc).__name__)
