"""The state the parts of a worker share."""

from __future__ import annotations

import asyncio
import threading

from ..core.context import Attempt
from ..store.base import Driver
from .options import Collaborators, WorkerOptions
from .pool import _Completions, _HandlerPool
from .prefetch import Prefetch
from .tally import Tally


class WorkerState:
    """The fields every part of the worker shares, set by ``Worker.__init__`` (``pump.py``):
    ``Worker`` is this state, and each part it holds (``Outcomes``, ``Handlers``,
    ``LeaseRenewal``, ``IdleHandOff``) is given it, with the other parts it uses."""

    collab: Collaborators
    driver: Driver
    options: WorkerOptions
    owner: str
    version: str | None
    running: dict[int, Attempt]
    _started: dict[int, int]  # task id -> the attempt this worker started (insertion-ordered)
    processed: int
    tally: Tally
    round_trips: int
    _running_lock: threading.Lock
    _stop: threading.Event
    _done: threading.Event
    _loop: asyncio.AbstractEventLoop | None
    _loop_thread: threading.Thread | None
    _outbox_wake: threading.Event
    _completions: _Completions
    _pool: _HandlerPool
    _prefetch: Prefetch
    _async_slots: asyncio.Semaphore | None
    _limited: list[str]
    _limited_read_at: float
    _kinds: list[str]
    _unsure: bool  # a failed round may have left tasks leased to us unstarted (pump.py)
