"""Issue 21 (growth), both backends: the bounded reads that keep stats and the dashboard fast on
a large store say when a number is a bound, and are exact below their bounds.

The bounds are module constants (10,000 queued per queue and kind, 20,000 transitions per
window, 10,000 per state on the dashboard's header); these tests lower them so that a handful
of tasks reaches them."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

import jobtrail
from jobtrail.cli.ops import stats_text
from jobtrail.services import stats as stats_module
from jobtrail.web.dashboard import routes
from jobtrail.web.server import create_app

from .support import db_now

READ = {"Authorization": "Bearer rd"}


def _noop(ctx: Any, payload: Any) -> None:
    return None


def _fill(app: jobtrail.App) -> None:
    app.task("x", queue="a")(_noop)
    app.task("y", queue="a")(_noop)
    app.task("z", queue="b")(_noop)
    for kind, n in (("x", 7), ("y", 2), ("z", 3)):
        made = app.enqueue_many([{"kind": kind, "payload": {"i": i}} for i in range(n)])
        # each batch at a time of its own: a bounded read takes every transition sharing its
        # oldest one's time, so the batches must not share one (on a fast disk all three
        # commits can fall in one millisecond, SQLite's clock step, and a bound of 4 read 12)
        while db_now(app) <= made[-1].created_at:
            pass


def _rows(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(q["queue"], q["kind"]): q for q in report["queues"]}


def _without_bounds(report: dict[str, Any]) -> dict[str, Any]:
    out = {
        k: v
        for k, v in copy.deepcopy(report).items()
        if k not in ("at", "window_limit", "count_limit")
    }
    for q in out["queues"]:
        q.pop("oldest_due_age")  # ages move with the clock between the two reads
    return out


def test_below_its_bounds_bounded_stats_equal_the_exact_ones(app: jobtrail.App) -> None:
    _fill(app)
    task = app.list(state="queued", limit=1)[0]
    app.cancel(task.id, by="ops", note="one finished in the window")
    bounded, exact = app.stats(window=300), app.stats(window=300, exact=True)
    assert bounded["window_capped"] is False and bounded["window_seconds"] == 300
    assert bounded["window_limit"] == stats_module.WINDOW_TRANSITIONS
    assert exact["window_limit"] is None and exact["count_limit"] is None
    assert all(q["at_least"] == [] for q in bounded["queues"])
    assert _without_bounds(bounded) == _without_bounds(exact)
    ages = [
        (q["oldest_due_age"], e["oldest_due_age"])
        for q, e in zip(bounded["queues"], exact["queues"], strict=True)
    ]
    assert all(a is not None and abs(a - b) < 5 for a, b in ages), ages


def test_queued_counts_stop_at_the_bound_and_say_so(
    app: jobtrail.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(app)
    monkeypatch.setattr(stats_module, "COUNT_UPTO", 3)
    bounded, exact = _rows(app.stats()), _rows(app.stats(exact=True))
    assert exact[("a", "x")]["counts"]["queued"] == 7
    assert bounded[("a", "x")]["counts"]["queued"] == 3
    assert bounded[("a", "x")]["at_least"] == ["queued", "backlog", "drain_time"]
    assert bounded[("a", "x")]["backlog"] == 3
    assert bounded[("a", "y")]["counts"]["queued"] == 2 and bounded[("a", "y")]["at_least"] == []
    # exactly at the bound is still exact: nothing was left uncounted
    assert bounded[("b", "z")]["counts"]["queued"] == 3 and bounded[("b", "z")]["at_least"] == []
    # the oldest due task of a group is found whatever the bound
    for key in exact:
        assert (bounded[key]["oldest_due_age"] is None) == (exact[key]["oldest_due_age"] is None)
    text = stats_text(app.stats())
    assert re.search(r"\ba\s+x\s+3\+", text), text
    assert text.endswith("N+: N or more (counted up to N)")
    assert stats_text(app.stats(), "zh").endswith("N+：至少 N（只数到 N）")
    assert "+" not in stats_text(app.stats(exact=True))


def test_a_window_with_more_transitions_than_the_bound_is_shortened_and_says_so(
    app: jobtrail.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(app)  # 12 enqueued transitions, in three statements
    monkeypatch.setattr(stats_module, "WINDOW_TRANSITIONS", 4)
    report = app.stats(window=3600)
    assert report["window_capped"] is True and report["requested_window_seconds"] == 3600
    assert 0 < report["window_seconds"] < 3600
    # every figure is of the shortened window: its arrivals are the transitions it read (at
    # least the bound; more when several share the oldest one's time)
    minutes = report["window_seconds"] / 60
    arrivals = sum(q["arrivals_per_min"] for q in report["queues"]) * minutes
    assert 4 <= round(arrivals) <= 12, arrivals
    exact = app.stats(window=3600, exact=True)
    assert exact["window_capped"] is False and exact["window_seconds"] == 3600
    assert round(sum(q["arrivals_per_min"] for q in exact["queues"]) * 60) == 12
    text = stats_text(report)
    assert "the window holds more than 4 transitions: these figures are of the newest 4" in text
    assert "只取最新的 4 条" in stats_text(report, "zh")
    monkeypatch.setattr(stats_module, "WINDOW_TRANSITIONS", 12)
    assert app.stats(window=3600)["window_capped"] is False  # exactly the bound: all read


def test_the_activity_charts_read_the_newest_transitions_and_say_from_when(
    app: jobtrail.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(app)
    whole = app.activity(window=3600, bucket=300)
    assert whole["capped"] is False and whole["complete_since"] == whole["since"]
    assert sum(sum(q["arrivals"]) for q in whole["queues"].values()) == 12
    monkeypatch.setattr(stats_module, "WINDOW_TRANSITIONS", 4)
    part = app.activity(window=3600, bucket=300)
    assert part["capped"] is True and part["since"] < part["complete_since"] <= part["now"]
    assert 4 <= sum(sum(q["arrivals"]) for q in part["queues"].values()) < 12
    exact = app.activity(window=3600, bucket=300, exact=True)
    assert exact["capped"] is False and exact["queues"] == whole["queues"]


def test_state_counts_up_to_a_bound(app: jobtrail.App) -> None:
    _fill(app)
    exact = app.state_counts()
    assert exact["queued"] == 12
    assert app.state_counts(upto=5) == {**exact, "queued": 5}
    assert app.state_counts(upto=100) == exact
    with pytest.raises(ValueError, match="upto"):
        app.state_counts(upto=0)


def test_a_page_of_one_state_is_the_same_page_as_before(app: jobtrail.App) -> None:
    _fill(app)
    for t in app.list(state="queued", limit=5):
        app.cancel(t.id, by="ops", note="mixed states")
    everything = app.list(limit=100)
    for state in ("queued", "cancelled", "succeeded"):
        expected = [t.id for t in everything if t.state == state]
        assert [t.id for t in app.list(state=state, limit=100)] == expected
        assert [t.id for t in app.list(state=state, limit=2)] == expected[:2]
        if len(expected) > 2:  # the next page starts after the last id shown
            page = app.list(state=state, limit=2, before=expected[1])
            assert [t.id for t in page] == expected[2:4]
        assert [t.id for t in app.list(state=state, kind="x", limit=100)] == [
            t.id for t in everything if t.state == state and t.kind == "x"
        ]
        assert [t.id for t in app.list(state=state, queue="b", limit=100)] == [
            t.id for t in everything if t.state == state and t.queue == "b"
        ]


def test_the_dashboard_shows_bounds_as_bounds(
    app: jobtrail.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(app)
    monkeypatch.setattr(routes, "COUNT_CAP", 4)
    monkeypatch.setattr(stats_module, "COUNT_UPTO", 3)
    monkeypatch.setattr(stats_module, "WINDOW_TRANSITIONS", 4)
    with TestClient(create_app(app, tokens="rd:read")) as web:
        tasks = web.get("/?lang=en", headers=READ)
        assert tasks.status_code == 200
        assert re.search(r'data-state="queued">.*?<b>4\+</b>', tasks.text), tasks.text
        assert re.search(r'data-state="leased">.*?<b>0</b>', tasks.text)
        queues = web.get("/queues?lang=en", headers=READ)
        assert queues.status_code == 200
        assert re.search(r"<td>a</td><td>x</td><td>3\+</td>", queues.text), queues.text
        assert re.search(r"<td>a</td><td>y</td><td>2</td>", queues.text)
        assert 'id="window-capped"' in queues.text and 'id="at-least"' in queues.text
        assert 'id="activity-capped"' in queues.text
    monkeypatch.setattr(routes, "COUNT_CAP", 100)
    monkeypatch.setattr(stats_module, "COUNT_UPTO", 100)
    monkeypatch.setattr(stats_module, "WINDOW_TRANSITIONS", 100)
    with TestClient(create_app(app, tokens="rd:read")) as web:
        tasks = web.get("/?lang=en", headers=READ)
        assert re.search(r'data-state="queued">.*?<b>12</b>', tasks.text)
        queues = web.get("/queues?lang=en", headers=READ).text
        assert re.search(r"<td>a</td><td>x</td><td>7</td>", queues), queues
        assert 'id="window-capped"' not in queues and 'id="at-least"' not in queues
        assert 'id="activity-capped"' not in queues
