"""Queue health, computed from the store with indexed queries.

Per queue and kind: counts of open states (from the partial indexes), the suspended durable
handlers among them (``suspended``: ``sleeping`` — queued until their wake time —,
``waiting_for_event``, ``waiting_for_children``; exact, from their own partial index), dead
tasks still needing a person, tasks finished in the window, arrival and completion rates per
minute, retries and lease expiries, queue wait (claimed − due) and run time (outcome − claimed)
p50/p95 from the transitions in the window — so time spent queued is never mistaken for slow
work — and the estimated drain time: backlog ÷ (completion rate − arrival rate), ``never`` when
arrivals keep up. ``pruned``: what retention and ``prune`` have deleted, by state, since the
store was made.

Bounded (the default; ``exact=True`` reads everything, as ``/metrics`` does): so that stats
answers in well under a second on a store with a million queued tasks and ten million
transitions (when it is needed most), the queued tasks of each queue and kind are counted up to
``COUNT_UPTO`` (a group at the bound names ``queued``, ``backlog`` and ``drain_time`` in its
``at_least``: the true figures are that or more), and the window reads at most
``WINDOW_TRANSITIONS`` transitions, newest first: when it holds more, the window is shortened
to the time of the oldest one read (``window_seconds``, with ``window_capped`` true and the
``requested_window_seconds``), and every figure is exact for that shorter window.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from ..model.machine import TERMINAL, Reason
from ..model.models import iso
from ..store.base import Driver, Tx
from .retention import pruned_counts

OPEN_STATES = ("queued", "leased", "cancel_requested", "awaiting_receipt", "waiting")
LEASE_EXPIRIES = {
    Reason.LEASE_EXPIRED,
    Reason.LEASE_EXPIRED_CANCELLED,
    Reason.LEASE_EXPIRED_EFFECT_UNCERTAIN,
}

#: What a suspended durable handler waits for (``wait_kind``), by the reason it suspended with:
#: the keys of each group's ``suspended`` counts.
SUSPENDED = {
    "sleep": Reason.SLEEPING.value,
    "event": Reason.WAITING_FOR_EVENT.value,
    "children": Reason.WAITING_FOR_CHILDREN.value,
}


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (``p`` in 0..100) of ``values``; ``None`` when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[rank - 1]


def drain_time(backlog: int, arrivals_per_min: float, completions_per_min: float) -> float | str:
    """Seconds to empty the backlog at the current net rate, or ``"never"``."""
    if backlog == 0:
        return 0.0
    net = completions_per_min - arrivals_per_min
    if net <= 0:
        return "never"
    return backlog / net * 60.0


#: queued tasks counted per queue and kind, at most (bounded stats)
COUNT_UPTO = 10_000
#: transitions a window reads, at most (bounded stats)
WINDOW_TRANSITIONS = 10_000


def bounded_start(driver: Driver, tx: Tx, since: datetime) -> datetime | None:
    """Where a window from ``since`` starts when it holds more than ``WINDOW_TRANSITIONS``
    transitions: the time of the oldest one within the bound (it and any sharing its time are
    read too, so a few more than the bound at most); ``None`` when the window is within it."""
    start = driver.stats_window_start(tx, since=driver.encode_time(since), skip=WINDOW_TRANSITIONS)
    if start is not None and start["at"] > since:
        at: datetime = start["at"]
        return at
    return None


def _entry() -> dict[str, Any]:
    return {
        "counts": {s: 0 for s in OPEN_STATES},
        "at_least": [],
        "dead": 0,
        "oldest_dead_age": None,
        "suspended": {reason: 0 for reason in SUSPENDED.values()},
        "finished_in_window": {"succeeded": 0, "cancelled": 0},
        "oldest_due_age": None,
        "arrivals": 0,
        "completions": 0,
        "retries": 0,
        "lease_expiries": 0,
        "waits": [],
        "runs": [],
    }


def collect(driver: Driver, tx: Tx, window: float, *, exact: bool = False) -> dict[str, Any]:
    now = driver.db_now(tx)
    requested = window
    since = now - timedelta(seconds=window)
    capped = False
    start = None if exact else bounded_start(driver, tx, since)
    if start is not None:
        since, capped = start, True
        # the rates' denominator; never zero (the newest transition may be this instant)
        window = max((now - since).total_seconds(), 0.001)
    groups: dict[tuple[str, str], dict[str, Any]] = defaultdict(_entry)
    opened = driver.stats_open(tx) if exact else driver.stats_open_bounded(tx, upto=COUNT_UPTO + 1)
    for r in opened:
        g = groups[(r["queue"], r["kind"])]
        g["counts"][r["state"]] = r["n"]
        if not exact and r["state"] == "queued" and r["n"] > COUNT_UPTO:
            g["counts"]["queued"] = COUNT_UPTO  # "that many or more"
            g["at_least"] = ["queued", "backlog", "drain_time"]
        if r["oldest_due"] is not None:
            g["oldest_due_age"] = max(0.0, (now - r["oldest_due"]).total_seconds())
    for r in driver.stats_suspended(tx):  # durable handlers that sleep or wait
        groups[(r["queue"], r["kind"])]["suspended"][SUSPENDED[r["wait_kind"]]] = r["n"]
    for r in driver.stats_dead(tx):
        g = groups[(r["queue"], r["kind"])]
        g["dead"] = r["n"]
        g["oldest_dead_age"] = (now - r["oldest"]).total_seconds() if r["oldest"] else None
    when = driver.encode_time(since)
    for r in driver.stats_finished(tx, since=when):
        groups[(r["queue"], r["kind"])]["finished_in_window"][r["state"]] = r["n"]
    for r in driver.stats_reasons(tx, since=when):
        g = groups[(r["queue"], r["kind"])]
        if r["reason"] in (Reason.ENQUEUED, Reason.REPLAYED):  # work that entered the queue
            g["arrivals"] += r["n"]
        if r["to_state"] in TERMINAL and r["reason"] not in ("dismissed", "correction"):
            g["completions"] += r["n"]
        if r["reason"] == Reason.RETRY_SCHEDULED:
            g["retries"] += r["n"]
        if r["reason"] in LEASE_EXPIRIES:
            g["lease_expiries"] += r["n"]
    for r in driver.stats_waits(tx, since=when):
        if r["seconds"] is not None:
            groups[(r["queue"], r["kind"])]["waits"].append(float(r["seconds"]))
    for r in driver.stats_runs(tx, since=when):
        if r["seconds"] is not None:
            groups[(r["queue"], r["kind"])]["runs"].append(float(r["seconds"]))
    minutes = window / 60.0
    rows = []
    for (queue, kind), g in sorted(groups.items()):
        arrivals = g.pop("arrivals") / minutes
        completions = g.pop("completions") / minutes
        waits, runs = g.pop("waits"), g.pop("runs")
        backlog = g["counts"]["queued"] + g["counts"]["leased"] + g["counts"]["cancel_requested"]
        rows.append(
            {
                "queue": queue,
                "kind": kind,
                **g,
                "arrivals_per_min": round(arrivals, 3),
                "completions_per_min": round(completions, 3),
                "wait_p50": percentile(waits, 50),
                "wait_p95": percentile(waits, 95),
                "run_p50": percentile(runs, 50),
                "run_p95": percentile(runs, 95),
                "backlog": backlog,
                "drain_time": drain_time(backlog, arrivals, completions),
            }
        )
    return {
        "at": iso(now),
        "window_seconds": window,
        "requested_window_seconds": requested,
        "window_capped": capped,
        # the bounds of this answer (None: exact=True, everything read)
        "window_limit": None if exact else WINDOW_TRANSITIONS,
        "count_limit": None if exact else COUNT_UPTO,
        "queues": rows,
        "pruned": pruned_counts(driver, tx),
    }
