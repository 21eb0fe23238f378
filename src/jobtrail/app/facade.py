"""``App``: the facade users touch. Registers task kinds, enqueues, runs workers, answers
questions, and carries out the operator's actions — each through the one transition path.

``App`` is made of its concerns' mixins (the package docstring names them); what is left here
is its own: the constructor and the lifecycle."""

from __future__ import annotations

import builtins
import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..core.results import DEFAULT_RESULT_LIMIT
from ..model import validate
from ..model.kinds import DEFAULT_MAX_PAYLOAD, KindSpec
from ..services.retention import parse_retention
from ..services.scheduler import Schedule
from ..store.base import Driver
from ..store.open import open_driver
from .actions import ActionsAPI  # cancel, force, annotate, dismiss
from .aio import AsyncAPI  # the async API (§16.3): aenqueue ... aclose
from .core import _require_name
from .cron import CronAPI  # cron (§12): @app.periodic, schedule_due, cron_windows
from .effects import EffectsAPI
from .enqueue import EnqueueAPI  # enqueue, enqueue_many
from .ops import OpsAPI
from .reads import ReadsAPI  # get, result, list, transitions, explain
from .replays import ReplayAPI  # replay, replay runs, the dead letters' evidence (§16.6)
from .views import ViewsAPI  # read helpers for people (the dashboard)
from .webhooks import WebhooksAPI  # webhooks (§12)
from .workers import WorkersAPI  # run_worker, start_worker, sweep, check

#: The largest ``result_limit`` (a return value is stored in one column: 64 MiB is plenty).
MAX_RESULT_LIMIT = 64 * 1024 * 1024


class App(
    AsyncAPI,
    ActionsAPI,
    WorkersAPI,
    WebhooksAPI,
    EffectsAPI,
    ViewsAPI,
    ReadsAPI,
    OpsAPI,
    ReplayAPI,
    EnqueueAPI,
    CronAPI,
):
    """One jobtrail application: a store (``url``) and the task kinds registered on it.

    ``url`` is ``sqlite:///path.db`` or ``postgresql://…``; else ``JOBTRAIL_DATABASE_URL``; else
    ``sqlite:///jobtrail.db``. ``version`` is recorded on every claim so a dead letter shows
    which code failed it (else ``JOBTRAIL_APP_VERSION``, else the handlers' package version).
    ``result_limit``: the largest handler return value stored, in bytes of JSON (§16.1;
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
        self.result_limit = result_limit
        if not isinstance(poll_interval, int | float) or not 0 < poll_interval <= 3600:
            raise ValueError(
                f"poll_interval must be a number of seconds in (0, 3600], not {poll_interval!r}"
            )
        #: seconds each finished state is kept before the worker prunes it (SPEC §16.5)
        self.retention = parse_retention(retention)
        self.url = url or os.environ.get("JOBTRAIL_DATABASE_URL") or "sqlite:///jobtrail.db"
        self.pooler = pooler or os.environ.get("JOBTRAIL_POOLER") or None
        self.listen_url = listen_url or os.environ.get("JOBTRAIL_LISTEN_URL") or None
        self.poll_interval = float(poll_interval)
        self.default_queue = default_queue
        self._version = version or os.environ.get("JOBTRAIL_APP_VERSION")
        self.max_payload_bytes = max_payload_bytes
        self._kinds: dict[str, KindSpec] = {}
        self._sinks: dict[str, builtins.list[Any]] = {}
        self._periodic: dict[str, Schedule] = {}  # cron (app/cron.py)
        self._webhook_tenants: dict[str, str] = {}  # the tenant of each source (app/webhooks.py)
        self._ended_hooks: builtins.list[Any] = []  # on_ended_outside_run (app/core.py)
        self._driver: Driver = open_driver(
            self.url, pooler=self.pooler, listen_url=self.listen_url, **driver_options
        )

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
