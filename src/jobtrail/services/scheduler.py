"""Cron: periodic kinds and the leader-free scheduler that enqueues their windows.

Each fire time of a schedule's cron expression, read in its time zone and converted to UTC, is a
**window**. A scheduler runs inside every worker (and as ``app.schedule_due()``); no leader is
elected. For each periodic kind it reads the database clock, finds the windows that came due
since the last recorded one, and records each window in ``jobtrail_cron_windows`` — primary key
``(kind, window_at)``, inserted with ``ON CONFLICT DO NOTHING`` — in the same transaction as the
window's task (idempotency key ``cron:<window>``). Schedulers that race therefore collapse into
one task per window: whoever inserts the window row first decides it, the others do nothing.

* First run: a schedule never seen before (or whose expression or time zone changed) starts at
  its next window after the database's now — no backfill (``anchor_at``).
* Catch-up: after downtime only the newest ``catch_up`` missed windows are enqueued (each with
  ``run_at`` = its window, so they are due at once); the older ones are recorded ``skipped``
  with ``window_skipped_catch_up_bound``. The work is bounded: the newest ``SKIPPED_ROWS``
  skipped windows get a row each, and the oldest of those counts in ``earlier_skipped`` the
  earlier missed windows (counted forward from the last recorded window, at most
  ``SCAN_LIMIT``).
* ``on_paused="skip"``: a window whose queue is paused when it comes due is recorded
  ``skipped`` with ``window_skipped_paused``; with ``"run"`` the task is enqueued and waits for
  the queue to be resumed.
* Daylight saving time (tested in ``tests/conformance/test_cron.py``, described in
  ``docs/cron.md``): a local time that does not exist (spring forward) fires once at the first
  instant after the gap; a local time that happens twice (fall back) fires once, at its first
  occurrence — except for expressions whose minute or hour field is a wildcard (``*``,
  ``*/15``), which keep their rhythm through both passes. This is Debian/Vixie cron's rule.

Nothing here reads the local clock: every "now" is the database's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

from ..core import transition
from ..model.machine import Reason
from ..store.base import Driver, NewTask, Row, Tx

log = logging.getLogger("jobtrail.cron")

#: The most windows one catch-up scan iterates (forward or backward) for one kind.
SCAN_LIMIT = 1000
#: Skipped windows of one catch-up that get a row of their own (the newest ones).
SKIPPED_ROWS = 100
#: Upper bound of ``catch_up``.
MAX_CATCH_UP = SCAN_LIMIT
ON_PAUSED = ("run", "skip")
ENQUEUED, SKIPPED = "enqueued", "skipped"
#: The actor of a cron task's ``enqueued`` transition.
ACTOR = "cron"

_TICK = timedelta(microseconds=1)
_STALL = 8  # croniter answers that do not move forward before an iteration gives up


def as_time(value: Any) -> datetime:
    """A stored time as an aware UTC datetime (SQLite keeps epoch seconds as REAL)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime.fromtimestamp(float(value), UTC)


def window_key(window: datetime) -> str:
    """The idempotency key of a window's task: ``cron:2026-03-29T01:00:00Z``."""
    return "cron:" + window.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def window_of_key(key: str | None) -> datetime | None:
    """The window a cron task was enqueued for, from its idempotency key (else ``None``)."""
    if not key or not key.startswith("cron:"):
        return None
    try:
        return datetime.strptime(key[5:], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


@dataclass(frozen=True)
class Schedule:
    """A periodic kind's schedule. Build it with :func:`make_schedule` (it validates)."""

    kind: str
    cron: str
    tz: str
    queue: str
    catch_up: int = 1
    on_paused: str = "run"
    payload: Any = None
    zone: ZoneInfo = field(default=ZoneInfo("UTC"), compare=False, repr=False)
    #: True when the minute or hour field is a wildcard: such a schedule keeps its rhythm
    #: through a repeated (fall-back) hour instead of firing each local time only once.
    wild: bool = field(default=False, compare=False, repr=False)

    def _iter(self, start: datetime, backward: bool) -> Iterator[datetime]:
        it = croniter(self.cron, start.astimezone(self.zone), hash_id=self.kind)
        last = start.astimezone(UTC)
        stalled = 0
        while stalled < _STALL:
            try:
                local = it.get_prev(datetime) if backward else it.get_next(datetime)
            except CroniterBadDateError:  # no further match within croniter's 50-year search
                return
            when = local.astimezone(UTC)
            moved = when < last if backward else when > last
            if not moved:
                stalled += 1
                continue
            stalled = 0
            last = when
            if self.wild or not _second_pass(when, self.zone):
                yield when

    def after(self, start: datetime) -> Iterator[datetime]:
        """Windows strictly after ``start``, oldest first."""
        return self._iter(start, backward=False)

    def at_or_before(self, end: datetime) -> Iterator[datetime]:
        """Windows at or before ``end``, newest first."""
        return self._iter(end + _TICK, backward=True)

    def next_after(self, start: datetime) -> datetime | None:
        return next(self.after(start), None)

    def between(self, after: datetime, until: datetime, limit: int) -> tuple[list[datetime], bool]:
        """Windows in ``(after, until]``, oldest first, at most ``limit``; and whether there
        are more."""
        out: list[datetime] = []
        for when in self.after(after):
            if when > until:
                return out, False
            if len(out) == limit:
                return out, True
            out.append(when)
        return out, False

    def newest(self, after: datetime, until: datetime, count: int) -> list[datetime]:
        """The newest ``count`` windows in ``(after, until]``, oldest first."""
        out: list[datetime] = []
        if count <= 0:
            return out
        for when in self.at_or_before(until):
            if when <= after:
                break
            out.append(when)
            if len(out) == count:
                break
        out.reverse()
        return out

    def to_row(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "cron": self.cron,
            "tz": self.tz,
            "queue": self.queue,
            "catch_up": self.catch_up,
            "on_paused": self.on_paused,
        }


def _second_pass(when: datetime, zone: ZoneInfo) -> bool:
    """Is ``when`` the second occurrence of a local time that happens twice (fall back)?"""
    naive = when.astimezone(zone).replace(tzinfo=None)
    first = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    return first < when


def make_schedule(
    kind: str,
    cron: Any,
    *,
    tz: Any = "UTC",
    queue: str,
    catch_up: Any = 1,
    on_paused: Any = "run",
    payload: Any = None,
) -> Schedule:
    """Validate a schedule; ``ValueError`` names what is wrong."""
    if not isinstance(cron, str) or not cron.strip():
        raise ValueError(f"periodic {kind!r}: the cron expression must be a non-empty string")
    cron = " ".join(cron.split())
    if not isinstance(tz, str) or not tz:
        raise ValueError(f"periodic {kind!r}: tz must be a time zone name such as 'Europe/Berlin'")
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"periodic {kind!r}: unknown time zone {tz!r} (use an IANA name such as "
            "'UTC' or 'Europe/Berlin')"
        ) from None
    if isinstance(catch_up, bool) or not isinstance(catch_up, int) or catch_up < 0:
        raise ValueError(f"periodic {kind!r}: catch_up must be an integer >= 0, not {catch_up!r}")
    if catch_up > MAX_CATCH_UP:
        raise ValueError(f"periodic {kind!r}: catch_up must be at most {MAX_CATCH_UP}")
    if on_paused not in ON_PAUSED:
        raise ValueError(f"periodic {kind!r}: on_paused must be 'run' or 'skip', not {on_paused!r}")
    try:
        fields = croniter(cron, datetime(2000, 1, 1, tzinfo=zone), hash_id=kind).expressions
    except (CroniterError, TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"periodic {kind!r}: invalid cron expression {cron!r}: {exc}") from None
    wild = any(str(f).startswith("*") for f in fields[:2])
    schedule = Schedule(
        kind=kind,
        cron=cron,
        tz=tz,
        queue=queue,
        catch_up=catch_up,
        on_paused=on_paused,
        payload=payload,
        zone=zone,
        wild=wild,
    )
    if schedule.next_after(datetime(2000, 1, 1, tzinfo=UTC)) is None:
        raise ValueError(f"periodic {kind!r}: cron expression {cron!r} never fires")
    return schedule


# -- planning ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """What one pass does with the windows in ``(start, now]`` of one schedule."""

    run: list[datetime]
    skipped: list[datetime]
    earlier_skipped: int = 0


def plan(schedule: Schedule, start: datetime, now: datetime) -> Plan:
    """Enqueue the newest ``catch_up`` due windows, skip the rest (bounded, see module doc)."""
    keep = schedule.catch_up + SKIPPED_ROWS
    recent = schedule.newest(start, now, keep)
    n_run = min(schedule.catch_up, len(recent))
    run = recent[len(recent) - n_run :]
    skipped = recent[: len(recent) - n_run]
    earlier = 0
    if len(recent) == keep:  # there may be older missed windows: count them, bounded
        older, _more = schedule.between(start, recent[0] - _TICK, SCAN_LIMIT)
        earlier = len(older)
    return Plan(run=run, skipped=skipped, earlier_skipped=earlier)


# -- the scheduler pass ------------------------------------------------------------------------
MakeTask = Callable[[Schedule, datetime], NewTask]


def _queue_paused(driver: Driver, tx: Tx, queue: str) -> bool:
    """Is ``queue`` paused (``app.pause``)?"""
    row = driver.queue_get(tx, name=queue)
    return bool(row and row["paused"])


def _start(row: Row) -> datetime:
    """Windows after this time are due for a schedule: its last window, or its anchor."""
    anchor = as_time(row["anchor_at"])
    if row["last_window"] is None:
        return anchor
    return max(anchor, as_time(row["last_window"]))


def record(
    kind: str, window: datetime, state: str, reason: str | None, task_id: Any, earlier: int = 0
) -> dict[str, Any]:
    return {
        "kind": kind,
        "window": window,
        "state": state,
        "reason": reason,
        "task_id": str(task_id) if task_id is not None else None,
        "earlier_skipped": earlier,
    }


def schedule_due(
    driver: Driver, schedules: Mapping[str, Schedule], make_task: MakeTask
) -> list[dict[str, Any]]:
    """One scheduler pass over ``schedules``; returns the windows this pass recorded (a window
    another scheduler recorded first is not in the list). Read-only unless something is due."""
    if not schedules:
        return []
    with driver.transaction(write=False) as tx:
        now = driver.db_now(tx)
        stored = {r["kind"]: r for r in driver.cron_schedules(tx)}
    done: list[dict[str, Any]] = []
    for kind in sorted(schedules):
        schedule = schedules[kind]
        row = stored.get(kind)
        if row is None or any(row[k] != v for k, v in schedule.to_row().items()):
            with driver.transaction() as tx:
                driver.cron_schedule_upsert(tx, schedule.to_row())
            continue  # first seen (or changed): its windows start after now
        following = schedule.next_after(_start(row))
        if following is None or following > now:
            continue
        with driver.transaction() as tx:
            done.extend(_record_due(driver, tx, schedule, make_task))
    return done


def _record_due(
    driver: Driver, tx: Tx, schedule: Schedule, make_task: MakeTask
) -> list[dict[str, Any]]:
    now = driver.db_now(tx)
    row = driver.cron_schedule_get(tx, kind=schedule.kind)
    if row is None:  # pragma: no cover - the schedule row is never deleted
        return []
    steps = plan(schedule, _start(row), now)
    out: list[dict[str, Any]] = []
    bound = Reason.WINDOW_SKIPPED_CATCH_UP_BOUND.value
    for i, window in enumerate(steps.skipped):
        earlier = steps.earlier_skipped if i == 0 else 0
        if _insert(driver, tx, schedule.kind, window, SKIPPED, bound, earlier):
            out.append(record(schedule.kind, window, SKIPPED, bound, None, earlier))
    paused: bool | None = None
    for window in steps.run:
        if schedule.on_paused == "skip":
            paused = _queue_paused(driver, tx, schedule.queue) if paused is None else paused
        if paused:
            reason = Reason.WINDOW_SKIPPED_PAUSED.value
            if _insert(driver, tx, schedule.kind, window, SKIPPED, reason, 0):
                out.append(record(schedule.kind, window, SKIPPED, reason, None))
            continue
        if not _insert(driver, tx, schedule.kind, window, ENQUEUED, None, 0):
            continue  # another scheduler recorded this window first
        task, _created = transition.create(driver, tx, make_task(schedule, window))
        driver.cron_window_set_task(
            tx, kind=schedule.kind, window_at=driver.encode_time(window), task_id=task["id"]
        )
        driver.notify_queued(tx, schedule.queue)
        out.append(record(schedule.kind, window, ENQUEUED, None, task["id"]))
    if out:
        log.info(
            "cron %s: recorded %d window(s) up to %s",
            schedule.kind,
            len(out),
            out[-1]["window"].isoformat(),
        )
    return out


def _insert(
    driver: Driver,
    tx: Tx,
    kind: str,
    window: datetime,
    state: str,
    reason: str | None,
    earlier: int,
) -> bool:
    row = driver.cron_window_insert(
        tx,
        kind=kind,
        window_at=driver.encode_time(window),
        state=state,
        reason=reason,
        earlier_skipped=earlier,
    )
    return row is not None


def window_from_row(row: Row) -> dict[str, Any]:
    """A ``jobtrail_cron_windows`` row as ``app.cron_windows`` shows it."""
    out = record(
        row["kind"],
        as_time(row["window_at"]),
        row["state"],
        row["reason"],
        row["task_id"],
        int(row["earlier_skipped"] or 0),
    )
    out["recorded_at"] = as_time(row["recorded_at"])
    return out
