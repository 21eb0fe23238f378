"""The part of ``App`` for cron (docs/cron.md): ``@app.periodic``, the scheduler pass, and the
questions "which windows ran, which were skipped and why". Held by ``App``; the logic lives
in ``scheduler.py``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from ..core import payloads
from ..model.models import iso
from ..services.scheduler import (
    ACTOR,
    ENQUEUED,
    SKIPPED,
    Schedule,
    as_time,
    make_schedule,
    schedule_due,
    window_from_row,
    window_key,
)
from ..store.base import NewTask
from .core import Core, Part

log = logging.getLogger("jobtrail.cron")

F = TypeVar("F", bound=Callable[..., Any])

_DEFINITION = ("kind", "cron", "tz", "queue", "catch_up", "on_paused")


class Cron(Part):
    """``@app.periodic`` and the scheduler pass; owns the schedules this app registers."""

    def __init__(self, core: Core) -> None:
        super().__init__(core)
        self._periodic: dict[str, Schedule] = {}

    def periodic(
        self,
        cron: str,
        *,
        kind: str | None = None,
        payload: Any = None,
        queue: str | None = None,
        tz: str = "UTC",
        catch_up: int = 1,
        on_paused: str = "run",
        **task_options: Any,
    ) -> Callable[[F], F]:
        """Register a handler ``fn(ctx, payload)`` as a task kind (default: the function's
        name; ``task_options`` as for ``@app.task``) that runs on a cron schedule.

        ``cron``: five fields (minute hour day month weekday), or six with seconds last
        (croniter's convention). Windows are the expression's fire times in ``tz``. After
        downtime the newest ``catch_up`` missed windows run and older ones are recorded as
        skipped (``window_skipped_catch_up_bound``). ``on_paused="skip"`` records a window
        whose queue is paused as skipped (``window_skipped_paused``) instead of enqueuing it.
        """

        def register(fn: F) -> F:
            name = kind or getattr(fn, "__name__", None)
            if not isinstance(name, str) or not name:
                raise ValueError("a periodic kind needs a name: pass kind=...")
            if name in self._core._kinds:
                raise ValueError(f"task kind {name!r} is already registered")
            payloads.encode(payload, self._core.max_payload_bytes)
            schedule = make_schedule(
                name,
                cron,
                tz=tz,
                queue=queue or self._core.default_queue,
                catch_up=catch_up,
                on_paused=on_paused,
                payload=payload,
            )
            self._core.task(name, queue=queue, **task_options)(fn)
            self._periodic[name] = replace(schedule, queue=self._core._kinds[name].queue)
            return fn

        return register

    def schedule_due(self) -> list[dict[str, Any]]:
        """One scheduler pass now (workers run one about every second): enqueue the due windows
        of every periodic kind by the database clock. Returns the windows this call recorded —
        ``{kind, window, state, reason, task_id, earlier_skipped}`` — and not those another
        scheduler recorded first."""
        return schedule_due(self._driver, self._periodic, self._cron_task)

    def _cron_task(self, schedule: Schedule, window: datetime) -> NewTask:
        new = self._core._new_task(
            dict(
                kind=schedule.kind,
                payload=schedule.payload,
                idempotency_key=window_key(window),
                tenant="",
                queue=schedule.queue,
                run_at=window,
            )
        )
        data = {"cron_window": iso(window), "cron": schedule.cron, "tz": schedule.tz}
        return replace(new, actor=ACTOR, data=data)

    def _cron_tick(self) -> None:
        """The worker's scheduler pass: never raises (the store may be down)."""
        if not self._periodic:
            return
        try:
            self.schedule_due()
        except Exception as exc:
            log.warning("cron scheduling failed: %s: %s", type(exc).__name__, exc)

    def cron_windows(
        self, kind: str, limit: int = 100, *, state: str | None = None
    ) -> list[dict[str, Any]]:
        """A periodic kind's recorded windows, newest first: ``kind``, ``window`` (aware UTC
        datetime), ``state`` (``enqueued``/``skipped``), ``reason`` (a ``window_skipped_*``
        code for a skipped window), ``task_id``, ``earlier_skipped``, ``recorded_at``."""
        if not isinstance(kind, str) or not kind:
            raise ValueError("kind must be a non-empty string")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ValueError("limit must be between 1 and 10000")
        if state not in (None, ENQUEUED, SKIPPED):
            raise ValueError(f"state must be {ENQUEUED!r} or {SKIPPED!r}, not {state!r}")
        with self._driver.transaction(write=False) as tx:
            rows = self._driver.cron_window_list(tx, kind=kind, state=state, limit=limit)
        return [window_from_row(r) for r in rows]

    def schedules(self) -> list[dict[str, Any]]:
        """Every schedule this app registers or the store knows: ``kind``, ``cron``, ``tz``,
        ``queue``, ``catch_up``, ``on_paused``, ``last_window``, ``next_window`` (by the
        database clock), ``since`` (windows after this time count: first seen, or the
        expression last changed) and ``registered`` (known to this app)."""
        with self._driver.transaction(write=False) as tx:
            now = self._driver.db_now(tx)
            stored = {r["kind"]: r for r in self._driver.cron_schedules(tx)}
        out: list[dict[str, Any]] = []
        for name in sorted(set(self._periodic) | set(stored)):
            row = stored.get(name)
            schedule = self._periodic.get(name)
            if schedule is None and row is not None:
                try:
                    schedule = make_schedule(
                        name,
                        row["cron"],
                        tz=row["tz"],
                        queue=row["queue"],
                        catch_up=row["catch_up"],
                        on_paused=row["on_paused"],
                    )
                except ValueError:  # e.g. a time zone this machine does not know
                    schedule = None
            last = as_time(row["last_window"]) if row and row["last_window"] is not None else None
            since = as_time(row["anchor_at"]) if row else None
            start = max(t for t in (now, last, since) if t is not None)
            if schedule is not None:
                definition = schedule.to_row()
            else:
                assert row is not None
                definition = {k: row[k] for k in _DEFINITION}
            out.append(
                {
                    **definition,
                    "last_window": last,
                    "next_window": schedule.next_after(start) if schedule else None,
                    "since": since,
                    "registered": name in self._periodic,
                }
            )
        return out
