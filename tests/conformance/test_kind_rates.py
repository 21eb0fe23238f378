"""Rates per kind within a queue (``set_rate(queue, kind=...)``), beside the queue's own: the
same on both backends. Claims go through the claim seam as a worker's do."""

from __future__ import annotations

from typing import Any

import pytest

import jobtrail
from jobtrail.core import transition
from jobtrail.store.base import Claim


def register(app: jobtrail.App) -> None:
    for name in ("k1", "k2"):
        app.task(name)(lambda ctx, payload: None)


def claim(app: jobtrail.App, limit: int) -> tuple[list[dict[str, Any]], Claim]:
    request = Claim(
        owner="w:1:a", queues=["default"], kinds=["k1", "k2"], limit=limit, version=None
    )
    with app._driver.transaction() as tx:
        return transition.claim(app._driver, tx, request), request


def test_a_kind_rate_limits_that_kind_only(app: jobtrail.App) -> None:
    register(app)
    view = app.set_rate("default", kind="k1", per_second=0.01, burst=3, by="ops", note="quota")
    assert view["kind_rates"] == [{"kind": "k1", "per_second": 0.01, "burst": 3}]
    app.enqueue_many([{"kind": "k1", "payload": i} for i in range(10)])
    app.enqueue_many([{"kind": "k2", "payload": i} for i in range(10)])
    rows, request = claim(app, 20)
    kinds = [r["kind"] for r in rows]
    assert kinds.count("k1") == 3 and kinds.count("k2") == 10  # k1's burst; k2 untouched
    assert request.slots and min(request.slots) > 1  # when k1's next token comes
    assert claim(app, 20)[0] == []
    waiting = app.list(state="queued", kind="k1", limit=1)[0]
    text = app.explain(waiting.id)
    assert "kind k1 rate-limited at 0.01/s within queue default" in text
    assert "类型 k1" in app.explain(waiting.id, lang="zh")


def test_kind_rates_are_listed_audited_and_lifted(app: jobtrail.App) -> None:
    register(app)
    app.set_rate("default", kind="k1", per_second=5, by="ops", note="on")
    listed = {q["queue"]: q for q in app.queues()}
    assert listed["default"]["kind_rates"] == [{"kind": "k1", "per_second": 5.0, "burst": None}]
    app.set_rate("default", kind="k1", by="ops", note="off")
    assert {q["queue"]: q for q in app.queues()}["default"]["kind_rates"] == []
    history = app.queue_history("default")
    assert [(h["action"], h["note"], h["data"]) for h in history] == [
        ("rate", "off", {"kind": "k1", "per_second": None, "burst": None}),
        ("rate", "on", {"kind": "k1", "per_second": 5, "burst": None}),
    ]
    app.enqueue_many([{"kind": "k1", "payload": i} for i in range(5)])
    assert len(claim(app, 10)[0]) == 5  # lifted: nothing holds k1 back


def test_a_kind_rate_and_the_queue_rate_both_hold(app: jobtrail.App) -> None:
    register(app)
    app.set_rate("default", per_second=0.01, burst=4, by="ops", note="queue")
    app.set_rate("default", kind="k1", per_second=0.01, burst=1, by="ops", note="kind")
    app.enqueue_many([{"kind": "k1", "payload": i} for i in range(5)])
    app.enqueue_many([{"kind": "k2", "payload": i} for i in range(5)])
    kinds = sorted(r["kind"] for r in claim(app, 20)[0])
    assert kinds == ["k1", "k2", "k2", "k2"]


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"kind": "k1", "per_second": -1}, ValueError, "per_second must be between"),
        ({"kind": "k1", "per_second": float("nan")}, ValueError, "per_second must be between"),
        ({"kind": "k1", "per_second": "5"}, ValueError, "per_second must be a number"),
        ({"kind": "k1", "per_second": 5, "per_tenant": 1}, ValueError, "per_tenant and ramp"),
        ({"kind": "k1", "per_second": 5, "ramp": 10}, ValueError, "per_tenant and ramp"),
        ({"kind": "k1", "burst": 3}, ValueError, "burst needs a rate"),
        ({"kind": "", "per_second": 5}, ValueError, "kind must be a non-empty"),
        ({"kind": 7, "per_second": 5}, TypeError, "kind must be a string"),
    ],
)
def test_bad_kind_rates_are_refused_and_nothing_is_written(
    app: jobtrail.App, options: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        app.set_rate("default", by="ops", note="n", **options)
    assert app.queue_history("default") == []
