"""Rate limits, ramps and fair claims between tenants, the same on both backends.

Claims go through the claim seam (``transition.claim``) as a worker's do, so the tests can
count what one claim takes. The buckets are decided by the database clock: a claim right
after another finds the bucket as the first left it (plus what refilled meanwhile).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

import jobtrail
from jobtrail.core import transition
from jobtrail.store.base import Claim

from .support import wait_for


def register(app: jobtrail.App) -> None:
    @app.task("job")
    def job(ctx: Any, payload: Any) -> None:
        return None


def claim(
    app: jobtrail.App, limit: int, owner: str = "w:1:a"
) -> tuple[list[dict[str, Any]], Claim]:
    request = Claim(owner=owner, queues=["default"], kinds=["job"], limit=limit, version=None)
    with app._driver.transaction() as tx:
        return transition.claim(app._driver, tx, request), request


def enqueue(app: jobtrail.App, n: int, tenant: str = "", priority: int = 0) -> list[str]:
    items = [
        {"kind": "job", "payload": i, "tenant": tenant, "priority": priority} for i in range(n)
    ]
    return [t.id for t in app.enqueue_many(items)]


# -- fairness -------------------------------------------------------------------------------------
def test_a_new_tenant_is_not_held_back_by_another_tenants_backlog(app: jobtrail.App) -> None:
    register(app)
    enqueue(app, 10_000, tenant="a")
    b_ids = set(enqueue(app, 10, tenant="b"))
    first, _ = claim(app, 10)
    second, _ = claim(app, 10)
    taken = {str(r["id"]) for r in first + second}
    assert b_ids <= taken, f"b's tasks left after two batches: {b_ids - taken}"
    # tenants in turn: each batch takes five of each
    assert sorted(r["tenant"] for r in first) == ["a"] * 5 + ["b"] * 5


def test_fair_order_is_priority_then_tenants_in_turn_then_due_time(app: jobtrail.App) -> None:
    register(app)
    a = enqueue(app, 3, tenant="a")
    b = enqueue(app, 3, tenant="b")
    urgent = enqueue(app, 1, tenant="a", priority=5)
    rows, _ = claim(app, 3)
    # priority first; then one of each tenant, each its earliest
    assert {str(r["id"]) for r in rows} == {urgent[0], a[0], b[0]}
    rows, _ = claim(app, 2)
    assert {str(r["id"]) for r in rows} == {a[1], b[1]}
    later = enqueue(app, 2, tenant="c")
    rows, _ = claim(app, 3)
    # each claim deals one round per tenant: c's first joins the round of a's and b's last
    assert {str(r["id"]) for r in rows} == {a[2], b[2], later[0]}


def test_the_worker_claim_paths_are_fair_too(store: Any) -> None:
    """PostgreSQL's one-statement claims (claim_unlimited, complete_and_claim) and a worker."""
    app = store.app()
    register(app)
    enqueue(app, 2_000, tenant="a")
    b_ids = set(enqueue(app, 4, tenant="b"))
    request = Claim(owner="w:1:a", queues=["default"], kinds=["job"], limit=4, version=None)
    if app._driver.claims_in_one_statement:
        driver = app._driver
        with driver.single_statement() as tx:
            rows = transition.claim_unlimited(driver, tx, request)
        # two tenants wait: the driver switched this queue to the fair statements
        assert "default" in driver.fair_queues
        with driver.single_statement() as tx:
            _, more = transition.complete_and_claim(driver, tx, [], request, "default", 4)
        rows += more
        # b's are all claimed now: one tenant waits, and the claims go back to the due order
        with driver.single_statement() as tx:
            _, only_a = transition.complete_and_claim(driver, tx, [], request, "default", 4)
        assert "default" not in driver.fair_queues
        assert [r["tenant"] for r in only_a] == ["a"] * 4
    else:
        rows, _ = claim(app, 4)
        rows += claim(app, 4)[0]
    assert b_ids <= {str(r["id"]) for r in rows}
    assert {r["tenant"] for r in rows} == {"a", "b"}


# -- rates ----------------------------------------------------------------------------------------
def test_a_claim_takes_no_more_than_the_bucket_holds(app: jobtrail.App) -> None:
    register(app)
    enqueue(app, 20)
    app.set_rate("default", per_second=1, burst=3, by="ops", note="provider quota")
    rows, request = claim(app, 10)
    assert len(rows) == 3
    rows, request = claim(app, 10)
    assert rows == []
    assert request.slots and 0 < min(request.slots) <= 1.0
    # explain says so, with the next slot
    queued = [t for t in app.list(state="queued", limit=50)]
    why = app.explain(queued[0].id)
    assert "queue default rate-limited at 1/s; next slot in" in why
    assert "队列 default 限速为每秒 1 个" in app.explain(queued[0].id, lang="zh")
    # the dashboard's task page shows the same live fact
    assert "rate-limited at 1/s" in app.why_not_running(queued[0].id)["why"]
    # the bucket refills at the rate, by the database clock
    got = wait_for(lambda: claim(app, 10)[0], timeout=3, interval=0.05, what="a refill")
    assert len(got) == 1


def test_lifting_a_rate_lets_claims_through(app: jobtrail.App) -> None:
    register(app)
    enqueue(app, 20)
    app.set_rate("default", per_second=1, burst=1, by="ops", note="quota")
    assert len(claim(app, 10)[0]) == 1
    lifted = app.set_rate("default", by="ops", note="quota lifted")
    assert lifted["rate_per_second"] is None and lifted["rate_burst"] is None
    assert len(claim(app, 10)[0]) == 10
    history = app.queue_history("default")
    assert [h["action"] for h in history] == ["rate", "rate"]
    assert history[1]["data"] == {"per_second": 1.0, "burst": 1, "per_tenant": None}
    assert history[0]["data"] == {"per_second": None, "burst": None, "per_tenant": None}
    assert history[0]["by"] == "ops" and history[0]["note"] == "quota lifted"


def test_per_tenant_rate(app: jobtrail.App) -> None:
    register(app)
    enqueue(app, 5, tenant="a")
    enqueue(app, 5, tenant="b")
    app.set_rate("default", per_tenant=1, burst=2, by="ops", note="per customer")
    rows, _ = claim(app, 10)
    assert sorted(r["tenant"] for r in rows) == ["a", "a", "b", "b"]
    rows, request = claim(app, 10)
    assert rows == [] and request.slots
    queued = app.list(state="queued", tenant="a", limit=5)
    assert "tenant a of queue default rate-limited at 1/s; next slot in" in app.explain(
        queued[0].id
    )
    enqueue(app, 3, tenant="c")  # a tenant that has not claimed has its whole bucket
    rows, _ = claim(app, 10)
    assert [r["tenant"] for r in rows] == ["c", "c"]


def test_queue_rate_and_concurrency_limit_together(app: jobtrail.App) -> None:
    register(app)
    enqueue(app, 10)
    app.set_limit("default", total=2, by="ops", note="two at once")
    app.set_rate("default", per_second=100, burst=5, by="ops", note="quota")
    assert len(claim(app, 10)[0]) == 2  # the concurrency limit is the tighter one


def test_a_ramp_starts_at_a_tenth(app: jobtrail.App) -> None:
    register(app)
    enqueue(app, 100)
    app.set_rate("default", per_second=100, burst=50, ramp=60, by="ops", note="warm up")
    rows, _ = claim(app, 100)
    # the bucket is a tenth of its size at the ramp's start (5 of 50)
    assert 5 <= len(rows) <= 6
    listed = {q["queue"]: q for q in app.queues()}["default"]
    assert listed["rate_per_second"] == 100 and listed["ramp_seconds"] == 60
    assert listed["rate_burst"] == 50 and listed["ramp_started_at"] is not None


def test_resume_with_a_ramp_ramps_the_queues_own_rate(app: jobtrail.App) -> None:
    register(app)
    app.set_rate("default", per_second=50, by="ops", note="quota")
    app.pause("default", by="ops", note="provider down")
    enqueue(app, 100)
    resumed = app.resume("default", by="ops", note="back", ramp=30)
    assert resumed["rate_per_second"] == 50 and resumed["ramp_seconds"] == 30
    assert resumed["rate_until"] is None  # the queue's own rate stays after the ramp
    assert app.queue_history("default")[0]["data"] == {"ramp": 30.0, "rate": "own"}
    assert 5 <= len(claim(app, 100)[0]) <= 6  # a tenth of the one-second bucket


def test_a_resume_ramp_without_a_rate_ends_with_the_ramp(app: jobtrail.App) -> None:
    register(app)
    app.pause("default", by="ops", note="down")
    enqueue(app, 40)
    resumed = app.resume("default", by="ops", note="back", ramp=2)
    assert resumed["rate_per_second"] == 20  # 40 due over 2 s
    assert resumed["rate_until"] is not None
    # a tenth of the one-second bucket of 20 (a little more as the ramp grows meanwhile)
    assert 2 <= len(claim(app, 40)[0]) <= 4

    def lifted() -> bool:
        claim(app, 1)
        return {q["queue"]: q for q in app.queues()}["default"]["rate_per_second"] is None

    wait_for(lifted, timeout=8, interval=0.05, what="the ramp's rate to end")
    left = len(app.list(state="queued", limit=100))
    enqueue(app, 100)
    assert len(claim(app, 500)[0]) == left + 100  # no bucket of 20 any more


# -- bad input ------------------------------------------------------------------------------------
BAD = [
    ({"per_second": -1}, "per_second must be between"),
    ({"per_second": 0}, "per_second must be between"),
    ({"per_second": math.nan}, "per_second must be between"),
    ({"per_second": math.inf}, "per_second must be between"),
    ({"per_second": 10**30}, "per_second must be between"),
    ({"per_second": True}, "per_second must be a number"),
    ({"per_second": "10"}, "per_second must be a number"),
    ({"per_tenant": -2}, "per_tenant must be between"),
    ({"per_second": 5, "burst": -1}, "burst must be between"),
    ({"per_second": 5, "burst": 2.5}, "burst must be an integer"),
    ({"per_second": 5, "burst": 10**12}, "burst must be between"),
    ({"per_second": 5, "ramp": -1}, "ramp must be above 0"),
    ({"per_second": 5, "ramp": math.nan}, "ramp must be above 0"),
    ({"burst": 3}, "burst and ramp need a rate"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD)
def test_bad_rates_are_refused_and_nothing_is_written(
    app: jobtrail.App, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        app.set_rate("default", by="ops", note="n", **kwargs)
    assert app.queue_history("default") == []
    listed = {q["queue"]: q for q in app.queues()}["default"]
    assert listed["rate_per_second"] is None and listed["rate_per_tenant"] is None


def test_bad_ramp_on_resume_is_refused_and_the_queue_stays_paused(app: jobtrail.App) -> None:
    app.pause("default", by="ops", note="down")
    for bad in (-1, 0, math.nan, "5"):
        with pytest.raises(ValueError, match="ramp must"):
            app.resume("default", by="ops", note="back", ramp=bad)  # type: ignore[arg-type]
    assert {q["queue"]: q for q in app.queues()}["default"]["paused"] is True
    assert [h["action"] for h in app.queue_history("default")] == ["pause"]
