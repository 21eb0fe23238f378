"""The monotonic families of ``GET /metrics`` on both backends: ``jobtrail_transitions_total``
and the run-time and queue-wait histograms count what the log gained since the previous scrape,
only go up while work happens, are not taken back by pruning, count each attempt once, and
start at 0 in each server process."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import jobtrail
from jobtrail.web.metrics import Metrics

from ._http_support import auth, client, register

COUNTERS = (
    "jobtrail_transitions_total",
    "jobtrail_attempt_duration_seconds_count",
    "jobtrail_attempt_duration_seconds_bucket",
    "jobtrail_attempt_duration_seconds_sum",
    "jobtrail_queue_wait_duration_seconds_count",
    "jobtrail_queue_wait_duration_seconds_bucket",
)
Sample = tuple[str, tuple[tuple[str, str], ...]]


def setup(app: jobtrail.App) -> jobtrail.App:
    register(app)
    tries: dict[str, int] = defaultdict(int)

    @app.task("flaky", backoff_base=0.01, backoff_cap=0.01)
    def flaky(ctx: Any, payload: Any) -> Any:
        tries[str(payload)] += 1
        if tries[str(payload)] == 1:
            raise TimeoutError("first try")
        return payload

    return app


def scrape(metrics: Metrics) -> dict[Sample, float]:
    """One scrape, as {(sample name, labels): value}; then a pause, so the next transition's
    time is after this scrape's end (``lag=0``: SQLite's clock has millisecond steps)."""
    text = generate_latest(metrics.registry).decode()
    time.sleep(0.01)
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(got: dict[Sample, float], name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    return sum(v for (n, ls), v in got.items() if n == name and labels.items() <= dict(ls).items())


def work(app: jobtrail.App, sends: int = 0, fails: int = 0, flaky: int = 0) -> None:
    for i in range(sends):
        app.enqueue("send", {"i": i, "t": time.time()})
    for i in range(fails):
        app.enqueue("fail", {"i": i, "t": time.time()})
    for i in range(flaky):
        app.enqueue("flaky", f"{i}-{time.time()}")
    deadline = time.monotonic() + 20
    while app.state_counts()["queued"] and time.monotonic() < deadline:
        app.run_worker(burst=True, concurrency=1, poll_interval=0.02)
        time.sleep(0.02)


def assert_not_lower(before: dict[Sample, float], after: dict[Sample, float]) -> None:
    for key, v in before.items():
        if key[0].startswith(COUNTERS):
            assert key in after, f"{key} vanished"
            assert after[key] >= v, f"{key} went down: {v} -> {after[key]}"


def test_counters_only_go_up_and_pruning_takes_nothing_back(app: jobtrail.App) -> None:
    setup(app)
    metrics = Metrics(app, lag=0.0)
    first = scrape(metrics)  # starts counting here
    assert value(first, "jobtrail_transitions_total") == 0
    work(app, sends=5, fails=1, flaky=2)
    scrapes = [first, scrape(metrics), scrape(metrics)]  # a new label set shows 0 first
    got = scrapes[-1]
    total = "jobtrail_transitions_total"
    assert value(got, total, kind="send", reason="enqueued", to_state="queued") == 5
    assert value(got, total, kind="send", reason="completed", to_state="succeeded") == 5
    assert value(got, total, kind="fail", reason="permanent_error", to_state="dead") == 1
    assert value(got, total, kind="flaky", reason="retry_scheduled", to_state="queued") == 2
    assert value(got, total, reason="claimed") == 5 + 1 + 2 * 2
    # one observation per attempt that ended, and per claim
    runs, waits = "jobtrail_attempt_duration_seconds", "jobtrail_queue_wait_duration_seconds"
    assert value(got, f"{runs}_count", kind="send") == 5
    assert value(got, f"{runs}_count", kind="fail") == 1
    assert value(got, f"{runs}_count", kind="flaky") == 4  # two attempts each
    assert value(got, f"{runs}_bucket", kind="flaky", le="+Inf") == 4
    assert value(got, f"{waits}_count") == 5 + 1 + 4
    assert value(got, f"{runs}_sum") >= 0
    assert value(got, f"{waits}_sum") > 0

    pruned = app.prune(older_than=0)
    assert pruned["transitions"] > 0  # the rows the counts came from are gone
    scrapes.append(scrape(metrics))
    for name in (total, f"{runs}_count", f"{waits}_count"):
        assert value(scrapes[-1], name) == value(got, name), name

    work(app, sends=3)
    scrapes.append(scrape(metrics))
    after = scrapes[-1]
    assert value(after, total, kind="send", reason="completed") == 5 + 3
    assert value(after, f"{runs}_count", kind="send") == 5 + 3
    assert value(after, f"{runs}_bucket", kind="send", le="+Inf") == 5 + 3
    for before, later in zip(scrapes, scrapes[1:], strict=False):
        assert_not_lower(before, later)
    assert app.state_counts()["queued"] == 0


def test_each_process_counts_from_its_own_start(app: jobtrail.App) -> None:
    setup(app)
    early = Metrics(app, lag=0.0)
    scrape(early)
    work(app, sends=4)
    late = Metrics(app, lag=0.0)  # a second server process, started after that work
    scrape(late)
    work(app, sends=2)
    for m in (early, late):
        scrape(m)
    got_early, got_late = scrape(early), scrape(late)
    done = {"kind": "send", "reason": "completed"}
    assert value(got_early, "jobtrail_transitions_total", **done) == 6
    assert value(got_late, "jobtrail_transitions_total", **done) == 2
    assert value(got_late, "jobtrail_attempt_duration_seconds_count") == 2


def test_a_scrape_while_the_store_is_down_loses_nothing(app: jobtrail.App) -> None:
    setup(app)
    metrics = Metrics(app, lag=0.0)
    scrape(metrics)
    work(app, sends=2)
    real = app.transitions_between

    def down(*args: Any, **kwargs: Any) -> Any:
        raise jobtrail.StoreUnavailable("down")

    app.transitions_between = down  # type: ignore[method-assign]
    got = scrape(metrics)
    assert got == {("jobtrail_up", ()): 0.0}
    app.transitions_between = real  # type: ignore[method-assign]
    work(app, sends=1)
    scrape(metrics)
    got = scrape(metrics)
    assert value(got, "jobtrail_transitions_total", reason="completed") == 3


def test_served_by_the_metrics_route(app: jobtrail.App) -> None:
    web: TestClient = client(setup(app))
    web.app.state.metrics = Metrics(app, lag=0.0)  # type: ignore[attr-defined]
    web.get("/metrics", headers=auth("rd"))
    work(app, sends=1)
    web.get("/metrics", headers=auth("rd"))
    text = web.get("/metrics", headers=auth("rd")).text
    assert "# TYPE jobtrail_transitions_total counter" in text
    assert "# TYPE jobtrail_attempt_duration_seconds histogram" in text
    assert "# TYPE jobtrail_queue_wait_duration_seconds histogram" in text
    assert (
        'jobtrail_transitions_total{kind="send",queue="default",reason="completed",'
        'to_state="succeeded"} 1.0'
    ) in text
    assert 'jobtrail_attempt_duration_seconds_count{kind="send",queue="default"} 1.0' in text
    assert 'jobtrail_queue_wait_duration_seconds_bucket{kind="send",le="+Inf"' in text
