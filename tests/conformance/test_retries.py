"""Error categories, retries with full-jitter backoff, retry_after, budgets,
per-attempt timeouts, and attempts that lost their lease."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

import jobtrail
from jobtrail.core.decide import backoff

from .support import (
    assert_row,
    background_worker,
    drain,
    is_worker,
    join_handler_thread,
    last,
    reasons,
    run,
    wait_for,
)

MS = timedelta(milliseconds=1)


class HttpError(Exception):
    def __init__(self, status: int, attr: str = "status_code") -> None:
        super().__init__(f"HTTP {status}")
        if attr == "response":
            self.response = type("Response", (), {"status_code": status})()
        else:
            setattr(self, attr, status)


def _failing(
    app: jobtrail.App, exc: BaseException | type[BaseException], kind: str = "k", **options: Any
) -> list[int]:
    calls: list[int] = []

    @app.task(kind, **options)
    def k(ctx, p):
        calls.append(ctx.attempt)
        raise exc

    return calls


def test_retry_after_is_honoured_even_above_the_cap(app: jobtrail.App) -> None:
    calls = _failing(
        app,
        jobtrail.TransientError("slow down", category="rate_limited", retry_after=30),
        backoff_cap=1.0,
    )
    task = app.enqueue("k")
    run(app)  # the retry is 30 s away: the burst worker returns
    assert calls == [1]
    got = app.get(task.id)
    t = last(app, task.id)
    assert_row(t, "leased", "queued", "retry_scheduled", is_worker)
    assert (t.error_category, t.attempt) == ("rate_limited", 1)
    assert "slow down" in (t.error or "")
    assert got.state == "queued" and got.attempts == 1
    assert got.last_error_category == "rate_limited" and "slow down" in (got.last_error or "")
    assert got.run_at is not None
    assert abs((got.run_at - t.at).total_seconds() - 30) < 0.01


def test_default_backoff_is_full_jitter_within_the_ceiling(app: jobtrail.App) -> None:
    base, cap, attempts = 0.01, 0.04, 6
    _failing(
        app,
        jobtrail.TransientError("busy"),
        backoff_base=base,
        backoff_cap=cap,
        max_attempts=attempts,
    )
    task = app.enqueue("k")
    drain(app, task.id)
    ts = app.transitions(task.id)
    retries = [t for t in ts if t.reason == "retry_scheduled"]
    claims = [t for t in ts if t.reason == "claimed"]
    assert len(retries) == attempts - 1 and len(claims) == attempts
    delays = []
    for n, (retry, next_claim) in enumerate(zip(retries, claims[1:], strict=True), start=1):
        assert retry.attempt == n
        delay = float(retry.data["delay"])
        ceiling = min(cap, base * 2 ** (n - 1))
        assert 0 <= delay <= ceiling + 1e-9, (n, delay, ceiling)
        # a retry never runs before its run_at (database times)
        assert next_claim.at >= retry.at + timedelta(seconds=delay) - MS
        delays.append(delay)
    assert len(set(delays)) > 1  # jittered, not a fixed schedule
    assert_row(ts[-1], "leased", "dead", "attempts_exhausted", is_worker)
    assert ts[-1].attempt == attempts


def test_full_jitter_is_uniform_up_to_min_cap_base_power() -> None:
    rng = random.Random(7)
    for n, base, cap in ((1, 1.0, 300.0), (3, 1.0, 300.0), (4, 2.0, 10.0), (40, 1.0, 300.0)):
        ceiling = min(cap, base * 2 ** (n - 1))
        samples = [backoff(n, base, cap, rng) for _ in range(4000)]
        assert all(0 <= s <= ceiling for s in samples)
        assert min(samples) < 0.02 * ceiling and max(samples) > 0.98 * ceiling
        assert abs(sum(samples) / len(samples) - ceiling / 2) < 0.05 * ceiling


def test_attempts_exhausted_shows_the_last_category_and_count(app: jobtrail.App) -> None:
    errors = [
        jobtrail.TransientError("busy", category="rate_limited"),
        TimeoutError("slow"),
        ConnectionError("reset by peer"),
    ]

    @app.task("k", max_attempts=3, backoff_base=0)
    def k(ctx, p):
        raise errors[ctx.attempt - 1]

    task = app.enqueue("k")
    drain(app, task.id)
    ts = app.transitions(task.id)
    assert [t.error_category for t in ts if t.reason == "retry_scheduled"] == [
        "rate_limited",
        "timeout",
    ]
    assert_row(ts[-1], "leased", "dead", "attempts_exhausted", is_worker)
    assert (ts[-1].attempt, ts[-1].error_category) == (3, "unavailable")
    got = app.get(task.id)
    assert (got.state, got.last_reason, got.attempts) == ("dead", "attempts_exhausted", 3)
    assert got.last_error_category == "unavailable" and "reset by peer" in got.last_error
    text = app.explain(task.id)
    assert "attempts_exhausted" in text and "unavailable" in text and "3/3" in text


CLASSIFIED: list[tuple[BaseException, str, str, str]] = [
    (ConnectionError("reset"), "queued", "retry_scheduled", "unavailable"),
    (TimeoutError("slow"), "queued", "retry_scheduled", "timeout"),
    (HttpError(429), "queued", "retry_scheduled", "rate_limited"),
    (HttpError(502), "queued", "retry_scheduled", "unavailable"),
    (HttpError(503, "status"), "queued", "retry_scheduled", "unavailable"),
    (HttpError(504, "response"), "queued", "retry_scheduled", "unavailable"),
    (HttpError(400), "dead", "permanent_error", "invalid_input"),
    (HttpError(422, "status"), "dead", "permanent_error", "invalid_input"),
    (HttpError(401, "response"), "dead", "permanent_error", "unauthorized"),
    (HttpError(403), "dead", "permanent_error", "unauthorized"),
    (HttpError(404), "dead", "permanent_error", "not_found"),
    (HttpError(410, "response"), "dead", "permanent_error", "not_found"),
    (ValueError("odd"), "queued", "retry_scheduled", "unclassified"),
    (
        jobtrail.TransientError("x", category="conflict"),
        "queued",
        "retry_scheduled",
        "conflict",
    ),
    (
        jobtrail.PermanentError("x", category="not_found"),
        "dead",
        "permanent_error",
        "not_found",
    ),
]


def test_built_in_classification(app: jobtrail.App) -> None:
    tasks = []
    for i, (exc, *_) in enumerate(CLASSIFIED):
        _failing(app, exc, kind=f"k{i}", backoff_base=1000)
        tasks.append(app.enqueue(f"k{i}"))
    run(app)
    for task, (exc, state, reason, category) in zip(tasks, CLASSIFIED, strict=True):
        t = last(app, task.id)
        assert_row(t, "leased", state, reason, is_worker)
        assert t.error_category == category, exc
        got = app.get(task.id)
        assert (got.state, got.last_error_category) == (state, category), exc


def test_classify_hook_is_used_before_the_built_ins(app: jobtrail.App) -> None:
    seen: list[BaseException] = []

    def classify(exc: BaseException) -> str | None:
        seen.append(exc)
        if isinstance(exc, KeyError):
            return "conflict"
        if isinstance(exc, LookupError):
            return "not_found"
        return None  # fall back to the built-in mapping

    errors = {"a": KeyError("row"), "b": IndexError("gone"), "c": ConnectionError("down")}

    @app.task("k", classify=classify, backoff_base=1000)
    def k(ctx, p):
        raise errors[p]

    tasks = {name: app.enqueue("k", name) for name in errors}
    run(app)
    got = {
        name: (last(app, t.id).reason, last(app, t.id).error_category) for name, t in tasks.items()
    }
    assert got == {
        "a": ("retry_scheduled", "conflict"),
        "b": ("permanent_error", "not_found"),
        "c": ("retry_scheduled", "unavailable"),
    }
    assert {type(e) for e in seen} == {KeyError, IndexError, ConnectionError}


def test_retry_unclassified_false_makes_unknown_errors_permanent(app: jobtrail.App) -> None:
    @app.task("k", retry_unclassified=False, backoff_base=1000)
    def k(ctx, p):
        raise (ValueError("weird") if p == "odd" else ConnectionError("down"))

    odd, down = app.enqueue("k", "odd"), app.enqueue("k", "down")
    run(app)
    t = last(app, odd.id)
    assert_row(t, "leased", "dead", "permanent_error", is_worker)
    assert t.error_category == "unclassified" and "weird" in (t.error or "")
    # classified transient errors are still retried
    assert (last(app, down.id).reason, last(app, down.id).error_category) == (
        "retry_scheduled",
        "unavailable",
    )


def test_retries_never_go_past_the_budget(app: jobtrail.App) -> None:
    budget = 0.5
    _failing(
        app, jobtrail.TransientError("busy", retry_after=0.15), max_attempts=50, max_elapsed=budget
    )
    task = app.enqueue("k")
    drain(app, task.id)
    ts = app.transitions(task.id)
    start = ts[0].at
    retries = [t for t in ts if t.reason == "retry_scheduled"]
    assert retries, "the budget allows at least one retry"
    for t in retries:
        assert (
            t.at + timedelta(seconds=float(t.data["delay"]))
            <= start + timedelta(seconds=budget) + MS
        )
    assert_row(ts[-1], "leased", "dead", "retry_budget_exhausted", is_worker)
    assert ts[-1].error_category == "unavailable" and ts[-1].attempt == len(retries) + 1


def _sleeper(app: jobtrail.App, **options: Any) -> tuple[threading.Event, list[object]]:
    release = threading.Event()
    after: list[object] = []

    @app.task("k", **options)
    def k(ctx, p):
        release.wait(2.0)  # "sleeps" 2 s unless the test lets it go sooner
        try:
            ctx.check_cancelled()
        except BaseException as exc:
            after.append(exc)
            raise
        after.append("ctx still usable")

    return release, after


@pytest.mark.parametrize(
    ("max_attempts", "state", "reason"),
    [
        (3, "queued", "retry_scheduled"),
        (1, "dead", "attempts_exhausted"),
    ],
)
def test_sync_attempt_timeout(
    app: jobtrail.App, max_attempts: int, state: str, reason: str
) -> None:
    release, after = _sleeper(app, timeout=0.3, max_attempts=max_attempts, backoff_base=1000)
    task = app.enqueue("k")
    started = time.monotonic()
    run(app)
    took = time.monotonic() - started
    ts = app.transitions(task.id)
    assert_row(ts[-1], "leased", state, reason, ts[1].actor)
    assert ts[-1].error_category == "timeout" and ts[-1].attempt == 1
    assert timedelta(seconds=0.3) - MS <= ts[-1].at - ts[1].at
    assert took < 1.5, "the timeout did not cut the attempt short"
    # the abandoned handler is fenced: its next ctx call raises, and it writes nothing
    before = app.transitions(task.id)
    release.set()
    join_handler_thread(task.id)
    assert len(after) == 1 and isinstance(after[0], jobtrail.LeaseLost)
    assert app.transitions(task.id) == before
    assert app.get(task.id).state == state


def test_async_attempt_timeout_cancels_the_coroutine(app: jobtrail.App) -> None:
    cancelled: list[str] = []

    @app.task("k", timeout=0.3, backoff_base=1000)
    async def k(ctx, p):
        try:
            await asyncio.sleep(2)
        except asyncio.CancelledError:
            cancelled.append("cancelled")
            raise

    task = app.enqueue("k")
    started = time.monotonic()
    run(app)
    assert time.monotonic() - started < 1.5
    ts = app.transitions(task.id)
    assert_row(ts[-1], "leased", "queued", "retry_scheduled", ts[1].actor)
    assert ts[-1].error_category == "timeout" and ts[-1].attempt == 1
    assert ts[-1].at - ts[1].at >= timedelta(seconds=0.3) - MS
    assert cancelled == ["cancelled"]


def test_async_handlers_succeed_and_fail_like_plain_ones(app: jobtrail.App) -> None:
    @app.task("k", backoff_base=0)
    async def k(ctx, p):
        await asyncio.sleep(0)
        if ctx.attempt == 1:
            raise jobtrail.TransientError("first try", category="timeout")
        return None

    task = app.enqueue("k")
    drain(app, task.id)
    assert reasons(app, task.id) == [
        "enqueued",
        "claimed",
        "retry_scheduled",
        "claimed",
        "completed",
    ]


def _blocked(
    app: jobtrail.App, call_ctx: bool
) -> tuple[threading.Event, threading.Event, list[object]]:
    started, release = threading.Event(), threading.Event()
    after: list[object] = []

    @app.task("k")
    def k(ctx, p):
        if ctx.attempt > 1:
            return
        started.set()
        assert release.wait(10)
        if call_ctx:
            try:
                ctx.check_cancelled()
            except BaseException as exc:
                after.append(exc)
                raise
        after.append("returned")

    return started, release, after


@pytest.mark.parametrize("call_ctx", [True, False])
def test_force_fixed_attempt_loses_its_lease_and_writes_nothing(
    app: jobtrail.App, call_ctx: bool
) -> None:
    started, release, after = _blocked(app, call_ctx)
    task = app.enqueue("k")
    with background_worker(app, release):
        assert started.wait(10)
        app.force(
            task.id, "dead", by="op", note="checked outside: never sent", effects_checked=True
        )
        release.set()
    join_handler_thread(task.id)
    assert reasons(app, task.id) == ["enqueued", "claimed", "manual_fix"]
    assert app.get(task.id).state == "dead"
    if call_ctx:
        assert len(after) == 1 and isinstance(after[0], jobtrail.LeaseLost)
    else:
        assert after == ["returned"]  # returned normally; its completion was refused


def test_stale_attempt_cannot_overwrite_the_newer_attempt(app: jobtrail.App) -> None:
    started, release, after = _blocked(app, call_ctx=True)
    task = app.enqueue("k")
    with background_worker(app, release):
        assert started.wait(10)
        app.force(task.id, "queued", by="op", note="rerun it", effects_checked=True)
        wait_for(lambda: app.get(task.id).state == "succeeded", what="attempt 2 to finish")
    join_handler_thread(task.id)
    ts = app.transitions(task.id)
    assert [(t.reason, t.attempt) for t in ts] == [
        ("enqueued", 0),
        ("claimed", 1),
        ("manual_fix", 1),
        ("claimed", 2),
        ("completed", 2),
    ]
    assert len(after) == 1 and isinstance(after[0], jobtrail.LeaseLost)
    assert app.get(task.id).state == "succeeded"


def test_max_attempts_given_at_enqueue_wins_over_the_kind(app: jobtrail.App) -> None:
    calls = _failing(app, jobtrail.TransientError("busy"), max_attempts=5, backoff_base=0)
    task = app.enqueue("k", max_attempts=2)
    assert task.max_attempts == 2
    drain(app, task.id)
    assert calls == [1, 2]
    assert (last(app, task.id).reason, app.get(task.id).attempts) == ("attempts_exhausted", 2)


def test_cancelled_raised_without_a_cancel_request_is_an_ordinary_failure(
    app: jobtrail.App,
) -> None:
    calls: list[int] = []

    @app.task("k", lease_seconds=0.5, max_attempts=1)
    def k(ctx, p):
        calls.append(ctx.attempt)
        raise jobtrail.Cancelled("raised by the handler's own code")

    task = app.enqueue("k")
    run(app)
    ts = app.transitions(task.id)
    assert ts[2].actor == ts[1].actor, "the worker did not write the attempt's outcome"
    assert ts[2].reason in ("attempts_exhausted", "permanent_error")
    assert "raised by the handler" in (ts[2].error or "")
    assert calls == [1]
