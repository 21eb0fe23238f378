"""Durable handlers on both backends: a handler sleeps, waits for an event or for the children
it spawned, and resumes from the top without holding a worker; every edge and reason code of the
suspension, the wake-ups, the cancel of a suspended task and the determinism guard."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

import jobtrail
from jobtrail import ChildFailed, PermanentError, WaitTimedOut

from ._effects_support import burst, reasons, wait_for
from .support import drain


def _resume(app: jobtrail.App, task_id: str, state: str = "succeeded") -> jobtrail.Task:
    """Run burst workers until the task is ``state`` (a sleep ends by the clock)."""
    deadline = time.monotonic() + 15
    while True:
        burst(app)
        task = app.get(task_id)
        if task.state == state:
            return task
        assert time.monotonic() < deadline, f"task {task_id} still {task.state}"
        time.sleep(0.02)


# -- sleep ---------------------------------------------------------------------------------------


def test_a_sleep_releases_the_lease_and_resumes_with_the_recorded_steps(
    app: jobtrail.App,
) -> None:
    ran = {"a": 0, "outside": 0}

    @app.task("napper")
    def napper(ctx: jobtrail.Context, p: Any) -> Any:
        ran["outside"] += 1
        a = ctx.step("a", lambda: ran.__setitem__("a", ran["a"] + 1) or "A")
        ctx.sleep("cool_off", 1.0)
        return {"a": a}

    task = app.enqueue("napper")
    burst(app)
    asleep = app.get(task.id)
    assert asleep.state == "queued" and asleep.last_reason == "sleeping"
    assert asleep.lease_owner is None and asleep.attempts == 0  # the attempt is not counted
    assert asleep.waiting_for is not None
    assert asleep.waiting_for["kind"] == "sleep" and asleep.waiting_for["name"] == "cool_off"
    assert asleep.run_at == asleep.waiting_for["until"]
    assert asleep.run_at is not None and asleep.run_at > app.db_now()

    done = _resume(app, task.id)
    assert done.result == {"a": "A"}
    assert ran == {"a": 1, "outside": 2}  # the step ran once; the code outside it twice
    assert done.attempts == 1 and done.waiting_for is None
    assert reasons(app, task.id) == ["enqueued", "claimed", "sleeping", "claimed", "completed"]
    sleeping = app.transitions(task.id)[2]
    assert (sleeping.from_state, sleeping.to_state) == ("leased", "queued")
    assert sleeping.data["sleep"] == "cool_off"


def test_sleep_until_a_time_past_returns_at_once(app: jobtrail.App) -> None:
    @app.task("past")
    def past(ctx: jobtrail.Context, p: Any) -> str:
        ctx.sleep_until("then", datetime(2000, 1, 1).astimezone())
        return "went on"

    task = app.enqueue("past")
    burst(app)
    assert app.get(task.id).result == "went on"
    assert reasons(app, task.id) == ["enqueued", "claimed", "completed"]


async def _async_sleeper(ctx: jobtrail.Context, p: Any) -> str:
    await ctx.asleep("nap", 1.0)
    return await ctx.await_event("go", timeout=30)  # type: ignore[no-any-return]


def test_async_handlers_sleep_and_wait(app: jobtrail.App) -> None:
    app.task("async_sleeper")(_async_sleeper)
    task = app.enqueue("async_sleeper")
    burst(app)
    assert app.get(task.id).last_reason == "sleeping"
    waiting = _resume(app, task.id, "waiting")
    assert waiting.last_reason == "waiting_for_event"
    assert app.send_event("go", "yes") == 1
    assert _resume(app, task.id).result == "yes"


# -- events --------------------------------------------------------------------------------------


def test_an_event_wakes_the_waiting_task_and_the_first_payload_wins(app: jobtrail.App) -> None:
    @app.task("verify")
    def verify(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.wait_for_event("verified:" + p["id"], timeout=3600)

    task = app.enqueue("verify", {"id": "7"})
    other = app.enqueue("verify", {"id": "8"})
    burst(app)
    waiting = app.get(task.id)
    assert waiting.state == "waiting" and waiting.last_reason == "waiting_for_event"
    assert waiting.lease_owner is None and waiting.attempts == 0
    assert waiting.waiting_for is not None
    assert waiting.waiting_for["kind"] == "event"
    assert waiting.waiting_for["key"] == "verified:7"
    assert waiting.waiting_for["deadline"] is not None

    assert app.send_event("verified:7", {"at": "noon"}) == 1
    assert app.send_event("verified:7", {"at": "later"}) == 0  # a repeat: nothing changes
    assert app.get(task.id).state == "queued"
    assert app.get(task.id).last_reason == "event_received"
    assert app.get(other.id).state == "waiting"  # another key
    done = _resume(app, task.id)
    assert done.result == {"at": "noon"}
    assert reasons(app, task.id) == [
        "enqueued",
        "claimed",
        "waiting_for_event",
        "event_received",
        "claimed",
        "completed",
    ]
    edges = [(t.from_state, t.to_state) for t in app.transitions(task.id)]
    assert edges[2:4] == [("leased", "waiting"), ("waiting", "queued")]
    app.cancel(other.id, by="test")


def test_a_resumed_run_replays_its_recorded_sleep_and_wait_without_a_read_of_its_own(
    app: jobtrail.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker reads a resumed handler's records with its claim: the recorded sleep (its
    wake time passed by the claim's clock) and the woken wait return from them, the handler
    reading nothing itself; every suspension and wake is on the timeline."""

    @app.task("resumer")
    def resumer(ctx: jobtrail.Context, p: Any) -> Any:
        ctx.sleep("nap", 0.05)
        return ctx.wait_for_event("go")

    task = app.enqueue("resumer")
    _resume(app, task.id, "waiting")
    assert app.send_event("go", {"n": 7}) == 1
    reads: list[str] = []
    driver = app._driver
    for name in ("durable_look", "durable_records", "task_holder", "step_list"):
        real = getattr(driver, name)
        monkeypatch.setattr(
            driver, name, lambda *a, _n=name, _f=real, **k: reads.append(_n) or _f(*a, **k)
        )
    burst(app)  # the woken task is due: one burst resumes it to its end
    monkeypatch.undo()
    assert reads == ["durable_records"]  # the worker's, for its claim
    assert app.get(task.id).result == {"n": 7}
    assert reasons(app, task.id) == [
        "enqueued",
        "claimed",
        "sleeping",
        "claimed",
        "waiting_for_event",
        "event_received",
        "claimed",
        "completed",
    ]


def test_an_event_sent_before_the_wait_is_not_lost(app: jobtrail.App) -> None:
    assert app.send_event("early", [1, 2]) == 0  # nobody waits yet

    @app.task("late_waiter")
    def late_waiter(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.wait_for_event("early")

    task = app.enqueue("late_waiter")
    burst(app)
    assert app.get(task.id).result == [1, 2]
    assert reasons(app, task.id) == ["enqueued", "claimed", "completed"]


def test_events_are_per_tenant(app: jobtrail.App) -> None:
    @app.task("tenant_waiter")
    def tenant_waiter(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.wait_for_event("k")

    task = app.enqueue("tenant_waiter", tenant="acme")
    burst(app)
    assert app.send_event("k", "other tenant") == 0
    assert app.send_event("k", "theirs", tenant="other") == 0
    assert app.get(task.id).state == "waiting"
    assert app.send_event("k", "ours", tenant="acme") == 1
    assert _resume(app, task.id).result == "ours"


def test_a_wait_past_its_deadline_is_timed_out_by_the_sweeper(app: jobtrail.App) -> None:
    @app.task("impatient")
    def impatient(ctx: jobtrail.Context, p: Any) -> str:
        try:
            ctx.wait_for_event("never", timeout=0.2)
        except WaitTimedOut:
            return "gave up"
        return "got it"

    task = app.enqueue("impatient")
    burst(app)
    assert app.get(task.id).state == "waiting"
    wait_for(lambda: app.sweep().get("wait_timed_out"), "the wait's deadline")
    assert app.get(task.id).last_reason == "wait_timed_out"
    # an event sent after the timeout does not change what the resumed wait says
    assert app.send_event("never", "too late") == 0
    assert _resume(app, task.id).result == "gave up"
    assert "wait_timed_out" in reasons(app, task.id)
    timed_out = next(t for t in app.transitions(task.id) if t.reason == "wait_timed_out")
    assert timed_out.actor == "sweeper"


def test_an_uncaught_wait_timed_out_fails_the_task_at_once(app: jobtrail.App) -> None:
    # a retry would run into the same recorded timeout: dead at once, not retried
    @app.task("uncaught_wait", max_attempts=5)
    def uncaught_wait(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.wait_for_event("never-sent", timeout=0.2)

    task = app.enqueue("uncaught_wait")
    burst(app)
    assert app.get(task.id).state == "waiting"
    wait_for(lambda: app.sweep().get("wait_timed_out"), "the wait's deadline")
    dead = _resume(app, task.id, "dead")
    assert dead.last_reason == "permanent_error" and dead.attempts == 1
    assert dead.last_error_category == "timeout"
    assert "WaitTimedOut" in (dead.last_error or "")
    assert "retry_scheduled" not in reasons(app, task.id)


def test_asend_event_wakes_as_send_event_does(app: jobtrail.App) -> None:
    @app.task("async_sent")
    def async_sent(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.wait_for_event("a-key")

    task = app.enqueue("async_sent")
    burst(app)

    async def send() -> tuple[int, int]:
        return await app.asend_event("a-key", 5), await app.asend_event("a-key", 6)

    assert asyncio.run(send()) == (1, 0)
    assert _resume(app, task.id).result == 5


# -- children ------------------------------------------------------------------------------------


def test_spawned_children_are_joined_and_their_last_one_wakes_the_parent(
    app: jobtrail.App,
) -> None:
    sent: list[str] = []

    @app.task("send_mail")
    def send_mail(ctx: jobtrail.Context, p: Any) -> str:
        sent.append(p["tpl"])
        return "sent " + p["tpl"]

    @app.task("mailer")
    def mailer(ctx: jobtrail.Context, p: Any) -> Any:
        kids = [ctx.spawn("mail_" + m, "send_mail", {"tpl": m}) for m in ("a", "b", "c")]
        return ctx.join(kids, timeout=600)

    task = app.enqueue("mailer")
    done = _resume(app, task.id)
    assert done.result == ["sent a", "sent b", "sent c"]
    assert sorted(sent) == ["a", "b", "c"]  # one child each, although the parent ran twice
    children = app.children(task.id)
    assert len(children) == 3 and all(c.parent_id == task.id for c in children)
    rs = reasons(app, task.id)
    assert "waiting_for_children" in rs and rs[-3:] == ["children_finished", "claimed", "completed"]
    finished = next(t for t in app.transitions(task.id) if t.reason == "children_finished")
    assert finished.actor == "system"


def test_a_failed_child_raises_child_failed_and_the_parent_decides(app: jobtrail.App) -> None:
    @app.task("fragile")
    def fragile(ctx: jobtrail.Context, p: Any) -> None:
        raise PermanentError("bad address", category="invalid_input")

    @app.task("careful")
    def careful(ctx: jobtrail.Context, p: Any) -> Any:
        kid = ctx.spawn("only", "fragile")
        try:
            ctx.join([kid])
        except ChildFailed as exc:
            return {"child": exc.task_id, "state": exc.state, "reason": exc.reason}
        return "all fine"

    task = app.enqueue("careful")
    done = _resume(app, task.id)
    child = app.children(task.id)[0]
    assert done.result == {"child": child.id, "state": "dead", "reason": "permanent_error"}
    assert "child_dead" not in reasons(app, task.id)  # never the workflow rule


def test_an_uncaught_child_failed_fails_the_parent_at_once(app: jobtrail.App) -> None:
    @app.task("doomed", max_attempts=1)
    def doomed(ctx: jobtrail.Context, p: Any) -> None:
        raise PermanentError("bad address", category="invalid_input")

    @app.task("trusting", max_attempts=5)
    def trusting(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.join([ctx.spawn("kid", "doomed")])

    task = app.enqueue("trusting")
    dead = _resume(app, task.id, "dead")
    assert dead.last_reason == "permanent_error" and dead.attempts == 1
    assert "ChildFailed" in (dead.last_error or "")
    assert "retry_scheduled" not in reasons(app, task.id)


def test_a_replayed_parent_runs_its_handler_again_with_its_dead_children_replayed(
    app: jobtrail.App,
) -> None:
    broken = {"on": True}

    @app.task("sometimes", max_attempts=1)
    def sometimes(ctx: jobtrail.Context, p: Any) -> str:
        if broken["on"]:
            raise PermanentError("down", category="invalid_input")
        return "fine"

    @app.task("strict_parent", max_attempts=1)
    def strict_parent(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.join([ctx.spawn("kid", "sometimes")])

    task = app.enqueue("strict_parent")
    dead = _resume(app, task.id, "dead")
    assert "ChildFailed" in (dead.last_error or "")
    broken["on"] = False
    again = app.replay(task.id, by="ops", note="fixed the child")
    assert again.state == "queued"  # its handler decides again, not the workflow rule
    assert app.children(task.id)[0].state == "queued"
    assert _resume(app, task.id).result == ["fine"]
    assert len(app.children(task.id)) == 1


def test_a_child_ending_while_its_parent_waits_for_an_event_does_not_settle_it(
    app: jobtrail.App,
) -> None:
    @app.task("quick")
    def quick(ctx: jobtrail.Context, p: Any) -> int:
        return 1

    @app.task("waits_for_other")
    def waits_for_other(ctx: jobtrail.Context, p: Any) -> Any:
        ctx.spawn("kid", "quick")
        return ctx.wait_for_event("other")

    task = app.enqueue("waits_for_other")
    burst(app)
    assert app.children(task.id)[0].state == "succeeded"
    assert app.get(task.id).state == "waiting"
    assert app.get(task.id).last_reason == "waiting_for_event"
    app.send_event("other", "ok")
    assert _resume(app, task.id).result == "ok"


def test_a_join_past_its_timeout_raises_wait_timed_out(app: jobtrail.App) -> None:
    @app.task("slow_kid")
    def slow_kid(ctx: jobtrail.Context, p: Any) -> int:
        return 1

    @app.task("joiner")
    def joiner(ctx: jobtrail.Context, p: Any) -> str:
        kid = ctx.spawn("kid", "slow_kid", delay=3600)
        try:
            ctx.join([kid], timeout=0.2)
        except WaitTimedOut:
            return "timed out"
        return "joined"

    task = app.enqueue("joiner")
    burst(app)
    assert app.get(task.id).last_reason == "waiting_for_children"
    wait_for(lambda: app.sweep().get("wait_timed_out"), "the join's deadline")
    assert _resume(app, task.id).result == "timed out"
    app.cancel(app.children(task.id)[0].id, by="test")


# -- recorded values and the determinism guard ---------------------------------------------------


def test_now_and_uuid_are_the_same_on_every_resume(app: jobtrail.App) -> None:
    seen: list[tuple[datetime, uuid.UUID]] = []

    @app.task("stamped")
    def stamped(ctx: jobtrail.Context, p: Any) -> None:
        seen.append((ctx.now(), ctx.uuid()))
        ctx.sleep("nap", 0.1)

    task = app.enqueue("stamped")
    _resume(app, task.id)
    assert len(seen) == 2 and seen[0] == seen[1]
    assert isinstance(seen[0][1], uuid.UUID)


def test_a_resume_in_another_order_fails_permanently_naming_the_divergence(
    app: jobtrail.App,
) -> None:
    order = ["a", "b"]

    @app.task("fickle")
    def fickle(ctx: jobtrail.Context, p: Any) -> None:
        for name in order:
            ctx.step(name, lambda: 1)
        ctx.sleep("nap", 1.0)  # longer than a loaded burst: the code changes while it sleeps

    task = app.enqueue("fickle")
    burst(app)
    order.reverse()  # a deploy changed the code while the task slept
    dead = _resume(app, task.id, "dead")
    assert dead.last_reason == "permanent_error"
    assert dead.last_error_category == "invalid_input"
    assert dead.last_error is not None and "expected step 'a', got 'b'" in dead.last_error


def test_patched_takes_the_new_path_only_for_tasks_that_had_not_passed_it(
    app: jobtrail.App,
) -> None:
    patched_code = {"on": False}
    taken: dict[str, bool] = {}

    @app.task("evolving")
    def evolving(ctx: jobtrail.Context, p: Any) -> None:
        ctx.step("first", lambda: 1)
        if patched_code["on"]:
            taken[p["n"]] = ctx.patched("new_fee")
        ctx.step("second", lambda: 2)
        ctx.sleep("nap", 1.0)

    old = app.enqueue("evolving", {"n": "old"})
    burst(app)  # the old code ran to the sleep
    patched_code["on"] = True
    new = app.enqueue("evolving", {"n": "new"})
    _resume(app, old.id)
    _resume(app, new.id)
    assert taken == {"old": False, "new": True}


# -- cancel --------------------------------------------------------------------------------------


def test_a_sleeping_task_is_cancelled_at_once(app: jobtrail.App) -> None:
    @app.task("dozer")
    def dozer(ctx: jobtrail.Context, p: Any) -> None:
        ctx.sleep("long", 3600)

    task = app.enqueue("dozer")
    burst(app)
    result = app.cancel(task.id, by="ops", note="not needed")
    assert (result.outcome, result.state, result.reason) == (
        "cancelled",
        "cancelled",
        "cancelled_while_suspended",
    )
    last = app.transitions(task.id)[-1]
    assert (last.from_state, last.to_state, last.actor) == ("queued", "cancelled", "ops")


def test_a_waiting_task_is_cancelled_at_once_with_its_unfinished_children(
    app: jobtrail.App,
) -> None:
    @app.task("later_kid")
    def later_kid(ctx: jobtrail.Context, p: Any) -> int:
        return 1

    @app.task("parent_waits")
    def parent_waits(ctx: jobtrail.Context, p: Any) -> Any:
        kids = [ctx.spawn(name, "later_kid", delay=3600) for name in ("k1", "k2")]
        return ctx.join(kids)

    task = app.enqueue("parent_waits")
    burst(app)
    assert app.get(task.id).last_reason == "waiting_for_children"
    result = app.cancel(task.id, by="ops")
    assert result.reason == "cancelled_while_suspended" and result.state == "cancelled"
    last = app.transitions(task.id)[-1]
    assert (last.from_state, last.to_state) == ("waiting", "cancelled")
    kids = app.children(task.id)
    assert [(k.state, k.last_reason) for k in kids] == [("cancelled", "cancelled_before_start")] * 2


def test_a_cancel_requested_during_the_run_is_confirmed_at_the_suspension(
    app: jobtrail.App,
) -> None:
    @app.task("asks_cancel")
    def asks_cancel(ctx: jobtrail.Context, p: Any) -> None:
        if p["effect"]:
            ctx.effect("charge", lambda key: "charged")
        app.cancel(ctx.task_id, by="caller")  # as if a caller did while it ran
        ctx.sleep("nap", 3600)

    plain = app.enqueue("asks_cancel", {"effect": False})
    charged = app.enqueue("asks_cancel", {"effect": True})
    burst(app)
    assert app.get(plain.id).state == "cancelled"
    assert app.get(plain.id).last_reason == "cancel_confirmed"
    after = app.get(charged.id)
    assert (after.state, after.last_reason) == ("cancelled", "cancelled_after_effects")
    last = app.transitions(charged.id)[-1]
    assert (last.from_state, last.to_state) == ("cancel_requested", "cancelled")


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "payload", "error"),
    [
        ("", None, "the event key is empty"),
        ("k" * 256, None, "longer than 255"),
        (7, None, "must be text"),
        ("ok", {"x": math.nan}, "not JSON"),
        ("ok", {"x": object()}, "not JSON"),
    ],
)
def test_send_event_refuses_bad_input_and_writes_nothing(
    app: jobtrail.App, key: Any, payload: Any, error: str
) -> None:
    @app.task("bad_input_waiter")
    def waiter(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.wait_for_event("ok")

    task = app.enqueue("bad_input_waiter")
    burst(app)
    with pytest.raises(ValueError, match=error):
        app.send_event(key, payload)
    assert app.get(task.id).state == "waiting"
    assert app.send_event("ok", 1) == 1  # the event was not stored by the refused call


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda ctx: ctx.sleep("", 1), "sleep name must be non-empty"),
        (lambda ctx: ctx.sleep("s", -1), "at least 0"),
        (lambda ctx: ctx.sleep("s", math.nan), "at least 0"),
        (lambda ctx: ctx.sleep("s", "soon"), "must be a number"),
        (lambda ctx: ctx.sleep("s", 1e12), "100 years"),
        (lambda ctx: (ctx.step("x", lambda: 1), ctx.sleep("x", 1)), "used twice"),
        (lambda ctx: ctx.wait_for_event(""), "the event key is empty"),
        (lambda ctx: ctx.wait_for_event("k" * 256), "longer than 255"),
        (lambda ctx: ctx.wait_for_event("k", timeout=1e12), "100 years"),
        (lambda ctx: ctx.wait_for_event("k", timeout=-1), "above 0"),
        (lambda ctx: ctx.spawn("kid", "no_such_kind"), "no_such_kind"),
        (lambda ctx: ctx.spawn("kid", "bad_input_child", {"x": math.inf}), "spawn"),
        (lambda ctx: ctx.join([ctx.task_id]), "is not a child of task"),
        (lambda ctx: ctx.join(["999999"]), "is not a child of task"),
        (lambda ctx: ctx.sleep_until("s", "tomorrow"), "ISO 8601"),
        (lambda ctx: (ctx.sleep("z", 0), ctx.sleep("z", 0)), "used twice"),
    ],
)
def test_bad_durable_calls_fail_the_attempt_permanently_and_write_nothing(
    app: jobtrail.App, call: Any, error: str
) -> None:
    @app.task("bad_input_child")
    def child(ctx: jobtrail.Context, p: Any) -> None:
        return None

    @app.task("bad_caller", max_attempts=5)
    def bad_caller(ctx: jobtrail.Context, p: Any) -> None:
        call(ctx)

    task = app.enqueue("bad_caller")
    dead = drain(app, task.id)
    assert (dead.state, dead.last_reason) == ("dead", "permanent_error")
    assert dead.last_error_category == "invalid_input"
    assert dead.last_error is not None and error in dead.last_error, dead.last_error
    assert dead.attempts == 1
    assert app.children(task.id) == []
    # nothing durable was written: no sleep or wait record (a step before the bad call may be)
    assert set(dead.steps) <= {"x", "z"}


def test_a_duration_may_be_a_timedelta(app: jobtrail.App) -> None:
    @app.task("td")
    def td(ctx: jobtrail.Context, p: Any) -> str:
        ctx.sleep("nap", timedelta(milliseconds=100))
        return "ok"

    task = app.enqueue("td")
    assert _resume(app, task.id).result == "ok"


def test_an_idle_worker_resumes_a_woken_task_without_waiting_for_its_poll(
    app: jobtrail.App,
) -> None:
    """send_event wakes the queue's idle workers (NOTIFY on PostgreSQL, the in-process hint on
    SQLite) and a sleep's wake time is a due time the worker waits for: a poll interval of a
    minute delays neither."""

    @app.task("woken")
    def woken(ctx: jobtrail.Context, p: Any) -> Any:
        ctx.sleep("nap", 0.5)
        return ctx.wait_for_event("wake-" + ctx.task_id)

    task = app.enqueue("woken")
    worker = app.start_worker(concurrency=1, poll_interval=60)
    try:
        wait_for(lambda: app.get(task.id).state == "waiting", "the handler to wait", timeout=8)
        started = time.monotonic()
        assert app.send_event("wake-" + task.id, "up") == 1
        wait_for(lambda: app.get(task.id).state == "succeeded", "the resumed run", timeout=8)
        assert time.monotonic() - started < 5
    finally:
        worker.stop(grace=5)
    assert app.get(task.id).result == "up"


def test_a_woken_task_not_yet_resumed_is_cancelled_as_suspended(app: jobtrail.App) -> None:
    @app.task("woken_not_run")
    def woken_not_run(ctx: jobtrail.Context, p: Any) -> Any:
        return ctx.wait_for_event("wk")

    task = app.enqueue("woken_not_run")
    burst(app)
    app.send_event("wk")
    assert app.get(task.id).last_reason == "event_received"
    assert app.cancel(task.id, by="ops").reason == "cancelled_while_suspended"


def test_a_removed_sleep_is_named_as_the_divergence(app: jobtrail.App) -> None:
    with_sleep = {"on": True}

    @app.task("shrinking")
    def shrinking(ctx: jobtrail.Context, p: Any) -> None:
        ctx.step("a", lambda: 1)
        if with_sleep["on"]:
            ctx.sleep("nap", 0.5)
        ctx.step("b", lambda: 2)
        ctx.wait_for_event("never")

    task = app.enqueue("shrinking")
    burst(app)  # asleep
    _resume(app, task.id, "waiting")  # ran step b, waits for the event
    with_sleep["on"] = False
    app.send_event("never")
    dead = _resume(app, task.id, "dead")
    assert dead.last_error is not None
    assert "expected sleep 'nap', got step 'b'" in dead.last_error


async def _async_parent(ctx: jobtrail.Context, p: Any) -> Any:
    kids = [await ctx.aspawn(f"k{i}", "async_kid", i) for i in range(3)]
    return await ctx.ajoin(kids)


def test_async_handlers_spawn_and_join(app: jobtrail.App) -> None:
    app.task("async_kid")(lambda ctx, p: p * 10)
    app.task("async_parent")(_async_parent)
    task = app.enqueue("async_parent")
    assert _resume(app, task.id).result == [0, 10, 20]
