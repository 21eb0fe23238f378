"""``GET /metrics`` (§12): a prometheus_client Collector that reads the store at scrape time.

Metric names (all labelled by ``queue`` and ``kind`` unless said otherwise):

- ``jobtrail_up`` — 1 when the store answered this scrape, else 0 (no other store metric then)
- ``jobtrail_tasks{state}`` — open tasks by state, and ``dead`` (not dismissed)
- ``jobtrail_oldest_due_age_seconds`` — age of the oldest due queued task
- ``jobtrail_dead_tasks`` / ``jobtrail_oldest_dead_age_seconds`` — dead letters needing a person
- ``jobtrail_transitions_window{reason,to_state}`` — transitions in the stats window (5 min)
- ``jobtrail_retries_window`` / ``jobtrail_lease_expiries_window`` — in the window
- ``jobtrail_arrivals_per_minute`` / ``jobtrail_completions_per_minute``
- ``jobtrail_queue_wait_seconds{quantile}`` / ``jobtrail_run_seconds{quantile}`` — p50/p95
- ``jobtrail_queue_paused{queue}`` — 1 when the queue is paused
- ``jobtrail_webhook_deliveries_total{source,outcome}`` — deliveries this server process
  answered (``queued``, ``duplicate``, ``bad_body``, ``bad_signature``, ``too_large``)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from ..app import App

log = logging.getLogger("jobtrail.web")
WINDOW = 300.0
QK = ["queue", "kind"]


class StoreCollector(Collector):
    def __init__(self, app: App) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("jobtrail_up", "1 when the store answered this scrape")
        try:
            stats = self.app.stats(window=WINDOW)
            counts = self.app.transition_counts(window=WINDOW)
            queues = self.app.queues()
        except Exception as exc:  # a scrape never fails: it says the store is down
            log.warning("metrics: store unavailable (%s)", type(exc).__name__)
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
                ("oldest_dead_age_seconds", "Age of the oldest dead task not dismissed", []),
                ("retries_window", "Retries scheduled in the stats window", []),
                ("lease_expiries_window", "Lease expiries in the stats window", []),
                ("arrivals_per_minute", "Enqueues per minute over the stats window", []),
                ("completions_per_minute", "Terminal outcomes per minute over the window", []),
                ("queue_wait_seconds", "Queue wait (claimed - due) in the window", ["quantile"]),
                ("run_seconds", "Run time (outcome - claimed) in the window", ["quantile"]),
                ("transitions_window", "Transitions in the window", ["reason", "to_state"]),
            )
        }
        for row in stats["queues"]:
            qk = [row["queue"], row["kind"]]
            for state, n in row["counts"].items():
                g["tasks"].add_metric(qk + [state], n)
            g["tasks"].add_metric(qk + ["dead"], row["dead"])
            g["dead_tasks"].add_metric(qk, row["dead"])
            for name in ("oldest_due_age_seconds", "oldest_dead_age_seconds"):
                value = row[name.removesuffix("_seconds")]
                if value is not None:
                    g[name].add_metric(qk, value)
            g["retries_window"].add_metric(qk, row["retries"])
            g["lease_expiries_window"].add_metric(qk, row["lease_expiries"])
            g["arrivals_per_minute"].add_metric(qk, row["arrivals_per_min"])
            g["completions_per_minute"].add_metric(qk, row["completions_per_min"])
            for q in ("50", "95"):
                for metric, key in (("queue_wait_seconds", "wait"), ("run_seconds", "run")):
                    value = row[f"{key}_p{q}"]
                    if value is not None:
                        g[metric].add_metric(qk + [f"0.{q}"], value)
        for c in counts:
            g["transitions_window"].add_metric(
                [c["queue"], c["kind"], c["reason"], c["to_state"]], c["n"]
            )
        yield from g.values()
        paused = GaugeMetricFamily("jobtrail_queue_paused", "1 when paused", labels=["queue"])
        for view in queues:
            paused.add_metric([view["queue"]], 1 if view["paused"] else 0)
        yield paused


class Metrics:
    """One registry per server (so several servers in one process never clash)."""

    def __init__(self, app: App) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StoreCollector(app))
        self.webhooks = Counter(
            "jobtrail_webhook_deliveries",
            "Webhook deliveries answered by this server process",
            ["source", "outcome"],
            registry=self.registry,
        )
