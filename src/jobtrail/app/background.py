"""``App.start_worker``: a worker on a thread of the calling process (an ASGI lifespan, a
notebook, a test), stopped by ``WorkerHandle.stop`` as SIGTERM stops ``jobtrail worker``."""

from __future__ import annotations

import asyncio
import logging
import threading

from ..worker import Worker

log = logging.getLogger("jobtrail")

#: ``run_worker``'s keyword arguments, which ``start_worker`` takes too.
RUN_WORKER_OPTIONS = (
    "queues",
    "concurrency",
    "prefetch",
    "burst",
    "poll_interval",
    "sweep_interval",
    "grace",
    "drain",
)


class WorkerHandle:
    """A running background worker. ``stop(grace=None)`` stops claiming, gives running
    handlers ``grace`` seconds (default: the worker's ``grace``) to reach an outcome, and
    returns once the worker has stopped; what it still holds then is recovered by the lease
    rules, as after a SIGTERM. A handler still running then keeps running on its thread (Python
    cannot stop a thread) and writes its outcome if it still holds the lease: close the App
    only after such handlers end. ``processed``: attempts finished so far; ``error``: what
    ended the worker, if it failed."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.error: BaseException | None = None
        self.result: int | None = None
        self._thread = threading.Thread(target=self._run, name="jobtrail-worker", daemon=True)

    @classmethod
    def start(cls, worker: Worker) -> WorkerHandle:
        handle = cls(worker)
        handle._thread.start()
        return handle

    def _run(self) -> None:
        try:
            self.result = self.worker.run()
        except BaseException as exc:  # noqa: BLE001 - kept for stop() and .error
            self.error = exc
            log.exception("background worker %s failed", self.worker.owner)

    @property
    def processed(self) -> int:
        return self.worker.processed

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, grace: float | None = None) -> int:
        """Stop the worker as SIGTERM does and wait for it; the attempts it finished.
        Re-raises what made the worker fail, if anything did."""
        if grace is not None:
            if not grace >= 0:
                raise ValueError("grace must be a number of seconds, 0 or more")
            self.worker.options.grace = float(grace)
        self.worker.stop()
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.worker.processed

    async def astop(self, grace: float | None = None) -> int:
        """``stop`` from a coroutine (the wait for running handlers does not block the loop)."""
        return await asyncio.to_thread(self.stop, grace)
