"""Narratives rendered from a task snapshot and its transition log."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobtrail.core.explain import LANGUAGES, SENTENCES, render, sentence, why_not_running
from jobtrail.model.machine import Reason, State
from jobtrail.model.models import Task, Transition

T0 = datetime(2026, 11, 29, 10, 0, 0, 120000, tzinfo=UTC)
# A database "now" far from the machine clock: results must follow it, not time.time().
NOW_2030 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)
CJK = re.compile(r"[\u4e00-\u9fff]")


def make_task(**changes: Any) -> Task:
    base = Task(
        id="tsk_1",
        kind="publish_note",
        queue="default",
        tenant="acme",
        state=State.QUEUED,
        payload={"note": 1},
        priority=0,
        attempts=0,
        max_attempts=5,
        run_at=T0,
        lease_owner=None,
        lease_expires_at=None,
        last_reason="enqueued",
        last_error_category=None,
        last_error=None,
        replay_count=0,
        receipt_id=None,
        parent_id=None,
        created_at=T0,
        updated_at=T0,
    )
    return dataclasses.replace(base, **changes)


def tr(
    seq: int,
    src: State | None,
    dst: State,
    reason: str,
    actor: str,
    attempt: int = 0,
    seconds: float = 0.0,
    **more: Any,
) -> Transition:
    return Transition(
        seq=seq,
        from_state=src,
        to_state=dst,
        reason=reason,
        error_category=more.pop("error_category", None),
        error=more.pop("error", None),
        actor=actor,
        attempt=attempt,
        at=T0 + timedelta(seconds=seconds),
        **more,
    )


SPEC_LOG = [
    tr(1, None, State.QUEUED, "enqueued", "api"),
    tr(2, State.QUEUED, State.LEASED, "claimed", "web-1:412:7f3a", 1, 0.882),
    tr(
        3,
        State.LEASED,
        State.QUEUED,
        "retry_scheduled",
        "web-1:412:7f3a",
        1,
        31.28,
        error_category="timeout",
        error="upstream timed out",
        data={"retry_at": "2026-11-29T10:00:39.900Z"},
    ),
    tr(
        4,
        State.QUEUED,
        State.CANCELLED,
        "cancelled_before_start",
        "alice",
        1,
        34.88,
        note="wrong note",
    ),
]


# --- sentences -------------------------------------------------------------------------------


@pytest.mark.parametrize("reason", list(Reason))
def test_every_reason_has_an_english_and_a_chinese_sentence(reason: Reason) -> None:
    en = sentence(reason, "en")
    zh = sentence(reason, "zh")
    assert en and en != reason.value
    assert zh and zh != reason.value and CJK.search(zh)
    assert SENTENCES["en"][reason.value] == en
    assert SENTENCES["zh"][reason.value] == zh


def test_sentences_cover_exactly_the_reason_codes() -> None:
    codes = {r.value for r in Reason}
    assert set(SENTENCES) == {"en", "zh"}
    for lang in ("en", "zh"):
        assert set(SENTENCES[lang]) == codes


def test_wording_from_the_seed() -> None:
    assert sentence("cancel_too_late") == "the cancel came after the submission"
    assert "取消没有赶上提交" in sentence("cancel_too_late", "zh")
    assert "租约到期" in sentence("lease_expired", "zh")
    assert sentence("cancelled_before_start", "zh") == "在执行前取消"
    assert "租约到期但副作用不确定" in sentence("lease_expired_effect_uncertain", "zh")
    assert sentence("attempts_exhausted", "zh") == "尝试用尽"


def test_unknown_code_is_returned_as_it_is() -> None:
    assert sentence("some_future_code") == "some_future_code"
    assert sentence("some_future_code", "zh") == "some_future_code"


def test_unknown_language_names_the_supported_ones() -> None:
    with pytest.raises(ValueError, match=r"'en'.*'zh'"):
        sentence("enqueued", "fr")
    with pytest.raises(ValueError, match="fr"):
        render(make_task(), [], T0, lang="fr")
    with pytest.raises(ValueError, match="fr"):
        why_not_running(make_task(), T0, lang="fr")


# --- why_not_running ---------------------------------------------------------------------------


def test_queued_not_due_uses_the_given_now() -> None:
    task = make_task(run_at=NOW_2030 + timedelta(seconds=12.3))
    line = why_not_running(task, NOW_2030)
    assert line == "not due until 2030-01-01T00:00:12.300Z (in 12.3s)"
    zh = why_not_running(task, NOW_2030, "zh")
    assert zh is not None and "2030-01-01T00:00:12.300Z" in zh and "12.3 秒" in zh


def test_queued_due_relative_to_the_given_now_is_none() -> None:
    # Due in 2030 at the database's clock: the machine clock (earlier) must not make it "not due".
    task = make_task(run_at=NOW_2030 - timedelta(seconds=5))
    assert why_not_running(task, NOW_2030) is None
    # And the same row is not due when the database says it is still 2029.
    assert why_not_running(task, NOW_2030 - timedelta(days=1)) is not None


def test_queued_far_future_formats_a_long_duration() -> None:
    task = make_task(run_at=NOW_2030 + timedelta(days=2, hours=3))
    assert why_not_running(task, NOW_2030) == "not due until 2030-01-03T03:00:00.000Z (in 2d 3h)"


def test_queued_due_with_extra_lines_returns_them() -> None:
    task = make_task(run_at=None)
    extra = [
        'queue paused by alice at 2030-01-01T00:00:00.000Z ("maintenance")',
        "queue concurrency limit reached (4 of 4 leased)",
    ]
    assert why_not_running(task, NOW_2030, extra=extra) == "; ".join(extra)
    assert why_not_running(task, NOW_2030, extra=[]) is None


def test_not_due_and_extra_are_combined() -> None:
    task = make_task(run_at=NOW_2030 + timedelta(seconds=1))
    line = why_not_running(task, NOW_2030, extra=["queue paused by bob"])
    assert line is not None
    assert line.startswith("not due until") and line.endswith("; queue paused by bob")


def test_leased() -> None:
    task = make_task(
        state=State.LEASED,
        attempts=2,
        lease_owner="web-1:412:7f3a",
        lease_expires_at=NOW_2030 + timedelta(seconds=20),
        last_reason="claimed",
    )
    line = why_not_running(task, NOW_2030)
    assert line == (
        "held by worker web-1:412:7f3a, attempt 2, lease expires at "
        "2030-01-01T00:00:20.000Z (in 20.0s)"
    )
    zh = why_not_running(task, NOW_2030, "zh")
    assert zh is not None and "web-1:412:7f3a" in zh and "第 2 次尝试" in zh


def test_leased_with_an_expired_lease_says_so() -> None:
    task = make_task(
        state=State.LEASED,
        attempts=1,
        lease_owner="w",
        lease_expires_at=NOW_2030 - timedelta(seconds=3),
    )
    line = why_not_running(task, NOW_2030)
    assert line is not None
    assert "lease expired at 2029-12-31T23:59:57.000Z (3.0s ago)" in line


def test_cancel_requested() -> None:
    task = make_task(
        state=State.CANCEL_REQUESTED,
        attempts=1,
        lease_owner="w-9",
        lease_expires_at=NOW_2030 + timedelta(seconds=10),
    )
    assert why_not_running(task, NOW_2030) == (
        "cancel requested; waiting for worker w-9 to confirm at a boundary "
        "(lease expires at 2030-01-01T00:00:10.000Z)"
    )
    zh = why_not_running(task, NOW_2030, "zh")
    assert zh is not None and "w-9" in zh and "取消" in zh


def test_awaiting_receipt() -> None:
    task = make_task(
        state=State.AWAITING_RECEIPT,
        receipt_id="rcpt-42",
        updated_at=NOW_2030 - timedelta(minutes=5),
        receipt_deadline=NOW_2030 + timedelta(hours=1),
    )
    assert why_not_running(task, NOW_2030) == (
        "waiting for receipt rcpt-42 since 2029-12-31T23:55:00.000Z "
        "(deadline 2030-01-01T01:00:00.000Z)"
    )
    zh = why_not_running(task, NOW_2030, "zh")
    assert zh is not None and "rcpt-42" in zh and "回执" in zh
    no_deadline = dataclasses.replace(task, receipt_deadline=None)
    assert "deadline" not in (why_not_running(no_deadline, NOW_2030) or "")


def test_waiting_parent() -> None:
    task = make_task(state=State.WAITING)
    assert why_not_running(task, NOW_2030) == "waiting for its children"
    assert why_not_running(task, NOW_2030, extra=["publish queued, render succeeded"]) == (
        "waiting for its children; publish queued, render succeeded"
    )
    assert why_not_running(task, NOW_2030, "zh") == "等待子任务完成"


def test_dead_needs_a_person() -> None:
    task = make_task(
        state=State.DEAD, last_reason="attempts_exhausted", last_error_category="timeout"
    )
    assert why_not_running(task, NOW_2030) == (
        "dead — needs a person (attempts_exhausted, timeout)"
    )
    zh = why_not_running(task, NOW_2030, "zh")
    assert zh is not None and "attempts_exhausted" in zh and CJK.search(zh)


def test_dead_and_dismissed() -> None:
    task = make_task(state=State.DEAD, last_reason="dismissed", dismissed=True)
    assert why_not_running(task, NOW_2030) == "dead and dismissed: no action needed"
    assert "搁置" in (why_not_running(task, NOW_2030, "zh") or "")


@pytest.mark.parametrize("state", [State.SUCCEEDED, State.CANCELLED])
def test_finished_tasks_have_no_reason_not_to_run(state: State) -> None:
    task = make_task(state=state, run_at=NOW_2030 + timedelta(days=1))
    assert why_not_running(task, NOW_2030) is None
    assert why_not_running(task, NOW_2030, "zh", extra=["anything"]) is None


# --- render ------------------------------------------------------------------------------------


def test_render_lines_follow_the_spec_layout() -> None:
    task = make_task(state=State.CANCELLED, attempts=1, last_reason="cancelled_before_start")
    text = render(task, SPEC_LOG, NOW_2030)
    lines = text.splitlines()
    body = lines[-len(SPEC_LOG) :]
    assert body[0].startswith(
        "2026-11-29T10:00:00.120Z  enqueued                      queued      by api"
    )
    assert body[1].startswith(
        "2026-11-29T10:00:01.002Z  claimed                       leased      "
        "by web-1:412:7f3a, attempt 1"
    )
    assert body[2].startswith(
        "2026-11-29T10:00:31.400Z  retry_scheduled               queued      "
        "by web-1:412:7f3a, attempt 1 failed: timeout (upstream timed out); "
        "retry at 10:00:39.900Z"
    )
    assert body[3].startswith(
        '2026-11-29T10:00:35.000Z  cancelled_before_start        cancelled   by alice: "wrong note"'
    )
    assert body[3].endswith("cancelled before it started")


def test_render_orders_by_seq_and_shows_every_code() -> None:
    log = [
        *SPEC_LOG[:2],
        tr(3, State.LEASED, State.CANCEL_REQUESTED, "cancel_requested", "alice", 1, 2),
        tr(4, State.CANCEL_REQUESTED, State.AWAITING_RECEIPT, "cancel_too_late", "w", 1, 3),
        tr(
            5,
            State.AWAITING_RECEIPT,
            State.AWAITING_RECEIPT,
            "cancel_refused_submitted",
            "bob",
            1,
            4,
        ),
        tr(6, State.AWAITING_RECEIPT, State.DEAD, "receipt_timeout", "sweeper", 1, 5),
        tr(
            7,
            State.DEAD,
            State.DEAD,
            "correction",
            "carol",
            0,
            6,
            note="wrong category",
            corrects=6,
        ),
        tr(8, State.DEAD, State.QUEUED, "replayed", "dave", 0, 7, note="provider fixed"),
        tr(9, State.QUEUED, State.LEASED, "claimed", "w", 1, 8),
        tr(10, State.LEASED, State.DEAD, "lease_expired_effect_uncertain", "sweeper", 1, 9),
    ]
    task = make_task(
        state=State.DEAD, attempts=1, last_reason="lease_expired_effect_uncertain", replay_count=1
    )
    text = render(task, list(reversed(log)), T0 + timedelta(seconds=10))
    history = text.splitlines()[-len(log) :]
    assert [line.split()[1] for line in history] == [t.reason for t in log]
    for line, t in zip(history, log, strict=True):
        assert f"  {t.reason} " in line
        assert sentence(t.reason) in line
    # Long codes and states never run into the next column, and the columns stay aligned.
    assert "lease_expired_effect_uncertain dead" in text
    assert re.search(r"awaiting_receipt +by w", text)
    assert len({line.index(" by ") for line in history}) == 1
    assert "corrects #6" in text
    assert 'by carol: "wrong category"' in text


def test_render_header() -> None:
    task = make_task(
        state=State.QUEUED,
        attempts=1,
        last_reason="retry_scheduled",
        last_error_category="timeout",
        run_at=T0 + timedelta(seconds=39.78),
        replay_count=2,
    )
    text = render(task, SPEC_LOG[:3], T0 + timedelta(seconds=31.5))
    for needle in (
        "tsk_1",
        "publish_note",
        "default",
        "acme",
        "queued",
        "retry_scheduled",
        sentence("retry_scheduled"),
        "1/5",
        "replays:    2",
        "next run:   2026-11-29T10:00:39.900Z (in 8.3s)",
        "not due until 2026-11-29T10:00:39.900Z (in 8.3s)",
    ):
        assert needle in text


def test_render_claimed_version_and_snooze_time() -> None:
    log = [
        tr(1, None, State.QUEUED, "enqueued", "api"),
        tr(2, State.QUEUED, State.LEASED, "claimed", "w", 1, 1, data={"version": "2.4.1"}),
        tr(
            3,
            State.LEASED,
            State.QUEUED,
            "snoozed",
            "w",
            1,
            2,
            data={"retry_at": "2026-11-30T08:00:00.000Z"},
        ),
    ]
    text = render(make_task(), log, T0)
    assert "(version 2.4.1)" in text
    assert "runs again at 2026-11-30T08:00:00.000Z" in text  # another day: the full time


def test_render_manual_fix_shows_effects_checked() -> None:
    log = [
        tr(
            1,
            State.LEASED,
            State.DEAD,
            "manual_fix",
            "ops",
            1,
            note="stuck",
            data={"effects_checked": True},
        )
    ]
    text = render(make_task(state=State.DEAD, last_reason="manual_fix"), log, T0)
    assert 'by ops: "stuck", attempt 1; external effects checked' in text


def test_render_in_chinese() -> None:
    task = make_task(
        state=State.CANCELLED, attempts=1, tenant="", last_reason="cancelled_before_start"
    )
    text = render(task, SPEC_LOG, NOW_2030, lang="zh")
    for needle in (
        "任务：tsk_1",
        "类型：publish_note",
        "队列：default",
        "租户：（无）",
        "状态：cancelled",
        "在执行前取消",
        "由 alice：“wrong note”",
        "重试时间 10:00:39.900Z",
        "迁移记录：",
    ):
        assert needle in text
    for t in SPEC_LOG:
        assert sentence(t.reason, "zh") in text


def test_render_dead_header_says_it_needs_a_person() -> None:
    task = make_task(
        state=State.DEAD,
        attempts=5,
        last_reason="attempts_exhausted",
        last_error_category="timeout",
    )
    text = render(task, SPEC_LOG[:1], NOW_2030)
    assert "dead — needs a person (attempts_exhausted, timeout)" in text
    assert "5/5" in text


def test_languages_constant() -> None:
    assert LANGUAGES == ("en", "zh")
    assert set(SENTENCES) == set(LANGUAGES)


def test_tracebacks_prints_each_failure_indented_under_its_transition() -> None:
    from jobtrail.core.explain import tracebacks

    tb = "Traceback (most recent call last):\n  File \"/app/t.py\", line 3, in h\nKeyError: 'x'\n"
    log = [
        *SPEC_LOG[:2],
        tr(3, State.LEASED, State.QUEUED, "retry_scheduled", "w", 1, 1.0,
           error_category="unclassified", error="KeyError: 'x'", traceback=tb,
           error_class="builtins.KeyError"),
        tr(4, State.QUEUED, State.LEASED, "claimed", "w", 2, 2.0),
        tr(5, State.LEASED, State.DEAD, "attempts_exhausted", "w", 2, 3.0,
           error_category="unclassified", error="KeyError: 'y'",
           traceback=tb.replace("'x'", "'y'"), error_class="builtins.KeyError"),
    ]  # fmt: skip
    text = tracebacks(list(reversed(log)))
    assert text.splitlines() == [
        "tracebacks:",
        "#3 2026-11-29T10:00:01.120Z  retry_scheduled, attempt 1: builtins.KeyError",
        "    Traceback (most recent call last):",
        '      File "/app/t.py", line 3, in h',
        "    KeyError: 'x'",
        "#5 2026-11-29T10:00:03.120Z  attempts_exhausted, attempt 2: builtins.KeyError",
        "    Traceback (most recent call last):",
        '      File "/app/t.py", line 3, in h',
        "    KeyError: 'y'",
    ]
    assert tracebacks(SPEC_LOG).splitlines() == [
        "tracebacks:",
        "(no failure of this task has a traceback)",
    ]
    assert tracebacks(log, "zh").splitlines()[1].endswith("第 1 次尝试：builtins.KeyError")
    with pytest.raises(ValueError):
        tracebacks(log, "fr")
