"""Retention: finished tasks are deleted, with their transitions, steps and
effects (receipts are columns of the task) and outbox rows, once they are older than their
state's retention — by ``finished_at`` and the database clock. Events of durable handlers are
deleted once older than the retention of ``succeeded`` tasks and waited for by no task.

Every batch is its own short transaction of at most ``BATCH`` tasks (selected oldest first
through the ``finished_at`` indexes, ``SKIP LOCKED`` on PostgreSQL), so a prune of a
million tasks never holds a lock a claim needs for more than one batch. Each batch adds what it
deleted to the store's ``jobtrail_pruned`` counts in the same transaction (``stats`` and
``/metrics``). The worker runs ``prune_retained`` on a thread of its own; ``jobtrail prune``
(``App.prune``) runs the same batches with one age for ``succeeded`` and ``cancelled``.

Pruning is the one documented exception to the append-only transition log: each batch lifts
the log's delete guard inside its own transaction only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from ..store.base import Driver

log = logging.getLogger("jobtrail.services.retention")

#: tasks per prune transaction (with their transitions: about three each)
BATCH = 500
#: the states retention applies to, and their defaults (seconds; ``None`` keeps for ever)
DEFAULT_RETENTION: dict[str, float | None] = {
    "succeeded": 7 * 86400.0,
    "cancelled": 7 * 86400.0,
    "dead": None,
}
#: seconds between a worker's passes over the events (their table has no time index: a pass
#: reads it through, so not at every retention pass)
EVENTS_EVERY = 60.0
#: the longest retention accepted (ten years), so a typo is an error and not an overflow
MAX_RETENTION = 10 * 365 * 86400.0

Retention = dict[str, float | None]


def parse_retention(value: Mapping[str, Any] | None) -> Retention:
    """The retention of each finished state: ``value`` over the defaults. Seconds (int or
    float) or a ``timedelta``; ``None`` keeps that state for ever. Anything else — an unknown
    state, a negative, non-finite or huge age, a string, a bool — is a ``ValueError`` (or
    ``TypeError``) naming the state."""
    out: Retention = dict(DEFAULT_RETENTION)
    if value is None:
        return out
    if not isinstance(value, Mapping):
        raise TypeError(
            "retention must be a dict of state to seconds, e.g. "
            '{"succeeded": 604800, "cancelled": 604800, "dead": None}'
        )
    for state, age in value.items():
        if state not in DEFAULT_RETENTION:
            raise ValueError(
                f"retention: unknown state {state!r}; finished states are "
                + ", ".join(DEFAULT_RETENTION)
            )
        out[state] = _seconds(state, age)
    return out


def _seconds(state: str, age: Any) -> float | None:
    if age is None:
        return None
    if isinstance(age, timedelta):
        age = age.total_seconds()
    if isinstance(age, bool) or not isinstance(age, int | float):
        raise TypeError(
            f"retention[{state!r}] must be seconds (a number), a timedelta or None, "
            f"not {type(age).__name__}"
        )
    seconds = float(age)
    if seconds != seconds or seconds < 0 or seconds > MAX_RETENTION:
        raise ValueError(
            f"retention[{state!r}] must be between 0 seconds and 10 years, not {age!r}"
        )
    return seconds


def prune_batch(
    driver: Driver, state: str, older_than: float, limit: int = BATCH
) -> tuple[int, int]:
    """One transaction: up to ``limit`` tasks of ``state`` finished more than ``older_than``
    seconds ago, deleted with what belongs to them; ``(tasks, transitions)`` deleted."""
    with driver.transaction() as tx:
        ids = [
            r["id"]
            for r in driver.retention_select(tx, state=state, older_than=older_than, limit=limit)
        ]
        if not ids:
            return 0, 0
        listed = driver._list(ids)
        driver.prune_guard(tx, on=True)
        transitions = driver.prune_transitions(tx, ids=listed)
        driver.prune_steps(tx, ids=listed)
        driver.prune_steps_superseded(tx, ids=listed)
        driver.prune_outbox(tx, ids=listed)
        tasks = driver.retention_delete_tasks(tx, ids=listed, state=state)
        driver.prune_guard(tx, on=False)
        driver.pruned_add(tx, state=state, tasks=tasks, transitions=transitions)
    return tasks, transitions


def prune_state(
    driver: Driver,
    state: str,
    older_than: float,
    *,
    batch: int = BATCH,
    max_batches: int | None = None,
    stop: threading.Event | None = None,
    pause: float = 0.0,
) -> tuple[int, int]:
    """Batches of ``prune_batch`` until one finds nothing (or ``max_batches``, or ``stop``);
    ``pause`` seconds between batches leave the store to the claims."""
    tasks = transitions = 0
    done = 0
    while max_batches is None or done < max_batches:
        got, logged = prune_batch(driver, state, older_than, batch)
        done += 1
        tasks += got
        transitions += logged
        # no early exit on a short batch: a workflow's parent becomes prunable only once
        # its children are gone, so keep going until nothing is left to select
        if got == 0 or (stop is not None and stop.wait(pause)):
            break
    return tasks, transitions


def prune_retained(
    driver: Driver,
    retention: Retention,
    *,
    batch: int = BATCH,
    max_batches: int | None = None,
    stop: threading.Event | None = None,
    pause: float = 0.0,
    events: bool = True,
) -> dict[str, int]:
    """One retention pass over every state with a retention; tasks deleted, by state (and
    ``events``: the events deleted, with ``events`` true)."""
    pruned: dict[str, int] = {}
    for state, older_than in retention.items():
        if older_than is None:
            continue
        tasks, transitions = prune_state(
            driver,
            state,
            older_than,
            batch=batch,
            max_batches=max_batches,
            stop=stop,
            pause=pause,
        )
        if tasks:
            pruned[state] = tasks
            log.info("retention: pruned %d %s tasks (%d transitions)", tasks, state, transitions)
        if stop is not None and stop.is_set():
            break
    events_after = retention.get("succeeded")
    if events and events_after is not None and not (stop is not None and stop.is_set()):
        gone = prune_events(driver, events_after, batch=batch, max_batches=max_batches, stop=stop)
        if gone:
            pruned["events"] = gone
            log.info("retention: pruned %d events", gone)
    return pruned


def prune_events(
    driver: Driver,
    older_than: float,
    *,
    batch: int = BATCH,
    max_batches: int | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Delete the events (``send_event``) sent more than ``older_than`` seconds ago that no
    waiting task of their tenant waits for, in batches of one transaction each; the number
    deleted. Retention passes the retention of ``succeeded`` tasks: an event sent before any
    task waits for it is kept that long, and one a task waits for is kept while it waits (a
    woken wait holds the payload in its own record, so it no longer needs the event)."""
    deleted = done = 0
    while max_batches is None or done < max_batches:
        with driver.transaction() as tx:
            got = driver.prune_events(tx, older_than=older_than, limit=batch)
        done += 1
        deleted += got
        if got < batch or (stop is not None and stop.is_set()):
            break
    return deleted


def pruned_counts(driver: Driver, tx: Any) -> dict[str, dict[str, int]]:
    """What retention and ``prune`` have deleted so far, by state (every state, 0 when none)."""
    out = {s: {"tasks": 0, "transitions": 0} for s in DEFAULT_RETENTION}
    for r in driver.pruned_list(tx):
        out[r["state"]] = {"tasks": int(r["tasks"]), "transitions": int(r["transitions"])}
    return out
