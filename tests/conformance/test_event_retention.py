"""Retention of durable handlers' events on both backends: an event is deleted once older than
the retention of succeeded tasks unless a waiting task of its tenant waits for it; a woken wait
keeps its payload in its own record, so pruning the event after the wake changes nothing."""

from __future__ import annotations

from typing import Any

import jobtrail
from jobtrail.services import retention

from ._effects_support import burst
from .test_ops import raw

HOUR = 3600


def backdate_event(store: Any, key: str, seconds: float) -> None:
    shift = (
        f"created_at - {float(seconds)}"
        if store.backend == "sqlite"
        else f"created_at - make_interval(secs => {float(seconds)})"
    )
    raw(store, f"UPDATE jobtrail_events SET created_at = {shift} WHERE key = ?", (key,))  # noqa: S608 - constant


def event_keys(store: Any) -> set[str]:
    return {r[0] for r in raw(store, "SELECT key FROM jobtrail_events")}


def test_old_events_are_pruned_and_those_still_needed_kept(store: Any) -> None:
    app = store.app()

    @app.task("needs_a")
    def needs_a(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.wait_for_event("a")

    waiter = app.enqueue("needs_a")
    burst(app)
    assert app.get(waiter.id).state == "waiting"
    app.send_event("old", 1)
    app.send_event("recent", 2)
    app.send_event("a", "other tenant's", tenant="acme")  # not ours: this task keeps waiting
    # an event of a key a task waits for (as if stored by the send that is about to wake it)
    raw(
        store,
        "INSERT INTO jobtrail_events (tenant, key, payload, created_at) "
        "SELECT '', 'a', payload, created_at FROM jobtrail_events WHERE key = 'recent'",
    )
    for key in ("old", "a"):
        backdate_event(store, key, 2 * HOUR)
    assert app.get(waiter.id).state == "waiting"

    assert retention.prune_events(app._driver, 3 * HOUR) == 0  # all younger than that
    # the old one goes, with the other tenant's "a" (no task of acme waits); ours stays
    assert retention.prune_events(app._driver, HOUR, batch=1) == 2
    assert event_keys(store) == {"recent", "a"}
    assert raw(store, "SELECT tenant FROM jobtrail_events WHERE key = 'a'") == [("",)]
    # retention passes prune events by the retention of succeeded tasks
    assert retention.prune_retained(app._driver, retention.parse_retention({})) == {}
    backdate_event(store, "recent", 8 * 86400)
    got = retention.prune_retained(app._driver, retention.parse_retention({}))
    assert got == {"events": 1}
    assert event_keys(store) == {"a"}
    kept = retention.parse_retention({"succeeded": None})
    backdate_event(store, "a", 800 * 86400)
    app.cancel(waiter.id, by="test")
    assert retention.prune_retained(app._driver, kept) == {}  # kept for ever with the tasks
    assert retention.prune_events(app._driver, HOUR) == 1  # no task waits any more


def test_a_woken_wait_resumes_with_its_payload_after_the_event_is_pruned(store: Any) -> None:
    app = store.app()

    @app.task("needs_b")
    def needs_b(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.wait_for_event("b")

    task = app.enqueue("needs_b")
    burst(app)
    assert app.send_event("b", {"x": 1}) == 1
    assert app.get(task.id).state == "queued"  # woken, not yet resumed
    backdate_event(store, "b", 2 * HOUR)
    assert retention.prune_events(app._driver, HOUR) == 1
    assert event_keys(store) == set()
    burst(app)
    done = app.get(task.id)
    assert done.state == "succeeded" and done.result == {"x": 1}
