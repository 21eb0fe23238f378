"""What explain says of a suspended durable handler (pure: a task snapshot, the database time,
the children's rows), in English and Chinese."""

from __future__ import annotations

from datetime import timedelta

import pytest
from test_explain import CJK, NOW_2030, T0, make_task, tr

from jobtrail.core import explain_durable
from jobtrail.core.explain import render, why_not_running
from jobtrail.model.machine import Reason, State

WAKE = T0 + timedelta(hours=1)
DEADLINE = T0 + timedelta(days=1)


def sleeping() -> object:
    return make_task(
        state=State.QUEUED,
        last_reason="sleeping",
        run_at=WAKE,
        waiting_for={"kind": "sleep", "name": "cool_off", "until": WAKE},
    )


def test_a_sleeping_task_says_until_when_and_which_sleep() -> None:
    task = sleeping()
    assert why_not_running(task, T0) == "sleeping until 2026-11-29T11:00:00.120Z (sleep 'cool_off')"
    zh = why_not_running(task, T0, "zh")
    assert zh == "休眠至 2026-11-29T11:00:00.120Z（休眠 'cool_off'）"
    # a queued task that is not sleeping keeps its own words
    plain = make_task(run_at=WAKE)
    assert why_not_running(plain, T0) is not None
    assert "sleeping" not in (why_not_running(plain, T0) or "")


def test_a_task_waiting_for_an_event_says_the_key_since_and_its_timeout() -> None:
    since = T0 + timedelta(minutes=5)
    task = make_task(
        state=State.WAITING,
        last_reason="waiting_for_event",
        updated_at=since,
        waiting_for={"kind": "event", "key": "verified:42", "deadline": DEADLINE},
    )
    assert why_not_running(task, NOW_2030) == (
        "waiting for event verified:42 since 2026-11-29T10:05:00.120Z "
        "(times out at 2026-11-30T10:00:00.120Z)"
    )
    forever = make_task(
        state=State.WAITING,
        last_reason="waiting_for_event",
        updated_at=since,
        waiting_for={"kind": "event", "key": "k", "deadline": None},
    )
    assert why_not_running(forever, NOW_2030) == (
        "waiting for event k since 2026-11-29T10:05:00.120Z (no timeout)"
    )
    assert why_not_running(forever, NOW_2030, "zh") == (
        "自 2026-11-29T10:05:00.120Z 起等待事件 k（不超时）"
    )


def test_a_join_lists_the_children_that_have_not_ended() -> None:
    task = make_task(
        state=State.WAITING,
        last_reason="waiting_for_children",
        waiting_for={"kind": "children", "ids": ["17", "18", "19"], "deadline": None},
    )
    kids = [
        {"id": 17, "state": "leased"},
        {"id": 18, "state": "queued"},
        {"id": 19, "state": "succeeded"},
        {"id": 20, "state": "queued"},  # spawned, not joined by this join
    ]
    line = explain_durable.children_line(task, kids)
    assert line == "waiting for 2 of 3 children: #17 leased, #18 queued"
    assert explain_durable.children_line(task, kids, "zh") == (
        "等待 3 个子任务中的 2 个：#17 leased, #18 queued"
    )
    # the line arrives as a live fact; the state's own "waiting for its children" is not added
    assert why_not_running(task, NOW_2030, extra=[line]) == line
    timed = make_task(
        state=State.WAITING,
        last_reason="waiting_for_children",
        waiting_for={"kind": "children", "ids": ["17"], "deadline": DEADLINE},
    )
    assert explain_durable.children_line(timed, kids) == (
        "waiting for 1 of 1 children: #17 leased (times out at 2026-11-30T10:00:00.120Z)"
    )
    done = [{"id": 17, "state": "dead"}]
    assert explain_durable.children_line(timed, done) == (
        "all 1 children it joins have ended; it resumes when claimed"
    )
    assert explain_durable.children_line(sleeping(), kids) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_timeline_names_each_suspension_and_wake(lang: str) -> None:
    task = make_task(state=State.CANCELLED, last_reason="cancelled_after_effects")
    log = [
        tr(1, None, State.QUEUED, "enqueued", "caller"),
        tr(2, State.QUEUED, State.LEASED, "claimed", "w", attempt=1, seconds=1),
        tr(3, State.LEASED, State.QUEUED, "sleeping", "w", attempt=1, seconds=2,
           data={"sleep": "cool_off", "until": "2026-11-29T11:00:00.120Z"}),
        tr(4, State.QUEUED, State.LEASED, "claimed", "w", attempt=1, seconds=3),
        tr(5, State.LEASED, State.WAITING, "waiting_for_event", "w", attempt=1, seconds=4,
           data={"key": "verified:42", "deadline": None}),
        tr(6, State.WAITING, State.QUEUED, "event_received", "caller", seconds=5,
           data={"key": "verified:42"}),
        tr(7, State.QUEUED, State.LEASED, "claimed", "w", attempt=1, seconds=6),
        tr(8, State.LEASED, State.WAITING, "waiting_for_children", "w", attempt=1, seconds=7,
           data={"children": ["17", "18"], "deadline": "2026-11-30T10:00:00.120Z"}),
        tr(9, State.WAITING, State.QUEUED, "wait_timed_out", "sweeper", seconds=8,
           data={"children": ["17", "18"]}),
        tr(10, State.QUEUED, State.LEASED, "claimed", "w", attempt=1, seconds=9),
        tr(11, State.LEASED, State.CANCEL_REQUESTED, "cancel_requested", "ann", seconds=10),
        tr(12, State.CANCEL_REQUESTED, State.CANCELLED, "cancelled_after_effects", "w",
           attempt=1, seconds=11, data={"suspended": "sleep"}),
    ]  # fmt: skip
    text = render(task, log, NOW_2030, lang)
    for reason in (
        Reason.SLEEPING,
        Reason.WAITING_FOR_EVENT,
        Reason.EVENT_RECEIVED,
        Reason.WAITING_FOR_CHILDREN,
        Reason.WAIT_TIMED_OUT,
        Reason.CANCELLED_AFTER_EFFECTS,
    ):
        assert reason in text
    if lang == "en":
        assert "until 2026-11-29T11:00:00.120Z (sleep 'cool_off')" in text
        assert "event verified:42 (no timeout)" in text
        assert "children #17, #18 (times out at 2026-11-30T10:00:00.120Z)" in text
        assert "the wait join #17, #18 passed its deadline" in text
        assert "at its sleep" in text
    else:
        assert "至 2026-11-29T11:00:00.120Z（休眠 'cool_off'）" in text
        assert "等待子任务 #17, #18已超过期限" in text
        assert CJK.search(text)


def test_cancelled_after_effects_lists_the_confirmed_effects() -> None:
    steps = [
        {"name": "create", "is_effect": False, "status": "confirmed", "effect_key": None},
        {"name": "charge", "is_effect": True, "status": "confirmed", "effect_key": "7/charge"},
        {"name": "mail", "is_effect": True, "status": "intent", "effect_key": "7/mail"},
    ]
    assert explain_durable.confirmed_effects(steps) == (
        "effects confirmed before the cancel: charge [key 7/charge]"
    )
    assert (
        explain_durable.confirmed_effects(steps, "zh")
        == "取消前已确认的副作用：charge [键 7/charge]"
    )
    assert explain_durable.confirmed_effects(steps[:1]) == (
        "effects confirmed before the cancel: (none)"
    )


def test_every_word_exists_in_both_languages() -> None:
    words = explain_durable._WORDS
    assert set(words["en"]) == set(words["zh"])


def test_the_live_facts_words_exist_in_both_languages() -> None:
    from jobtrail.core import explain_facts

    assert set(explain_facts._WORDS["en"]) == set(explain_facts._WORDS["zh"])
