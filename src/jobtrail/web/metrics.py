"""``GET /metrics``: a prometheus_client Collector that reads the store at scrape time.

Metric names (all labelled by ``queue`` and ``kind`` unless said otherwise):

- ``jobtrail_up`` — 1 when the store answered this scrape, else 0 (no other store metric then)
- ``jobtrail_tasks{state}`` — open tasks by state, and ``dead`` (not dismissed)
- ``jobtrail_oldest_due_age_seconds`` — age of the oldest due queued task
- ``jobtrail_dead_tasks`` / ``jobtrail_oldest_dead_age_seconds`` — dead letters needing a person
- ``jobtrail_suspended_tasks{suspended}`` — durable handlers suspended now: ``sleeping``,
  ``waiting_for_event``, ``waiting_for_children`` (each label set exported, 0 included)
- ``jobtrail_transitions_window{reason,to_state}`` — transitions in the stats window (5 min)
- ``jobtrail_retries_window`` / ``jobtrail_lease_expiries_window`` — in the window
- ``jobtrail_arrivals_per_minute`` / ``jobtrail_completions_per_minute``
- ``jobtrail_queue_wait_seconds{quantile}`` / ``jobtrail_run_seconds{quantile}`` — p50/p95 in
  the window, typed ``summary`` (quantile samples only: a window has no running ``_sum`` or
  ``_count``; the histograms below have them)
- ``jobtrail_queue_paused{queue}`` — 1 when the queue is paused
- ``jobtrail_webhook_deliveries_total{source,outcome}`` — deliveries this server process
  answered (``queued``, ``duplicate``, ``bad_body``, ``bad_signature``, ``too_large``)

- ``jobtrail_pruned_tasks_total{state}`` / ``jobtrail_pruned_transitions_total{state}`` — what
  retention and ``jobtrail prune`` deleted, counted in the store (``jobtrail_pruned``): every
  process exports the same total, which survives restarts

Counters for ``rate()``, ``increase()`` and ``histogram_quantile()`` (this process's count since
its first scrape, so they start at 0 and a restart is a counter reset, as Prometheus expects):

- ``jobtrail_transitions_total{reason,to_state}`` — transitions appended to the log
- ``jobtrail_attempt_duration_seconds`` — histogram of run time (outcome − the claim before it)
  of the attempts that ended
- ``jobtrail_queue_wait_duration_seconds`` — histogram of queue wait (claimed − due) of claims

How they are counted (``LogCounters``): each scrape reads what the log gained since the
previous scrape — transitions whose time is in ``(cursor, db_now − LAG]`` — through the log's
``(at)`` index, adds it, and moves the cursor. The cost follows the rows appended since the last
scrape, never the size of the log, and pruning (which deletes old rows) never takes anything
back: nothing is counted by counting rows. ``LAG`` leaves room for transactions that commit
after their time was taken (a transition's time is its transaction's start on PostgreSQL): one
that commits more than ``LAG`` seconds after it began is not counted. A transition of a task
pruned before the scrape that would count it is not counted either (pruning keeps finished tasks
``older_than`` seconds, so only an ``older_than`` below the scrape interval does that). Every
server process counts the whole store: aggregate over instances with ``max``, not ``sum``. A
label set's first appearance is exported at 0 and its count follows on the next scrape, so
``increase()`` sees the first event too (it cannot see an increase in a series' first sample).
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ..store.failures import unreachable

if TYPE_CHECKING:
    from ..app import App

log = logging.getLogger("jobtrail.web")
WINDOW = 300.0
QK = ["queue", "kind"]
#: seconds between a transition's time and the newest time a scrape counts (late commits)
LAG = 5.0
#: histogram bucket bounds, seconds: from a fast handler to an hour's queue wait
BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
)  # fmt: skip
LE = [repr(b) for b in BUCKETS] + ["+Inf"]


class Histogram:
    """Observations of one label set: per-bucket counts (not cumulative) and their sum."""

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, value)] += 1  # le: value <= bound
        self.sum += value

    def cumulative(self) -> list[tuple[str, float]]:
        out, total = [], 0
        for le, n in zip(LE, self.counts, strict=True):
            total += n
            out.append((le, float(total)))
        return out


class LogCounters:
    """This process's monotonic counts of the transition log (see the module docstring)."""

    def __init__(self, lag: float = LAG) -> None:
        self.lag = lag
        self.cursor: datetime | None = None
        self.transitions: dict[tuple[str, str, str, str], int] = {}
        self.hist: dict[str, dict[tuple[str, str], Histogram]] = {"runs": {}, "waits": {}}
        # what a label set seen for the first time gained: exported on the next scrape
        self._pending: list[tuple[str, tuple[str, ...], float]] = []
        self._lock = threading.Lock()

    def advance(self, app: App) -> None:
        """Add what the log gained since the previous call (the first call only starts)."""
        with self._lock:
            for what, key, value in self._pending:
                self._add(what, key, value)
            self._pending = []
            got = app.transitions_between(self.cursor, lag=self.lag)
            fresh: set[tuple[str, tuple[str, ...]]] = set()
            for r in got["counts"]:
                key = (r["queue"], r["kind"], r["reason"], r["to_state"])
                if key not in self.transitions:
                    self.transitions[key] = 0
                    fresh.add(("transitions", key))
                self._add_or_defer(fresh, "transitions", key, int(r["n"]))
            for what in ("runs", "waits"):
                for queue, kind, seconds in got[what]:
                    if (queue, kind) not in self.hist[what]:
                        self.hist[what][(queue, kind)] = Histogram()
                        fresh.add((what, (queue, kind)))
                    self._add_or_defer(fresh, what, (queue, kind), seconds)
            self.cursor = got["upto"]

    def _add_or_defer(
        self, fresh: set[tuple[str, tuple[str, ...]]], what: str, key: tuple[str, ...], v: float
    ) -> None:
        if (what, key) in fresh:  # exported at 0 first, so increase() sees this
            self._pending.append((what, key, v))
        else:
            self._add(what, key, v)

    def _add(self, what: str, key: tuple[str, ...], value: float) -> None:
        if what == "transitions":
            k4 = (key[0], key[1], key[2], key[3])
            self.transitions[k4] += int(value)
        else:
            self.hist[what][(key[0], key[1])].observe(value)

    def families(self) -> Iterator[Metric]:
        with self._lock:
            total = CounterMetricFamily(
                "jobtrail_transitions",
                "Transitions appended to the log, counted by this process since its start",
                labels=QK + ["reason", "to_state"],
            )
            for key, n in sorted(self.transitions.items()):
                total.add_metric(list(key), n)
            yield total
            for what, name, text in (
                ("runs", "attempt_duration", "Run time (outcome - claimed) of ended attempts"),
                ("waits", "queue_wait_duration", "Queue wait (claimed - due) of claims"),
            ):
                h = HistogramMetricFamily(f"jobtrail_{name}_seconds", text, labels=QK)
                for qk, hist in sorted(self.hist[what].items()):
                    h.add_metric(list(qk), hist.cumulative(), hist.sum)
                yield h


class StoreCollector(Collector):
    def __init__(self, app: App, counters: LogCounters | None = None) -> None:
        self.app = app
        self.counters = counters or LogCounters()

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("jobtrail_up", "1 when the store answered this scrape")
        try:
            stats = self.app.stats(window=WINDOW, exact=True)  # gauges are never lower bounds
            counts = self.app.transition_counts(window=WINDOW)
            queues = self.app.queues()
            self.counters.advance(self.app)
        except Exception as exc:  # a scrape never fails: it says the store is down
            # an outage is logged once by the store's notice (store/outage.py), not per scrape
            level = logging.DEBUG if unreachable(exc) else logging.WARNING
            log.log(level, "metrics: store unavailable (%s)", type(exc).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        g = {
            name: GaugeMetricFamily(f"jobtrail_{name}", text, labels=QK + extra)
            for name, text, extra in (
                ("tasks", "Tasks by state (open states, and dead not dismissed)", ["state"]),
                ("oldest_due_age_seconds", "Age of the oldest due queued task", []),
                ("dead_tasks", "Dead tasks not dismissed", []),
                (
                    "suspended_tasks",
                    "Tasks whose durable handler is suspended: sleeping, waiting for an event "
                    "or for its children",
                    ["suspended"],
                ),
                ("oldest_dead_age_seconds", "Age of the oldest dead task not dismissed", []),
                ("retries_window", "Retries scheduled in the stats window", []),
                ("lease_expiries_window", "Lease expiries in the stats window", []),
                ("arrivals_per_minute", "Enqueues per minute over the stats window", []),
                ("completions_per_minute", "Terminal outcomes per minute over the window", []),
                ("transitions_window", "Transitions in the window", ["reason", "to_state"]),
            )
        }
        window_quantiles = {
            key: Metric(f"jobtrail_{name}", text, "summary")
            for key, name, text in (
                ("wait", "queue_wait_seconds", "Queue wait (claimed - due) in the window"),
                ("run", "run_seconds", "Run time (outcome - claimed) in the window"),
            )
        }
        for row in stats["queues"]:
            qk = [row["queue"], row["kind"]]
            for state, n in row["counts"].items():
                g["tasks"].add_metric(qk + [state], n)
            g["tasks"].add_metric(qk + ["dead"], row["dead"])
            g["dead_tasks"].add_metric(qk, row["dead"])
            for suspended, n in row["suspended"].items():
                g["suspended_tasks"].add_metric(qk + [suspended], n)
            for name in ("oldest_due_age_seconds", "oldest_dead_age_seconds"):
                value = row[name.removesuffix("_seconds")]
                if value is not None:
                    g[name].add_metric(qk, value)
            g["retries_window"].add_metric(qk, row["retries"])
            g["lease_expiries_window"].add_metric(qk, row["lease_expiries"])
            g["arrivals_per_minute"].add_metric(qk, row["arrivals_per_min"])
            g["completions_per_minute"].add_metric(qk, row["completions_per_min"])
            for key, family in window_quantiles.items():
                for q in ("50", "95"):
                    value = row[f"{key}_p{q}"]
                    if value is not None:
                        labels = {"queue": row["queue"], "kind": row["kind"], "quantile": f"0.{q}"}
                        family.add_sample(family.name, labels, value)
        for c in counts:
            g["transitions_window"].add_metric(
                [c["queue"], c["kind"], c["reason"], c["to_state"]], c["n"]
            )
        yield from g.values()
        yield from window_quantiles.values()
        paused = GaugeMetricFamily("jobtrail_queue_paused", "1 when paused", labels=["queue"])
        for view in queues:
            paused.add_metric([view["queue"]], 1 if view["paused"] else 0)
        yield paused
        for what, text in (
            (
                "tasks",
                "Finished tasks deleted by retention and prune, by state (kept in the store)",
            ),
            ("transitions", "Transitions deleted with them, by the state of their task"),
        ):
            pruned = CounterMetricFamily(f"jobtrail_pruned_{what}", text, labels=["state"])
            for state, n in stats["pruned"].items():
                pruned.add_metric([state], n[what])
            yield pruned
        yield from self.counters.families()


class Metrics:
    """One registry per server (so several servers in one process never clash)."""

    def __init__(
        self, app: App, *, lag: float = LAG, waits: Callable[[], int] | None = None
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        if waits is not None:
            Gauge(
                "jobtrail_result_waits",
                "Result requests (/result?timeout=) waiting in this server process",
                registry=self.registry,
            ).set_function(waits)
        self.counters = LogCounters(lag)
        self.registry.register(StoreCollector(app, self.counters))
        self.webhooks = Counter(
            "jobtrail_webhook_deliveries",
            "Webhook deliveries answered by this server process",
            ["source", "outcome"],
            registry=self.registry,
        )
