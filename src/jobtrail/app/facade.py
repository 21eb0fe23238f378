"""``App``: the facade users touch. Registers task kinds, enqueues, runs workers, answers
questions, and carries out the operator's actions — each through the one transition path.

``App`` holds its parts (the package docstring names them), each built here on the ``Core`` and
given the other parts it uses, and forwards each public method to the part that owns it
(``forward``). What is left here is its own: the constructor, the settings and the lifecycle."""

from __future__ import annotations

import builtins
import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..core.results import DEFAULT_RESULT_LIMIT
from ..model import validate
from ..model.kinds import DEFAULT_MAX_PAYLOAD
from ..services.retention import Retention, parse_retention
from ..store.base import Driver
from ..store.open import open_driver
from .actions import Actions
from .aio import Async
from .core import Core, _require_name
from .cron import Cron
from .effects import Effects
from .enqueue import Enqueue
from .events import Events
from .forward import forward
from .ops import Ops
from .rates import Rates
from .reads import Reads
from .replays import Replays
from .search import Search
from .views import Views
from .webhooks import Webhooks
from .workers import Workers

#: The largest ``result_limit`` (a return value is stored in one column: 64 MiB is plenty).
MAX_RESULT_LIMIT = 64 * 1024 * 1024


class App:
    """One jobtrail application: a store (``url``) and the task kinds registered on it.

    ``url`` is ``sqlite:///path.db`` or ``postgresql://…``; else ``JOBTRAIL_DATABASE_URL``; else
    ``sqlite:///jobtrail.db``. ``version`` is recorded on every claim so a dead letter shows
    which code failed it (else ``JOBTRAIL_APP_VERSION``, else the handlers' package version).
    ``result_limit``: the largest handler return value stored, in bytes of JSON (
    default 1 MiB); a larger one ends its attempt ``dead`` (``invalid_input``).
    ``retention`` gives, per finished state, how long its tasks are kept before a worker
    prunes them (seconds or a ``timedelta``; ``None`` keeps for ever): by default
    ``{"succeeded": 7 days, "cancelled": 7 days, "dead": None}``.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        default_queue: str = "default",
        version: str | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD,
        result_limit: int = DEFAULT_RESULT_LIMIT,
        pooler: str | None = None,
        listen_url: str | None = None,
        poll_interval: float = 1.0,
        retention: Mapping[str, float | timedelta | None] | None = None,
        **driver_options: Any,
    ) -> None:
        """``pooler="transaction"`` when PostgreSQL is reached through a pooler in transaction
        mode (PgBouncer's ``pool_mode=transaction``, Supavisor, RDS Proxy): no named prepared
        statements, no session settings, LISTEN only through ``listen_url`` (a direct or
        session-pooled URL), else idle workers poll every ``poll_interval`` seconds (the
        default of ``run_worker``). ``pooler`` and ``listen_url`` default to
        ``JOBTRAIL_POOLER`` and ``JOBTRAIL_LISTEN_URL``; SQLite ignores them (docs/postgres.md).
        """
        _require_name(default_queue, "default_queue")
        validate.integer(result_limit, "result_limit", 1, MAX_RESULT_LIMIT)
        if not isinstance(poll_interval, int | float) or not 0 < poll_interval <= 3600:
            raise ValueError(
                f"poll_interval must be a number of seconds in (0, 3600], not {poll_interval!r}"
            )
        url = url or os.environ.get("JOBTRAIL_DATABASE_URL") or "sqlite:///jobtrail.db"
        self.pooler = pooler or os.environ.get("JOBTRAIL_POOLER") or None
        self.listen_url = listen_url or os.environ.get("JOBTRAIL_LISTEN_URL") or None
        self._driver: Driver = open_driver(
            url, pooler=self.pooler, listen_url=self.listen_url, **driver_options
        )
        self._core = core = Core(
            self._driver,
            self,
            url=url,
            default_queue=default_queue,
            version=version or os.environ.get("JOBTRAIL_APP_VERSION"),
            max_payload_bytes=max_payload_bytes,
            result_limit=result_limit,
            retention=parse_retention(retention),
            poll_interval=float(poll_interval),
        )
        self._kinds = core._kinds  # the registry, as tests and tools read it
        self._enqueue = Enqueue(core)
        self._rates = Rates(core)
        self._ops = Ops(core, self._rates)
        self._reads = Reads(core, self._ops.live_facts)
        self._views = Views(core, self._ops.live_facts)
        self._search = Search(core)
        self._effects = Effects(core)
        self._webhooks = Webhooks(core, self._effects)
        self._actions = Actions(core, self._reads, self._effects)
        self._replays = Replays(core)
        self._events = Events(core)
        self._cron = Cron(core)
        self._periodic = self._cron._periodic
        self._workers = Workers(core, self._cron._cron_tick)
        self._async = Async(core, self._enqueue, self._reads, self._actions, self._replays)

    # -- lifecycle ------------------------------------------------------------------------------
    def migrate(self) -> list[int]:
        """Create or upgrade the schema (idempotent; safe when several processes run it)."""
        return self._driver.migrate()

    def close(self) -> None:
        """Release pools and connections."""
        self._driver.close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def db_now(self) -> datetime:
        """The database clock's current time (the clock every decision uses)."""
        with self._driver.transaction(write=False) as tx:
            return self._driver.db_now(tx)

    # -- settings (kept by the core, where the parts read them) ---------------------------------
    @property
    def url(self) -> str:
        return self._core.url

    @property
    def default_queue(self) -> str:
        return self._core.default_queue

    @property
    def max_payload_bytes(self) -> int:
        return self._core.max_payload_bytes

    @max_payload_bytes.setter
    def max_payload_bytes(self, value: int) -> None:
        self._core.max_payload_bytes = value

    @property
    def result_limit(self) -> int:
        return self._core.result_limit

    @result_limit.setter
    def result_limit(self, value: int) -> None:
        self._core.result_limit = value

    @property
    def retention(self) -> Retention:
        """Seconds each finished state is kept before the worker prunes it."""
        return self._core.retention

    @retention.setter
    def retention(self, value: Retention) -> None:
        self._core.retention = value

    @property
    def poll_interval(self) -> float:
        return self._core.poll_interval

    @poll_interval.setter
    def poll_interval(self, value: float) -> None:
        self._core.poll_interval = value

    # -- the kinds (core.py) --------------------------------------------------------------------
    task = forward("_core", Core.task)
    on_ended_outside_run = forward("_core", Core.on_ended_outside_run)
    _new_task = forward("_core", Core._new_task)
    _task_from_row = staticmethod(Core._task_from_row)

    @property
    def kinds(self) -> builtins.list[str]:
        return self._core.kinds

    @property
    def version(self) -> str | None:
        """The code version recorded on every claim: the App's ``version``, else
        ``JOBTRAIL_APP_VERSION``, else the installed version of the handlers' package."""
        return self._core.version

    # -- enqueue (enqueue.py) -------------------------------------------------------------------
    enqueue = forward("_enqueue", Enqueue.enqueue)
    enqueue_many = forward("_enqueue", Enqueue.enqueue_many)

    # -- reads (reads.py) -----------------------------------------------------------------------
    get = forward("_reads", Reads.get)
    result = forward("_reads", Reads.result)
    watch_finished = forward("_reads", Reads.watch_finished)
    finished_among = forward("_reads", Reads.finished_among)
    list = forward("_reads", Reads.list)
    transitions = forward("_reads", Reads.transitions)
    explain = forward("_reads", Reads.explain)

    # -- search for the dashboard (search.py) ---------------------------------------------------
    search = forward("_search", Search.search)
    search_states = forward("_search", Search.search_states)
    replay_effects = forward("_search", Search.replay_effects)

    # -- queues, health, pruning (ops.py, rates.py) ---------------------------------------------
    pause = forward("_ops", Ops.pause)
    resume = forward("_ops", Ops.resume)
    set_limit = forward("_ops", Ops.set_limit)
    queues = forward("_ops", Ops.queues)
    queue_history = forward("_ops", Ops.queue_history)
    stats = forward("_ops", Ops.stats)
    transition_counts = forward("_ops", Ops.transition_counts)
    prune = forward("_ops", Ops.prune)
    set_rate = forward("_rates", Rates.set_rate)

    # -- read helpers for people (views.py) -----------------------------------------------------
    steps = forward("_views", Views.steps)
    why_not_running = forward("_views", Views.why_not_running)
    state_counts = forward("_views", Views.state_counts)
    find_by_key = forward("_views", Views.find_by_key)
    dead_preview = forward("_views", Views.dead_preview)
    activity = forward("_views", Views.activity)
    transitions_between = forward("_views", Views.transitions_between)

    # -- outbox, receipts, workflows (effects.py) -----------------------------------------------
    sink = forward("_effects", Effects.sink)
    http_sink = forward("_effects", Effects.http_sink)
    outbox = forward("_effects", Effects.outbox)
    dispatch_outbox = forward("_effects", Effects.dispatch_outbox)
    confirm_receipt = forward("_effects", Effects.confirm_receipt)
    enqueue_workflow = forward("_effects", Effects.enqueue_workflow)
    children = forward("_effects", Effects.children)

    # -- webhooks (webhooks.py) -----------------------------------------------------------------
    webhook = forward("_webhooks", Webhooks.webhook)  # type: ignore[arg-type]
    webhook_sources = forward("_webhooks", Webhooks.webhook_sources)
    receive_webhook = forward("_webhooks", Webhooks.receive_webhook)

    # -- cancel, force, annotate, dismiss (actions.py) ------------------------------------------
    cancel = forward("_actions", Actions.cancel)
    force = forward("_actions", Actions.force)
    annotate = forward("_actions", Actions.annotate)
    dismiss = forward("_actions", Actions.dismiss)

    # -- durable handlers' events (events.py) ---------------------------------------------------
    send_event = forward("_events", Events.send_event)

    # -- replay and dead letters (replays.py) ---------------------------------------------------
    replay = forward("_replays", Replays.replay)
    replay_preview = forward("_replays", Replays.replay_preview)
    replay_dead = forward("_replays", Replays.replay_dead)
    start_replay_run = forward("_replays", Replays.start_replay_run)
    replay_runs = forward("_replays", Replays.replay_runs)
    dead = forward("_replays", Replays.dead)

    # -- cron (cron.py) -------------------------------------------------------------------------
    periodic = forward("_cron", Cron.periodic)  # type: ignore[arg-type]
    schedule_due = forward("_cron", Cron.schedule_due)
    cron_windows = forward("_cron", Cron.cron_windows)
    schedules = forward("_cron", Cron.schedules)
    _cron_tick = forward("_cron", Cron._cron_tick)

    # -- workers, sweep, check (workers.py) -----------------------------------------------------
    sweep = forward("_workers", Workers.sweep)
    run_worker = forward("_workers", Workers.run_worker)
    start_worker = forward("_workers", Workers.start_worker)  # type: ignore[arg-type]
    worker_collaborators = forward("_workers", Workers.worker_collaborators)
    workers = forward("_workers", Workers.workers)
    check = forward("_workers", Workers.check)

    # -- the async API (aio.py) -----------------------------------------------------------------
    aenqueue = forward("_async", Async.aenqueue)
    aenqueue_many = forward("_async", Async.aenqueue_many)
    aget = forward("_async", Async.aget)
    alist = forward("_async", Async.alist)
    atransitions = forward("_async", Async.atransitions)
    aexplain = forward("_async", Async.aexplain)
    aresult = forward("_async", Async.aresult)
    acancel = forward("_async", Async.acancel)
    areplay = forward("_async", Async.areplay)
    asend_event = forward("_async", Async.asend_event)
    aclose = forward("_async", Async.aclose)


def rebound(loaded: App, url: str, *, pooler: str | None, listen_url: str | None) -> App:
    """``loaded``'s registrations on another database or pooler (the CLI's ``--db``,
    ``--pooler``, ``--listen-url``): its settings, kinds, sinks, schedules, webhook sources and
    hooks, and any attribute its caller set on it, on a new ``App`` with its own driver."""
    core = loaded._core
    app = App(
        url,
        default_queue=core.default_queue,
        version=core._version,
        max_payload_bytes=core.max_payload_bytes,
        result_limit=core.result_limit,
        pooler=pooler or loaded.pooler,
        listen_url=listen_url or loaded.listen_url,
        poll_interval=core.poll_interval,
    )
    app.retention = core.retention
    app._kinds.update(core._kinds)
    app._core._sinks.update(core._sinks)
    app._core._ended_hooks.extend(core._ended_hooks)
    app._periodic.update(loaded._periodic)
    app._webhooks._webhook_tenants.update(loaded._webhooks._webhook_tenants)
    for name, value in vars(loaded).items():  # the caller's own attributes (the demo's)
        if name not in vars(app) and not hasattr(App, name):
            setattr(app, name, value)
    return app
