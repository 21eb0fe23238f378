"""Suspended durable handlers explained everywhere, on both backends: ``explain`` (en and zh),
the HTTP task's ``waiting_for``, ``stats`` and ``/metrics`` counts — each from real tasks that a
worker suspended."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient

import jobtrail

from ._effects_support import burst
from ._http_support import auth, client
from .support import claim_as_dead_worker, run, wait_for

ADM = auth("adm")
ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def kinds(app: jobtrail.App) -> None:
    @app.task("onboard", queue="flows")
    def onboard(ctx: jobtrail.Context, p: Any) -> Any:
        ctx.step("create_account", lambda: {"id": "a1"})
        if p.get("sleep"):
            ctx.sleep("cool_off", 3600)
        if p.get("event"):
            key = p.get("key", "verified:a1")
            return ctx.wait_for_event(key, timeout=p.get("timeout", 86400))
        if p.get("children"):
            kids = [ctx.spawn("mail_" + m, "send_mail", {"tpl": m}, queue="mail") for m in "abc"]
            return ctx.join(kids, timeout=600)
        return None

    @app.task("send_mail", queue="mail")
    def send_mail(ctx: jobtrail.Context, p: Any) -> str:
        return p["tpl"]

    @app.task("charger", queue="flows")
    def charger(ctx: jobtrail.Context, p: Any) -> None:
        ctx.effect("charge", lambda key: {"id": "ch_1"})
        app.cancel(ctx.task_id, by="caller")  # as if a caller did while it ran
        ctx.sleep("nap", 3600)


def suspend_all(app: jobtrail.App) -> tuple[str, str, str, list[str]]:
    kinds(app)
    sleeper = app.enqueue("onboard", {"sleep": True}).id
    waiter = app.enqueue("onboard", {"event": True}).id
    joiner = app.enqueue("onboard", {"children": True}).id
    run(app, queues=["flows"])
    kids = [c.id for c in app.children(joiner)]
    assert len(kids) == 3
    claim_as_dead_worker(app, "send_mail", queue="mail")  # the first child: leased
    app.cancel(kids[2], by="ann")  # the third: ended
    return sleeper, waiter, joiner, kids


def test_explain_says_what_each_suspended_handler_waits_for(app: jobtrail.App) -> None:
    sleeper, waiter, joiner, kids = suspend_all(app)

    text = app.explain(sleeper)
    assert re.search(rf"not running: sleeping until {ISO} \(sleep 'cool_off'\)", text), text
    assert re.search(rf"sleeping +queued +by .*until {ISO} \(sleep 'cool_off'\)", text), text
    assert '  sleep  cool_off: recorded (attempt 1) → {"until":' in text, text
    assert re.search(rf"休眠至 {ISO}（休眠 'cool_off'）", app.explain(sleeper, lang="zh"))

    text = app.explain(waiter)
    assert re.search(
        rf"not running: waiting for event verified:a1 since {ISO} \(times out at {ISO}\)", text
    ), text
    assert "state:      waiting; last reason waiting_for_event" in text
    assert re.search(rf"起等待事件 verified:a1（于 {ISO} 超时）", app.explain(waiter, lang="zh"))

    text = app.explain(joiner)
    line = f"waiting for 2 of 3 children: #{kids[0]} leased, #{kids[1]} queued"
    assert f"not running: {line} (times out at " in text, text
    assert "waiting for its children" not in text
    assert text.count("  spawn  spawn/mail_") == 3 and "  join   join/" in text
    zh = app.explain(joiner, lang="zh")
    assert f"等待 3 个子任务中的 2 个：#{kids[0]} leased, #{kids[1]} queued" in zh


def test_explain_names_the_wake_up_the_timeout_and_the_cancels(app: jobtrail.App) -> None:
    kinds(app)
    woken = app.enqueue("onboard", {"event": True}).id
    late = app.enqueue("onboard", {"event": True, "key": "never", "timeout": 0.05}).id
    sleeper = app.enqueue("onboard", {"sleep": True}).id
    charged = app.enqueue("charger").id
    run(app, queues=["flows"])
    assert app.get(charged).last_reason == "cancelled_after_effects"
    assert app.send_event("verified:a1", {"at": "noon"}) == 1
    assert app.get(woken).last_reason == "event_received"
    app.cancel(sleeper, by="ann", note="changed our mind")
    burst(app)

    text = app.explain(woken)
    assert re.search(r"event_received +queued +by caller.* event verified:a1 — ", text), text
    wait_for(  # its deadline passes by the database clock; then a sweep times it out
        lambda: app.sweep() is not None and app.get(late).last_reason != "waiting_for_event",
        what="the wait's timeout",
    )
    text = app.explain(late)
    assert re.search(r"wait_timed_out +queued +by sweeper", text), text
    text = app.explain(sleeper)
    assert re.search(r"cancelled_while_suspended +cancelled +by ann", text), text
    assert "cancelled while its handler was suspended" in text
    text = app.explain(charged)
    assert "cancelled_after_effects" in text and "at its sleep" in text
    assert f"effects confirmed before the cancel: charge [key {charged}/charge]" in text
    assert f"取消前已确认的副作用：charge [键 {charged}/charge]" in app.explain(charged, "zh")


def test_the_http_task_has_waiting_for(app: jobtrail.App) -> None:
    sleeper, waiter, joiner, kids = suspend_all(app)
    web: TestClient = client(app)
    got = {i: web.get(f"/api/tasks/{i}", headers=ADM).json() for i in (sleeper, waiter, joiner)}
    assert got[sleeper]["waiting_for"]["kind"] == "sleep"
    assert got[sleeper]["waiting_for"]["name"] == "cool_off"
    assert re.fullmatch(ISO, got[sleeper]["waiting_for"]["until"])
    assert got[waiter]["waiting_for"]["key"] == "verified:a1"
    assert re.fullmatch(ISO, got[waiter]["waiting_for"]["deadline"])
    assert got[joiner]["waiting_for"]["ids"] == kids
    assert web.get(f"/api/tasks/{kids[1]}", headers=ADM).json()["waiting_for"] is None


def test_stats_and_metrics_count_the_suspended_handlers(app: jobtrail.App) -> None:
    suspend_all(app)
    app.enqueue("onboard", {"sleep": True})  # queued, not suspended: not counted
    groups = {(g["queue"], g["kind"]): g for g in app.stats()["queues"]}
    assert groups[("flows", "onboard")]["suspended"] == {
        "sleeping": 1,
        "waiting_for_event": 1,
        "waiting_for_children": 1,
    }
    assert groups[("mail", "send_mail")]["suspended"] == {
        "sleeping": 0,
        "waiting_for_event": 0,
        "waiting_for_children": 0,
    }
    exact = {(g["queue"], g["kind"]): g for g in app.stats(exact=True)["queues"]}
    assert exact[("flows", "onboard")]["suspended"] == groups[("flows", "onboard")]["suspended"]

    web: TestClient = client(app)
    body = web.get("/metrics", headers=ADM).text
    for suspended in ("sleeping", "waiting_for_event", "waiting_for_children"):
        assert (
            f'jobtrail_suspended_tasks{{kind="onboard",queue="flows",suspended="{suspended}"}} 1.0'
            in body
        ), body
    assert (
        'jobtrail_suspended_tasks{kind="send_mail",queue="mail",suspended="sleeping"} 0.0' in body
    )
