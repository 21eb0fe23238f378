"""Hostile input at the App, on both backends: a NUL character or a lone surrogate
in a filter or an operator's text, and a number or duration out of range, are a ``ValueError``
naming the field — before the store sees them (PostgreSQL would answer with its own error, SQLite
would store the NUL or overflow) — and nothing changes. The API, the CLI and the dashboard all
call these methods, so each gets the same refusal."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import jobtrail

BAD_TEXT = {"NUL": "a\x00b", "surrogate": "a\ud800b", "undecodable byte": "a\udcffb"}


def seeded(app: jobtrail.App) -> dict[str, str]:
    """A queued task, a dead one and a paused queue to aim the refused actions at."""

    @app.task("send")
    def send(ctx: Any, payload: Any) -> None:
        return None

    queued = app.enqueue("send", {"n": 1}, tenant="acme")
    dead = app.enqueue("send", {"n": 2})
    app.force(dead.id, "dead", by="ops", note="seed")
    app.pause("held", by="ops", note="seed")
    return {"queued": queued.id, "dead": dead.id}


def snapshot(app: jobtrail.App) -> Any:
    """Everything a refused call might have changed."""
    tasks = sorted(app.list(limit=1000), key=lambda t: t.id)
    return (
        [(t.to_dict(), [tr.to_dict() for tr in app.transitions(t.id)]) for t in tasks],
        app.queues(),
        [app.queue_history(q["queue"]) for q in app.queues()],
    )


def refused(call: Callable[[], Any], field: str, match: str) -> None:
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).startswith(f"{field} "), info.value
    assert match in str(info.value), info.value


Calls = list[tuple[str, Callable[[], Any]]]


def reads(app: jobtrail.App, bad: str) -> Calls:
    return [
        ("kind", lambda: app.list(kind=bad)),
        ("queue", lambda: app.list(queue=bad)),
        ("tenant", lambda: app.list(tenant=bad)),
        ("state", lambda: app.list(state=bad)),
        ("key", lambda: app.find_by_key(bad)),  # the dashboard's search
        ("tenant", lambda: app.find_by_key("k", tenant=bad)),
        ("kind", lambda: app.find_by_key("k", kinds=[bad])),
        ("kind", lambda: app.dead_preview(kind=bad)),
        ("reason", lambda: app.dead_preview(reason=bad)),
        ("queue", lambda: app.queue_history(bad)),
    ]


def actions(
    app: jobtrail.App, ids: dict[str, str], bad: str
) -> list[tuple[str, Callable[[], Any]]]:
    q, d = ids["queued"], ids["dead"]
    return [
        ("by", lambda: app.cancel(q, by=bad)),
        ("note", lambda: app.cancel(q, by="ops", note=bad)),
        ("by", lambda: app.replay(d, by=bad, note="n")),
        ("note", lambda: app.replay(d, by="ops", note=bad)),
        ("by", lambda: app.force(q, "dead", by=bad, note="n")),
        ("note", lambda: app.force(q, "dead", by="ops", note=bad)),
        ("by", lambda: app.annotate(q, by=bad, note="n")),
        ("note", lambda: app.annotate(q, by="ops", note=bad)),
        ("by", lambda: app.dismiss(d, by=bad, note="n")),
        ("note", lambda: app.dismiss(d, by="ops", note=bad)),
        ("by", lambda: app.pause("default", by=bad, note="n")),
        ("note", lambda: app.pause("default", by="ops", note=bad)),
        ("by", lambda: app.resume("held", by=bad, note="n")),
        ("note", lambda: app.resume("held", by="ops", note=bad)),
        ("queue", lambda: app.pause(bad, by="ops", note="n")),
        ("by", lambda: app.set_limit("default", total=1, by=bad, note="n")),
        ("note", lambda: app.set_limit("default", total=1, by="ops", note=bad)),
        ("by", lambda: app.replay_dead(kind="send", by=bad, note="n")),
        ("note", lambda: app.replay_dead(kind="send", by="ops", note=bad)),
        ("kind", lambda: app.replay_dead(kind=bad, by="ops", note="n")),
    ]


@pytest.mark.parametrize("what", sorted(BAD_TEXT))
def test_bad_text_in_filters_and_operator_text_is_refused(app: jobtrail.App, what: str) -> None:
    ids = seeded(app)
    before = snapshot(app)
    bad = BAD_TEXT[what]
    match = "NUL" if what == "NUL" else "Unicode"
    for field, call in reads(app, bad) + actions(app, ids, bad):
        refused(call, field, match)
    assert snapshot(app) == before


def test_bad_text_is_refused_before_a_lookup(app: jobtrail.App) -> None:
    # an unknown task id with a bad note: the note is named, not "no task"
    refused(lambda: app.cancel("999", by="ops", note="\x00"), "note", "NUL")
    refused(lambda: app.replay("999", by="\x00", note="n"), "by", "NUL")


YEAR_9999 = "9999-12-31T23:59:59-01:00"  # after the last datetime once in UTC
YEAR_1 = "0001-01-01T00:00:00+01:00"  # before the first


def out_of_range(app: jobtrail.App) -> Calls:
    huge = 99999999999999999999
    return [
        ("limit", lambda: app.list(limit=huge)),
        ("limit", lambda: app.queue_history("default", limit=huge)),
        ("limit", lambda: app.replay_dead(kind="send", by="o", note="n", limit=huge)),
        ("limit", lambda: app.dead_preview(kind="send", limit=huge)),
        ("per_second", lambda: app.replay_dead(kind="send", by="o", note="n", per_second=1e-300)),
        ("per_second", lambda: app.replay_dead(kind="send", by="o", note="n", per_second=1e300)),
        ("total", lambda: app.set_limit("default", total=huge, by="o", note="n")),
        ("per_tenant", lambda: app.set_limit("default", per_tenant=2**31, by="o", note="n")),
        ("older_than", lambda: app.prune("99999999999d")),
        ("older_than", lambda: app.prune(huge)),
        ("older_than", lambda: app.prune(float("inf"))),
        ("older_than", lambda: app.prune(timedelta(days=999_999_999))),
        ("window", lambda: app.stats(window=1e20)),
        ("window", lambda: app.transition_counts(window=float("inf"))),
        ("window", lambda: app.activity(window=1e300, bucket=1e298)),
        ("since", lambda: app.replay_dead(since=YEAR_1, by="o", note="n")),
        ("until", lambda: app.dead_preview(until=YEAR_9999)),
        ("run_at", lambda: app.enqueue("send", run_at=YEAR_9999)),
        # an INTEGER column's range: SQLite overflowed on 10**20 and stored 2**40, which
        # PostgreSQL refused with its own error
        ("max_attempts", lambda: app.enqueue("send", max_attempts=huge)),
        ("max_attempts", lambda: app.enqueue("send", max_attempts=2**40)),
        # a worker's options: a concurrency of 10**20 made every claim overflow, retried for ever
        ("concurrency", lambda: app.run_worker(burst=True, concurrency=huge)),
        ("concurrency", lambda: app.run_worker(burst=True, concurrency=0)),
        ("prefetch", lambda: app.run_worker(burst=True, prefetch=huge)),
        ("poll_interval", lambda: app.run_worker(burst=True, poll_interval=float("nan"))),
        ("grace", lambda: app.run_worker(burst=True, grace=1e300)),
        ("concurrency", lambda: app.start_worker(concurrency=huge)),
    ]


def test_out_of_range_numbers_and_durations_are_refused(app: jobtrail.App) -> None:
    seeded(app)
    before = snapshot(app)
    for field, call in out_of_range(app):
        refused(call, field, "")
    assert snapshot(app) == before


def test_the_bounds_themselves_are_accepted(app: jobtrail.App) -> None:
    seeded(app)
    assert app.prune("36525d") == {"tasks": 0, "transitions": 0}
    assert app.list(limit=10_000)
    assert app.stats(window=100 * 365.25 * 86400)["queues"]
    assert app.set_limit("default", total=1_000_000, by="o", note="n")["limit_total"] == 1_000_000
    assert app.replay_dead(kind="nothing", by="o", note="n", limit=1_000_000) == []
    top = app.enqueue("send", max_attempts=2**31 - 1, priority=2**31 - 1)
    assert (app.get(top.id).max_attempts, app.get(top.id).priority) == (2**31 - 1, 2**31 - 1)
    assert app.enqueue("send", priority=-(2**31 - 1)).priority == -(2**31 - 1)


@pytest.mark.parametrize("what", sorted(BAD_TEXT))
def test_bad_text_in_a_workflows_label_is_refused(app: jobtrail.App, what: str) -> None:
    """A workflow parent's kind is a label no handler registers: the text rule still holds."""
    seeded(app)
    before = snapshot(app)
    with pytest.raises(ValueError, match="^kind "):
        app.enqueue_workflow(f"order{BAD_TEXT[what]}", [("send", {"n": 4})])
    assert snapshot(app) == before


@pytest.mark.parametrize("field", ["tenant", "queue", "idempotency_key"])
@pytest.mark.parametrize("what", sorted(BAD_TEXT))
def test_bad_text_in_an_enqueues_names_is_refused(app: jobtrail.App, field: str, what: str) -> None:
    """The names an enqueue stores get the same rule as filters: a message naming the field,
    never a raw codec error from the driver, and no task."""
    seeded(app)
    before = snapshot(app)
    with pytest.raises(ValueError, match=field):
        app.enqueue("send", {"n": 3}, **{field: BAD_TEXT[what]})
    with pytest.raises(ValueError, match=field):
        app.enqueue_many([{"kind": "send", field: BAD_TEXT[what]}])
    assert snapshot(app) == before


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_attempts", 99999999999999999999),
        ("max_attempts", 2**40),
        ("max_attempts", 0),
        ("lease_seconds", 1e300),
        ("lease_seconds", float("nan")),
        ("backoff_base", float("nan")),
        ("backoff_cap", float("inf")),
        ("max_elapsed", float("inf")),
        ("timeout", 1e300),
    ],
)
def test_a_kinds_numbers_out_of_range_are_refused_at_registration(
    app: jobtrail.App, option: str, value: Any
) -> None:
    """Before, ``max_attempts=2**40`` registered and failed at each enqueue (PostgreSQL's
    error; SQLite stored it), and a lease of 1e300 s at every claim: now the registration
    names the kind and the option, and registers nothing."""
    with pytest.raises(ValueError, match=f"^kind 'odd': {option} ") as info:
        app.task("odd", **{option: value})(lambda ctx, payload: None)
    assert "odd" not in app.kinds, info.value
    assert not app.list()


def test_an_enqueue_many_item_out_of_range_is_named(app: jobtrail.App) -> None:
    seeded(app)
    before = snapshot(app)
    with pytest.raises(
        ValueError, match="^enqueue_many item 1: max_attempts must be a positive integer"
    ):
        app.enqueue_many([{"kind": "send"}, {"kind": "send", "max_attempts": 2**40}])
    with pytest.raises(TypeError, match="^enqueue_many item 0: priority must be an integer from"):
        app.enqueue_many([{"kind": "send", "priority": -(2**31)}])
    assert snapshot(app) == before
