"""The worker's settings (``WorkerOptions``), its identity (``make_owner_id``) and the
collaborators it is given (``Collaborators``)."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.results import DEFAULT_RESULT_LIMIT
from ..model import validate
from ..model.kinds import KindSpec
from ..services.outbox import Sink
from ..store.base import Driver, NewTask


def make_owner_id() -> str:
    """``host:pid:boot`` — one process incarnation; ``boot`` is random per worker start."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass
class WorkerOptions:
    queues: list[str]
    concurrency: int = 4
    burst: bool = False
    #: Tasks claimed beyond the free handler slots and held ready (leased) for the next free
    #: handler: the round trip for the next tasks overlaps the handlers of the current ones.
    #: ``None``: adaptive (held only behind handlers that run short, ``worker.prefetch``);
    #: ``N``: up to N whatever the handlers do; 0: none.
    prefetch: int | None = None
    poll_interval: float = 1.0
    sweep_interval: float = 1.0
    grace: float = 30.0
    install_signals: bool = True
    #: A burst worker also waits for queued tasks due within this many seconds (retries,
    #: delays) before it returns; 0: returns once nothing is due now.
    drain: float = 0.0
    #: Seconds between heartbeats of the worker's row (``worker/presence.py``).
    beat_interval: float = 5.0
    #: Seconds of silence after which a worker that did not stop (SIGKILL, power loss) is
    #: forgotten: no longer listed, its row deleted by the next beat of any worker. The beat
    #: rides on the sweep, so the row gets at least three sweep intervals.
    stale_after: float = 60.0

    def __post_init__(self) -> None:
        """Out of range is refused before the worker starts, with a ``ValueError`` naming the
        option (a concurrency of 10**30 made every claim overflow, retried for ever)."""
        slots, ahead = self.concurrency, self.prefetch
        if not _whole(slots) or not 1 <= slots <= validate.MAX_CONCURRENCY:
            raise ValueError(f"concurrency must be at least 1 (at most {validate.MAX_CONCURRENCY})")
        if ahead is not None and (not _whole(ahead) or not 0 <= ahead <= validate.MAX_PREFETCH):
            raise ValueError(
                f"prefetch must be 0 or more (at most {validate.MAX_PREFETCH}), or None (adaptive)"
            )
        validate.seconds(self.poll_interval, "poll_interval", positive=True, high=validate.MAX_POLL)
        validate.seconds(
            self.sweep_interval, "sweep_interval", positive=True, high=validate.MAX_POLL
        )
        validate.seconds(self.grace, "grace", high=validate.MAX_GRACE)
        validate.seconds(self.drain, "drain", high=validate.MAX_GRACE)
        if self.drain and not self.burst:
            raise ValueError("drain is for a burst worker: pass burst=True (--burst) with it")
        validate.seconds(self.beat_interval, "beat_interval", positive=True, high=validate.MAX_POLL)
        validate.seconds(self.stale_after, "stale_after", positive=True, high=validate.MAX_GRACE)
        if self.stale_after < 2 * self.beat_interval:
            raise ValueError(
                f"stale_after ({self.stale_after}s) must be at least twice beat_interval "
                f"({self.beat_interval}s): a live worker would be taken for dead between beats"
            )


@dataclass(frozen=True)
class Collaborators:
    """What a worker needs from the layers below it, composed by ``App.run_worker`` (the facade
    above owns them; the worker never reaches into it): the driver, the kind registry, the
    outbox sinks, the cron pass, the code version claims are made for, and the retention
    of finished tasks."""

    driver: Driver
    kinds: dict[str, KindSpec]
    sinks: dict[str, list[Sink]]
    cron_tick: Callable[[], None]
    version: str | None
    #: The largest return value stored, in bytes of JSON (``App(result_limit=)``).
    result_limit: int = DEFAULT_RESULT_LIMIT
    #: The database as the start line names it (``model.urls.describe_url``: no password).
    database: str = ""
    #: seconds each finished state is kept (``services.retention``); ``None``: no pruning
    retention: dict[str, float | None] | None = None
    #: given the ids of tasks the worker's sweep ended (``App.on_ended_outside_run``)
    ended: Callable[[Sequence[int]], None] | None = None
    #: builds a child task from ``enqueue``'s arguments (``ctx.spawn``; the App's checks)
    new_task: Callable[[dict[str, Any]], NewTask] | None = None


class ProvidesCollaborators(Protocol):
    """What gives a worker its collaborators (``App.worker_collaborators``)."""

    def worker_collaborators(self) -> Collaborators: ...


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
