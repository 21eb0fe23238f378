"""The read helpers for people (``app_views.py``) on both backends: steps and effects, the
live "why not running" line, cheap state counts, key search, the batch-replay preview and the
arrivals/completions buckets."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import jobtrail
from jobtrail.model.errors import TaskNotFound


def _kinds(app: jobtrail.App) -> None:
    @app.task("note", max_attempts=1)
    def note(ctx: jobtrail.Context, payload: dict[str, Any]) -> None:
        ctx.step("render", lambda: {"pages": 1})
        ctx.effect("submit", lambda key: {"receipt": "r-1", "key": key})
        if payload.get("fail"):
            raise jobtrail.PermanentError("revoked", category="unauthorized")


def test_steps_and_why(app: jobtrail.App) -> None:
    _kinds(app)
    done = app.enqueue("note", {})
    app.run_worker(burst=True)
    steps = app.steps(done.id)
    assert [(s["name"], s["effect"], s["status"]) for s in steps] == [
        ("render", False, "confirmed"),
        ("submit", True, "confirmed"),
    ]
    assert steps[1]["effect_key"] == f"{done.id}/submit"
    assert steps[1]["result"] == {"receipt": "r-1", "key": f"{done.id}/submit"}
    assert app.why_not_running(done.id)["why"] is None
    later = app.enqueue("note", {}, delay=600)
    assert "not due" in app.why_not_running(later.id)["why"]
    app.pause("default", by="ops", note="outage")
    assert "outage" in app.why_not_running(later.id, "en")["why"]
    assert app.why_not_running(later.id, "zh")["why"]
    with pytest.raises(TaskNotFound):
        app.steps("424242")
    with pytest.raises(ValueError):
        app.why_not_running(later.id, "fr")


def test_counts_key_search_preview_and_activity(app: jobtrail.App) -> None:
    _kinds(app)
    keyed = app.enqueue("note", {}, idempotency_key="k-1", delay=600)
    app.enqueue("note", {}, idempotency_key="k-1", tenant="acme", delay=600)
    dead = [app.enqueue("note", {"fail": True}) for _ in range(3)]
    app.run_worker(burst=True)
    counts = app.state_counts()
    assert counts["queued"] == 2 and counts["dead"] == 3 and counts["leased"] == 0
    assert [t.id for t in app.find_by_key("k-1")] == [keyed.id]
    assert len(app.find_by_key("k-1", tenant="acme")) == 1
    assert app.find_by_key("k-1", kinds=["other"]) == []
    preview = app.dead_preview(reason="permanent_error", limit=2)
    picked = [t.id for t in preview["tasks"]]  # the oldest deaths first, as replay_dead picks
    assert len(picked) == 2 and set(picked) < {t.id for t in dead}
    full = app.dead_preview(reason="permanent_error")
    out = app.replay_dead(
        reason="permanent_error", until=full["until"], limit=len(full["tasks"]), by="o", note="n"
    )
    assert [i for i, _ in out] == [t.id for t in full["tasks"]]
    assert app.dead_preview(until=app.db_now() - timedelta(days=1))["tasks"] == []
    act = app.activity(window=3600, bucket=300)
    q = act["queues"]["default"]
    # 5 enqueued + the 3 replayed: a replay is work entering the queue again (not a completion)
    assert len(q["arrivals"]) == 12 and sum(q["arrivals"]) == 8
    assert sum(q["completions"]) == 3  # the three that died
    assert q["arrivals"][-1] == 8  # all in the newest bucket
    with pytest.raises(ValueError):
        app.activity(window=3600, bucket=1)
