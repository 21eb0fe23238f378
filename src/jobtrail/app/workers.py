"""The parts of ``App`` that set things moving: workers (``run_worker``, ``start_worker``, the
``Collaborators`` a worker is given), the sweep of expired leases, and the invariant check.
Held by ``App``."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..model import models, validate
from ..model.urls import describe_url
from .core import Core, Part, _require_name

if TYPE_CHECKING:
    from ..worker import Collaborators, Worker
    from .background import WorkerHandle


class Workers(Part):
    """Workers, the sweep, the invariant check. Given ``cron_tick`` (``Cron._cron_tick``):
    each worker runs the cron pass."""

    def __init__(self, core: Core, cron_tick: Callable[[], None]) -> None:
        super().__init__(core)
        self._cron_tick = cron_tick

    # -- moving parts ---------------------------------------------------------------------------
    def sweep(self) -> dict[str, int]:
        """Move expired leases now (edges 7, 8, 18); returns counts by reason code."""
        from ..services.sweeper import sweep

        return sweep(self._driver, self._core._kinds, ended=self._core._report_ended)

    def run_worker(
        self,
        *,
        queues: builtins.list[str] | None = None,
        concurrency: int = 4,
        prefetch: int | None = None,
        burst: bool = False,
        poll_interval: float | None = None,
        sweep_interval: float = 1.0,
        grace: float = 30.0,
        drain: float = 0.0,
    ) -> int:
        """Run a worker in this thread until SIGTERM/SIGINT (or, with ``burst``, until nothing
        is due and nothing it holds is running). Returns the number of attempts it finished.

        ``drain=S`` (with ``burst``; tests and CI): also wait for queued tasks of this worker's
        queues and kinds that become due within ``S`` seconds (a retry's backoff, a snooze, a
        delay), and return once nothing is due within that horizon and nothing it holds is
        running. A task of a paused queue is not waited for.

        ``concurrency`` handlers run at once; tasks may be claimed ahead and held (leased to
        this worker) until a handler is free, so that the next claim's round trip overlaps the
        running handlers. ``prefetch=None`` (the default) claims ahead what the slots run in
        about 80 ms at the slowest recent pace (at most 60 tasks per round trip, at least
        ``concurrency - 1``) while everything this worker has seen run lately took under
        20 ms, and none otherwise
        (``worker.prefetch``): fast for short tasks, and a worker running a long task claims
        nothing ahead. ``prefetch=N`` holds up to N whatever the handlers do; 0 holds none.
        ``poll_interval`` defaults to the App's."""
        return self._worker(
            queues=queues,
            concurrency=concurrency,
            prefetch=prefetch,
            burst=burst,
            poll_interval=poll_interval,
            sweep_interval=sweep_interval,
            grace=grace,
            drain=drain,
        ).run()

    def _worker(
        self,
        *,
        queues: builtins.list[str] | None = None,
        poll_interval: float | None = None,
        **options: Any,
    ) -> Worker:
        from ..worker import Worker, WorkerOptions

        chosen = queues or sorted(
            {spec.queue for spec in self._core._kinds.values()} | {self._core.default_queue}
        )
        for q in chosen:
            _require_name(q, "queue")
        return Worker(
            self.worker_collaborators(),
            WorkerOptions(
                queues=list(chosen),
                poll_interval=self._core.poll_interval if poll_interval is None else poll_interval,
                **options,
            ),
        )

    def start_worker(self, **run_worker_options: Any) -> WorkerHandle:
        """Run a worker on a thread of this process (an ASGI lifespan, a notebook, a test) with
        ``run_worker``'s options; ``handle.stop(grace=None)`` stops it as SIGTERM stops
        ``run_worker`` (no new claims, running handlers get the grace period) and waits for it.
        Signals stay with the process: the worker installs no handlers."""
        from .background import RUN_WORKER_OPTIONS, WorkerHandle

        unknown = sorted(set(run_worker_options) - set(RUN_WORKER_OPTIONS))
        if unknown:
            raise TypeError(
                f"start_worker got unknown options {unknown}; run_worker's options are: "
                + ", ".join(RUN_WORKER_OPTIONS)
            )
        return WorkerHandle.start(self._worker(install_signals=False, **run_worker_options))

    def worker_collaborators(self) -> Collaborators:
        """What a worker of this app is given (``jobtrail.worker.Collaborators``): the driver,
        the kinds, the outbox sinks, the cron pass and the code version."""
        from ..worker import Collaborators

        return Collaborators(
            driver=self._driver,
            kinds=self._core._kinds,
            sinks=self._core._sinks,
            cron_tick=self._cron_tick,
            version=self._core.version,
            result_limit=self._core.result_limit,
            database=describe_url(self._core.url),
            retention=self._core.retention,
            ended=self._core._report_ended,
            new_task=self._core._new_task,
        )

    def workers(self, *, tenant: str | None = None) -> builtins.list[models.Worker]:
        """The live workers, oldest first: each running worker process's
        heartbeat row — owner id ``host:pid:boot``, host, pid, code version, queues, kinds it
        registers, concurrency, started, last seen — with the ids of the tasks leased to it
        now. A stopped worker is not listed; one that died without stopping is forgotten once
        its heartbeat is older than its ``stale_after`` (a minute by default). ``tenant``:
        only that tenant's tasks are listed in ``tasks`` (a tenant's token)."""
        validate.filter_text(tenant, "tenant")
        with self._driver.transaction(write=False) as tx:
            rows = self._driver.worker_list(tx)
            held = self._driver.worker_held_tasks(tx) if rows else []
        tasks: dict[str, builtins.list[str]] = {}
        for h in held:
            if tenant is None or h["tenant"] == tenant:
                tasks.setdefault(h["lease_owner"], []).append(str(h["id"]))
        return [
            models.Worker(
                id=r["id"],
                host=r["host"],
                pid=r["pid"],
                version=r["version"],
                queues=list(r["queues"]),
                kinds=list(r["kinds"]),
                concurrency=r["concurrency"],
                started_at=r["started_at"],
                last_seen_at=r["last_seen_at"],
                tasks=tasks.get(r["id"], []),
            )
            for r in rows
        ]

    def check(self) -> builtins.list[dict[str, Any]]:
        """Every invariant violation in the store (``jobtrail.services.check``; read-only).
        Each is a dict with ``rule``, ``task_id`` and its detail; the list is empty when
        all hold."""
        from ..services import check

        return check.run(self._driver)
