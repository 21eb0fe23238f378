"""Explanations built from the log, "why is it not running", languages,
and unknown ids."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

import jobtrail
from jobtrail.model.models import iso

from .support import DEAD_OWNER, claim_as_dead_worker, drain, live_worker, run

CJK = re.compile(r"[\u4e00-\u9fff]")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\s+(\S+)\s+(\S+)")


def _logged(text: str) -> list[tuple[str, str]]:
    """(reason, state) of each transition line, in the order the explanation prints them."""
    return [(m.group(1), m.group(2)) for line in text.splitlines() if (m := STAMP.match(line))]


def _story(app: jobtrail.App) -> jobtrail.Task:
    """A task with a varied history: a retry, a death, a note, a replay, a success."""

    @app.task("k", max_attempts=2, backoff_base=0)
    def k(ctx, p):
        if ctx.task.replay_count == 0:
            raise jobtrail.TransientError("upstream timed out", category="timeout")

    task = app.enqueue("k", {"note": 1}, tenant="acme")
    drain(app, task.id)
    app.annotate(task.id, by="ann", note="it was the CDN", corrects=3)
    app.replay(task.id, by="bob", note="CDN fixed")
    run(app)
    assert app.get(task.id).state == "succeeded"
    return task


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_explain_lists_every_transition_in_order(app: jobtrail.App, lang: str) -> None:
    task = _story(app)
    ts = app.transitions(task.id)
    assert [t.seq for t in ts] == list(range(1, len(ts) + 1))
    text = app.explain(task.id, lang=lang)
    assert _logged(text) == [(t.reason, t.to_state.value) for t in ts]
    assert [t.reason for t in ts] == [
        "enqueued",
        "claimed",
        "retry_scheduled",
        "claimed",
        "attempts_exhausted",
        "correction",
        "replayed",
        "claimed",
        "completed",
    ]
    for t in ts:
        assert iso(t.at) in text
    # the header: id, kind, queue, tenant, state and reason
    head = text.split("\n\n")[0]
    for needle in (task.id, "k", "default", "acme", "succeeded", "completed"):
        assert needle in head
    # details from the log: who acted, notes, error categories
    for needle in ("ann", "it was the CDN", "bob", "CDN fixed", "timeout", ts[1].actor):
        assert needle in text


def test_explain_languages(app: jobtrail.App) -> None:
    task = _story(app)
    en, zh = app.explain(task.id), app.explain(task.id, lang="zh")
    assert en != zh
    assert CJK.search(zh) and not CJK.search(en)
    assert _logged(en) == _logged(zh)  # codes never change with the language
    with pytest.raises(ValueError, match="fr"):
        app.explain(task.id, lang="fr")
    with pytest.raises(ValueError):
        app.explain(task.id, lang="")


def test_why_not_running_delayed(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k", delay=600)
    text = app.explain(task.id)
    assert task.run_at is not None
    assert "not due until " + iso(task.run_at) in text
    assert iso(task.run_at) in app.explain(task.id, lang="zh")
    # a due queued task that a live worker takes is about to run: no excuse is given
    # (without such a worker explain says so: test_live_workers.py)
    due = app.enqueue("k")
    assert "no live worker serves queue default" in app.explain(due.id)
    live_worker(app, "elsewhere:1:aa", queues=["default"], kinds=["k"])
    assert "not running" not in app.explain(due.id)


def test_why_not_running_leased(app: jobtrail.App) -> None:
    app.task("k", lease_seconds=60)(lambda ctx, p: None)
    task = app.enqueue("k")
    claim_as_dead_worker(app, "k")
    got = app.get(task.id)
    assert got.lease_expires_at is not None
    for lang in ("en", "zh"):
        text = app.explain(task.id, lang=lang)
        assert DEAD_OWNER in text and iso(got.lease_expires_at) in text
    assert "held by worker " + DEAD_OWNER in app.explain(task.id)


def test_why_not_running_dead_and_dismissed(app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx, p):
        raise jobtrail.PermanentError("token revoked", category="unauthorized")

    task = app.enqueue("k")
    run(app)
    text = app.explain(task.id)
    assert "needs a person" in text
    assert "permanent_error" in text and "unauthorized" in text and "token revoked" in text
    app.dismiss(task.id, by="ops", note="account closed")
    after = app.explain(task.id)
    assert "dismissed" in after and "account closed" in after
    (why,) = [line for line in after.splitlines() if line.startswith("not running:")]
    assert "dismissed" in why and "needs a person" not in why


def test_dismissed_task_header_does_not_ask_for_a_person(app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx, p):
        raise jobtrail.PermanentError("bad input")

    task = app.enqueue("k")
    run(app)
    app.dismiss(task.id, by="ops", note="account closed")
    head = app.explain(task.id).split("\n\n")[0]
    assert "needs a person" not in head


def test_finished_tasks_have_no_excuse(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    done, cancelled = app.enqueue("k"), app.enqueue("k", delay=60)
    run(app)
    app.cancel(cancelled.id, by="ops")
    for task_id in (done.id, cancelled.id):
        assert "not running" not in app.explain(task_id)


def test_explain_next_scheduled_time_after_a_retry(app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx, p):
        raise jobtrail.TransientError("slow down", category="rate_limited", retry_after=120)

    task = app.enqueue("k")
    run(app)
    got = app.get(task.id)
    assert got.run_at is not None
    text = app.explain(task.id)
    assert iso(got.run_at) in text  # header: next run
    # the retry line says when (SQLite's REAL times may print one millisecond apart)
    when = re.search(r"retry at (\d\d:\d\d:\d\d\.\d{3})Z", text.splitlines()[-1])
    assert when is not None
    said = datetime.fromisoformat(f"{iso(got.run_at)[:10]}T{when.group(1)}+00:00")
    assert abs(said - got.run_at) <= timedelta(milliseconds=2)
    assert "rate_limited" in text and "slow down" in text


def _by_id(app: jobtrail.App, task_id: str) -> dict[str, Callable[[], object]]:
    return {
        "get": lambda: app.get(task_id),
        "explain": lambda: app.explain(task_id),
        "explain zh": lambda: app.explain(task_id, lang="zh"),
        "transitions": lambda: app.transitions(task_id),
        "cancel": lambda: app.cancel(task_id, by="ops"),
        "replay": lambda: app.replay(task_id, by="ops", note="n"),
        "force": lambda: app.force(task_id, "queued", by="ops", note="n"),
        "annotate": lambda: app.annotate(task_id, by="ops", note="n"),
        "dismiss": lambda: app.dismiss(task_id, by="ops", note="n"),
    }


def test_unknown_ids_are_task_not_found(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    app.enqueue("k")
    for bad_id in ("999999", "abc", "", "-1", "1.5", "9" * 40):
        for name, call in _by_id(app, bad_id).items():
            with pytest.raises(jobtrail.TaskNotFound) as info:
                call()
            assert isinstance(info.value, LookupError), (name, bad_id)
    assert len(app.list()) == 1


def test_list_filters(app: jobtrail.App) -> None:
    app.task("a")(lambda ctx, p: None)
    app.task("b", queue="slow")(lambda ctx, p: None)
    x = app.enqueue("a", tenant="acme")
    y = app.enqueue("b")
    z = app.enqueue("a", delay=60)
    run(app)
    assert [t.id for t in app.list()] == [z.id, y.id, x.id]  # newest first
    assert [t.id for t in app.list(state="queued")] == [z.id]
    assert [t.id for t in app.list(kind="b")] == [y.id]
    assert [t.id for t in app.list(queue="slow")] == [y.id]
    assert [t.id for t in app.list(tenant="acme")] == [x.id]
    assert [t.id for t in app.list(limit=1)] == [z.id]
    with pytest.raises(ValueError, match="running"):
        app.list(state="running")


TASK_FIELDS = (
    "id kind queue tenant state payload priority attempts max_attempts run_at lease_owner "
    "lease_expires_at last_reason last_error_category last_error replay_count receipt_id "
    "parent_id created_at updated_at created steps"
).split()
TRANSITION_FIELDS = (
    "seq from_state to_state reason error_category error actor attempt at note corrects data"
).split()


def test_task_and_transition_views_have_the_spec_fields(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k", {"a": [1, "two", None]}, tenant="acme", priority=3)
    got = app.get(task.id)
    for name in TASK_FIELDS:
        assert hasattr(got, name), name
    assert isinstance(got.id, str) and got.payload == {"a": [1, "two", None]}
    assert (got.kind, got.queue, got.tenant, got.priority, got.max_attempts) == (
        "k",
        "default",
        "acme",
        3,
        5,
    )
    assert got.created is False and task.created is True  # only meaningful on enqueue
    assert got.steps == {}
    with pytest.raises(AttributeError):
        got.state = jobtrail.State.DEAD  # type: ignore[misc]  # a read-only snapshot
    (t,) = app.transitions(task.id)
    for name in TRANSITION_FIELDS:
        assert hasattr(t, name), name
    assert app.get(task.id).state == "queued"


def test_annotations_leave_state_and_lease_alone(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k")
    claim_as_dead_worker(app, "k")
    before = app.get(task.id)
    app.annotate(task.id, by="ops", note="looking into it")
    after = app.get(task.id)
    assert (after.state, after.lease_owner, after.lease_expires_at, after.attempts) == (
        before.state,
        before.lease_owner,
        before.lease_expires_at,
        before.attempts,
    )
    t = app.transitions(task.id)[-1]
    assert (t.from_state, t.to_state, t.reason, t.actor) == (
        "leased",
        "leased",
        "correction",
        "ops",
    )
    assert "looking into it" in app.explain(task.id)
