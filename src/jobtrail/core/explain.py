"""Narratives: a task's story rendered from its snapshot and its transition log.

Pure functions: the caller (``App.explain``, the CLI, the dashboard) reads the task, its
transitions, the database's current time and any live facts about the store (a paused queue, a
concurrency limit, the step a sequential child waits for) and hands them in. Nothing here reads
a clock or a store, so the same inputs always give the same text.

Reason codes are the contract; the sentences below may change freely.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ..model.machine import ErrorCategory, Reason, State
from ..model.models import Task, Transition, iso
from . import explain_durable
from .results import raising_frame

#: The languages every sentence and narrative exists in.
LANGUAGES = ("en", "zh")

#: One short sentence per reason code, per language. Every ``Reason`` has an entry in each.
SENTENCES: dict[str, dict[str, str]] = {
    "en": {
        Reason.ENQUEUED: "accepted into the queue",
        Reason.CLAIMED: "a worker took it and holds a lease",
        Reason.COMPLETED: "finished",
        Reason.RETRY_SCHEDULED: "the attempt failed with a transient error; a retry is scheduled",
        Reason.SNOOZED: "the handler asked to run later; the attempt is not counted",
        Reason.PERMANENT_ERROR: "failed with an error that retrying cannot fix",
        Reason.ATTEMPTS_EXHAUSTED: "all attempts are used up",
        Reason.RETRY_BUDGET_EXHAUSTED: "the time budget for retries ran out",
        Reason.LEASE_EXPIRED: "the worker's lease expired; queued to run again",
        Reason.LEASE_EXPIRED_EFFECT_UNCERTAIN: (
            "the lease expired and the side effect is uncertain; a person must check"
        ),
        Reason.SUBMITTED: "submitted to the outside system; waiting for the receipt",
        Reason.RECEIPT_CONFIRMED: "the receipt confirmed success",
        Reason.RECEIPT_FAILED: "the receipt reported a failure",
        Reason.RECEIPT_TIMEOUT: "no receipt arrived before the deadline",
        Reason.CANCELLED_BEFORE_START: "cancelled before it started",
        Reason.CANCEL_REQUESTED: "a cancel was requested while it was running",
        Reason.CANCEL_CONFIRMED: "the worker confirmed the cancel; no further side effects",
        Reason.CANCEL_TOO_LATE: "the cancel came after the submission",
        Reason.LEASE_EXPIRED_CANCELLED: (
            "the worker's lease expired after the cancel request; cancelled"
        ),
        Reason.FAILED_AFTER_CANCEL: (
            "failed after an effect was committed and a cancel was requested; a person decides"
        ),
        Reason.REPLAYED: "replayed by an operator",
        Reason.CHILDREN_SUCCEEDED: "all children succeeded",
        Reason.CHILDREN_CANCELLED: "all children finished and some were cancelled",
        Reason.CHILD_DEAD: "a child task is dead",
        Reason.MANUAL_FIX: "state set by hand by an operator",
        Reason.CORRECTION: "a correction to an earlier entry",
        Reason.CANCEL_REFUSED_SUBMITTED: (
            "cancel refused: already submitted, waiting for the receipt"
        ),
        Reason.RECEIPT_REQUERIED: "asked the provider again about the receipt",
        Reason.DISMISSED: "closed without a replay: it stays dead and needs no action",
        Reason.DEBOUNCED: "another enqueue with its debounce key replaced the payload and "
        "moved the run time",
        Reason.EXPIRED: "expired while queued: cancelled, never run",
        Reason.WINDOW_SKIPPED_CATCH_UP_BOUND: "cron window skipped: beyond the catch-up bound",
        Reason.WINDOW_SKIPPED_PAUSED: "cron window skipped: its queue was paused",
        Reason.SLEEPING: "the handler sleeps; it resumes at the wake time without holding a worker",
        Reason.WAITING_FOR_EVENT: "the handler waits for an event; no worker is held",
        Reason.WAITING_FOR_CHILDREN: "the handler waits for the children it started",
        Reason.EVENT_RECEIVED: "the event it waited for arrived; queued to resume",
        Reason.CHILDREN_FINISHED: "the children it waited for have ended; queued to resume",
        Reason.WAIT_TIMED_OUT: "the wait passed its deadline; queued to resume with a timeout",
        Reason.CANCELLED_WHILE_SUSPENDED: "cancelled while its handler was suspended",
        Reason.CANCELLED_AFTER_EFFECTS: (
            "cancelled at a suspension after some effects were already confirmed"
        ),
    },
    "zh": {
        Reason.ENQUEUED: "已接受，进入队列",
        Reason.CLAIMED: "被工作器领取，持有租约",
        Reason.COMPLETED: "执行完成",
        Reason.RETRY_SCHEDULED: "本次尝试遇到短暂错误，已计划重试",
        Reason.SNOOZED: "处理函数要求稍后再跑，本次不计入尝试次数",
        Reason.PERMANENT_ERROR: "错误不可重试",
        Reason.ATTEMPTS_EXHAUSTED: "尝试用尽",
        Reason.RETRY_BUDGET_EXHAUSTED: "重试的时间预算用尽",
        Reason.LEASE_EXPIRED: "租约到期，重新排队",
        Reason.LEASE_EXPIRED_EFFECT_UNCERTAIN: "租约到期但副作用不确定，需要人工核对外部系统",
        Reason.SUBMITTED: "已提交到外部平台，等待回执",
        Reason.RECEIPT_CONFIRMED: "回执确认成功",
        Reason.RECEIPT_FAILED: "回执报告失败",
        Reason.RECEIPT_TIMEOUT: "超过期限仍未收到回执",
        Reason.CANCELLED_BEFORE_START: "在执行前取消",
        Reason.CANCEL_REQUESTED: "执行中收到取消请求",
        Reason.CANCEL_CONFIRMED: "工作器已确认取消，不会再产生副作用",
        Reason.CANCEL_TOO_LATE: "取消晚于提交：取消没有赶上提交",
        Reason.LEASE_EXPIRED_CANCELLED: "请求取消后租约到期，已取消",
        Reason.FAILED_AFTER_CANCEL: "副作用已确认后又失败，且调用方要求取消，需要人来决定",
        Reason.REPLAYED: "由人工重放",
        Reason.CHILDREN_SUCCEEDED: "所有子任务均已成功",
        Reason.CHILDREN_CANCELLED: "子任务都已结束，其中有被取消的",
        Reason.CHILD_DEAD: "有子任务进入 dead",
        Reason.MANUAL_FIX: "由人工修正状态",
        Reason.CORRECTION: "对之前一条记录的更正",
        Reason.CANCEL_REFUSED_SUBMITTED: "已提交，拒绝取消，等待回执",
        Reason.RECEIPT_REQUERIED: "向外部平台重新查询回执",
        Reason.DISMISSED: "已搁置：保持 dead，无需处理",
        Reason.DEBOUNCED: "同一防抖键的新入队替换了载荷并推迟了运行时间",
        Reason.EXPIRED: "排队期间已过期：已取消，从未运行",
        Reason.WINDOW_SKIPPED_CATCH_UP_BOUND: "定时窗口被跳过：超出补跑上限",
        Reason.WINDOW_SKIPPED_PAUSED: "定时窗口被跳过：队列已暂停",
        Reason.SLEEPING: "处理函数休眠，到点后恢复，期间不占用工作器",
        Reason.WAITING_FOR_EVENT: "处理函数等待事件，期间不占用工作器",
        Reason.WAITING_FOR_CHILDREN: "处理函数等待它启动的子任务",
        Reason.EVENT_RECEIVED: "等待的事件已到达，重新排队以恢复",
        Reason.CHILDREN_FINISHED: "等待的子任务都已结束，重新排队以恢复",
        Reason.WAIT_TIMED_OUT: "等待超过期限，重新排队并以超时恢复",
        Reason.CANCELLED_WHILE_SUSPENDED: "处理函数挂起期间被取消",
        Reason.CANCELLED_AFTER_EFFECTS: "部分副作用已确认后，在挂起点确认取消",
    },
}

#: Short names of the states for people (the header shows the code and this name).
STATE_NAMES: dict[str, dict[State, str]] = {
    "en": {
        State.QUEUED: "queued",
        State.LEASED: "running under a lease",
        State.AWAITING_RECEIPT: "awaiting a receipt",
        State.CANCEL_REQUESTED: "cancel requested",
        State.WAITING: "waiting",
        State.SUCCEEDED: "succeeded",
        State.CANCELLED: "cancelled",
        State.DEAD: "dead, needs a person",
    },
    "zh": {
        State.QUEUED: "排队中",
        State.LEASED: "执行中（持有租约）",
        State.AWAITING_RECEIPT: "等待回执",
        State.CANCEL_REQUESTED: "已请求取消",
        State.WAITING: "等待中",
        State.SUCCEEDED: "已成功",
        State.CANCELLED: "已取消",
        State.DEAD: "需人工处理",
    },
}

_TEXT: dict[str, dict[str, str]] = {
    "en": {
        "not_due": "not due until {at} ({rel})",
        "in": "in {d}",
        "ago": "{d} ago",
        "leased": "held by worker {owner}, attempt {attempt}, lease expires at {at} ({rel})",
        "leased_expired": (
            "held by worker {owner}, attempt {attempt}, but its lease expired at {at} ({rel}); "
            "the sweeper will decide"
        ),
        "cancel_requested": (
            "cancel requested; waiting for worker {owner} to confirm at a boundary "
            "(lease expires at {at})"
        ),
        "cancel_requested_expired": (
            "cancel requested; worker {owner} did not confirm and its lease expired at {at}; "
            "the sweeper will decide"
        ),
        "receipt": "waiting for receipt {receipt} since {since}",
        "deadline": " (deadline {at})",
        "waiting": "waiting for its children",
        "dead": "dead — needs a person",
        "dismissed": "dead and dismissed: no action needed",
        "join": "; ",
        "none": "(none)",
        # header
        "h_task": "task:       {v}",
        "h_kind": "kind:       {v}",
        "h_queue": "queue:      {v}",
        "h_tenant": "tenant:     {v}",
        "h_state": "state:      {v}",
        "h_attempts": "attempts:   {v}",
        "h_replays": "replays:    {v}",
        "h_next": "next run:   {v}",
        "h_why": "not running: {v}",
        "h_history": "transitions:",
        "due_now": "due now",
        "paren": "{a} ({b})",
        "state_reason": "{code}; last reason {reason}: {sentence}",
        # transition details
        "by": "by {actor}",
        "note": ': "{note}"',
        "attempt": ", attempt {n}",
        "version": " (version {v})",
        "replay_run": " (replay run {n})",
        "failed": " failed: {err}",
        "retry_at": "retry at {t}",
        "run_again_at": "runs again at {t}",
        "corrects": "corrects #{seq}",
        "effects_checked": "external effects checked",
        "cron_window": "for cron window {w} ({cron}, {tz})",
        # the wording that depends on more than the reason code
        "completed_effect": "finished; the side effect is confirmed",
        "too_late_no_effect": (
            "the handler finished before it reached a boundary where the cancel could stop it "
            "(a step, an effect or check_cancelled); no effect or submission happened"
        ),
        "retry_unclassified": "unclassified error, retried by default; a retry is scheduled",
        "raised_at": " at {frame}",
        "h_result": "result:     {v}",
        # explain --traceback
        "h_tracebacks": "tracebacks:",
        "tb_head": "#{seq} {at}  {reason}, attempt {n}: {cls}",
        "no_tracebacks": "(no failure of this task has a traceback)",
    },
    "zh": {
        "not_due": "尚未到期，要到 {at} 才运行（{rel}）",
        "in": "还有 {d}",
        "ago": "{d}前",
        "leased": "由工作器 {owner} 持有，第 {attempt} 次尝试，租约于 {at} 到期（{rel}）",
        "leased_expired": (
            "由工作器 {owner} 持有，第 {attempt} 次尝试，但租约已于 {at} 到期（{rel}），"
            "等待扫描器处理"
        ),
        "cancel_requested": "已请求取消，等待工作器 {owner} 在副作用边界确认（租约于 {at} 到期）",
        "cancel_requested_expired": (
            "已请求取消，工作器 {owner} 未确认，租约已于 {at} 到期，等待扫描器处理"
        ),
        "receipt": "自 {since} 起等待回执 {receipt}",
        "deadline": "（期限 {at}）",
        "waiting": "等待子任务完成",
        "dead": "dead：需要人来处理",
        "dismissed": "dead 且已搁置：无需处理",
        "join": "；",
        "none": "（无）",
        "h_task": "任务：{v}",
        "h_kind": "类型：{v}",
        "h_queue": "队列：{v}",
        "h_tenant": "租户：{v}",
        "h_state": "状态：{v}",
        "h_attempts": "尝试：{v}",
        "h_replays": "重放：{v} 次",
        "h_next": "下次运行：{v}",
        "h_why": "为何没有运行：{v}",
        "h_history": "迁移记录：",
        "due_now": "已到期",
        "paren": "{a}（{b}）",
        "state_reason": "{code}，最后原因 {reason}：{sentence}",
        "by": "由 {actor}",
        "note": "：“{note}”",
        "attempt": "，第 {n} 次尝试",
        "version": "（版本 {v}）",
        "replay_run": "（重放批次 {n}）",
        "failed": "，失败：{err}",
        "retry_at": "重试时间 {t}",
        "run_again_at": "下次运行 {t}",
        "corrects": "更正 #{seq}",
        "effects_checked": "已确认外部副作用",
        "cron_window": "定时窗口 {w}（{cron}，{tz}）",
        "completed_effect": "执行完成，副作用已确认",
        "too_late_no_effect": (
            "处理函数在到达可以响应取消的边界（步骤、副作用或 check_cancelled）之前就已完成；"
            "没有产生副作用，也没有提交"
        ),
        "retry_unclassified": "未分类的错误，默认重试；已计划重试",
        "raised_at": "，出错位置 {frame}",
        "h_result": "结果：{v}",
        "h_tracebacks": "调用栈：",
        "tb_head": "#{seq} {at}  {reason}，第 {n} 次尝试：{cls}",
        "no_tracebacks": "（此任务的失败都没有调用栈）",
    },
}

_REASON_WIDTH = 30
_STATE_WIDTH = 12
_ERROR_LIMIT = 160
_RESULT_LIMIT = 200


def _check_lang(lang: str) -> None:
    if lang not in LANGUAGES:
        raise ValueError(f"unsupported language {lang!r}: use one of 'en', 'zh'")


def sentence(reason: str, lang: str = "en") -> str:
    """The sentence for a reason code in ``lang``; an unknown code is returned as it is."""
    _check_lang(lang)
    return SENTENCES[lang].get(reason, reason)


def _utc(value: datetime) -> datetime:
    """Naive times are taken as UTC (the store's convention); aware ones are converted."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _iso(value: datetime) -> str:
    return iso(_utc(value))


def _duration(seconds: float, lang: str) -> str:
    s = abs(seconds)
    zh = lang == "zh"
    if s < 60:
        return f"{s:.1f} 秒" if zh else f"{s:.1f}s"
    whole = int(s)
    if whole < 3600:
        m, sec = divmod(whole, 60)
        return f"{m} 分 {sec} 秒" if zh else f"{m}m {sec}s"
    if whole < 86400:
        h, rest = divmod(whole, 3600)
        return f"{h} 小时 {rest // 60} 分" if zh else f"{h}h {rest // 60}m"
    d, rest = divmod(whole, 86400)
    return f"{d} 天 {rest // 3600} 小时" if zh else f"{d}d {rest // 3600}h"


def _relative(when: datetime, now: datetime, lang: str) -> str:
    delta = (_utc(when) - _utc(now)).total_seconds()
    key = "in" if delta >= 0 else "ago"
    return _TEXT[lang][key].format(d=_duration(delta, lang))


def why_not_running(
    task: Task, now: datetime, lang: str = "en", extra: list[str] | None = None
) -> str | None:
    """One sentence saying why a task that is not moving is not running at ``now``.

    ``now`` is the database's current time (never the caller's clock). ``extra`` carries live
    facts only the caller can read from the store (a paused queue, a concurrency limit, the
    sequential step a child waits for); they are appended to the state's own line. A queued,
    due task with no ``extra`` is about to run: ``None``. Finished tasks (``succeeded``,
    ``cancelled``) return ``None``; a ``dead`` one says whether it still needs a person.
    """
    _check_lang(lang)
    text = _TEXT[lang]
    parts: list[str] = []
    state = task.state
    owner = task.lease_owner or "?"
    if state in (State.SUCCEEDED, State.CANCELLED):
        return None
    if state is State.QUEUED and (asleep := explain_durable.why(task, lang)) is not None:
        parts.append(asleep)  # a handler's ctx.sleep: when and which sleep
    elif state is State.QUEUED:
        # year 9999: a sequential workflow child held until its previous step succeeds;
        # the caller's ``extra`` says which step that is.
        if task.run_at is not None and _utc(now) < _utc(task.run_at) and task.run_at.year < 9999:
            parts.append(
                text["not_due"].format(at=_iso(task.run_at), rel=_relative(task.run_at, now, lang))
            )
    elif state is State.LEASED:
        expires = task.lease_expires_at
        expired = expires is not None and _utc(expires) <= _utc(now)
        parts.append(
            text["leased_expired" if expired else "leased"].format(
                owner=owner,
                attempt=task.attempts,
                at=_iso(expires) if expires else "?",
                rel=_relative(expires, now, lang) if expires else "?",
            )
        )
    elif state is State.CANCEL_REQUESTED:
        expires = task.lease_expires_at
        expired = expires is not None and _utc(expires) <= _utc(now)
        parts.append(
            text["cancel_requested_expired" if expired else "cancel_requested"].format(
                owner=owner, at=_iso(expires) if expires else "?"
            )
        )
    elif state is State.AWAITING_RECEIPT:
        line = text["receipt"].format(receipt=task.receipt_id or "?", since=_iso(task.updated_at))
        if task.receipt_deadline is not None:
            line += text["deadline"].format(at=_iso(task.receipt_deadline))
        parts.append(line)
    elif state is State.WAITING and task.waiting_for is not None:
        # a suspended handler: its event here, its children in ``extra`` (the caller reads them)
        waits = explain_durable.why(task, lang)
        if waits is not None:
            parts.append(waits)
    elif state is State.WAITING:
        parts.append(text["waiting"])
    elif state is State.DEAD:
        if task.dismissed:
            parts.append(text["dismissed"])
        else:
            why = [c for c in (task.last_reason, task.last_error_category) if c]
            dead = text["dead"]
            parts.append(text["paren"].format(a=dead, b=", ".join(why)) if why else dead)
    parts.extend(extra or [])
    return text["join"].join(parts) if parts else None


def _short_error(category: str | None, error: str | None, lang: str) -> str:
    message = (error or "").strip().splitlines()[0] if (error or "").strip() else ""
    if len(message) > _ERROR_LIMIT:
        message = message[: _ERROR_LIMIT - 1] + "…"
    if category and message:
        return _TEXT[lang]["paren"].format(a=category, b=message)
    return category or message


def _next_time(value: Any, at: datetime) -> str:
    """A transition's next run time, shortened to the clock time when it is the same UTC day."""
    when: datetime | None = value if isinstance(value, datetime) else None
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return value
    if when is None:
        return str(value)
    text = _iso(when)
    return text[11:] if text[:10] == _iso(at)[:10] else text


def _details(t: Transition, lang: str, effect_confirmed: bool = False) -> str:
    text = _TEXT[lang]
    head = text["by"].format(actor=t.actor)
    if t.note:
        head += text["note"].format(note=t.note)
    if t.attempt:
        head += text["attempt"].format(n=t.attempt)
    version = t.data.get("version") if t.reason == Reason.CLAIMED else None
    if version:
        head += text["version"].format(v=version)
    run = t.data.get("replay_run") if t.reason == Reason.REPLAYED else None
    if run is not None:  # a batch replay's transition names its run
        head += text["replay_run"].format(n=run)
    if t.error_category or t.error:
        head += text["failed"].format(err=_short_error(t.error_category, t.error, lang))
        frame = raising_frame(t.traceback)
        if frame:
            head += text["raised_at"].format(frame=frame)
    segments = [head]
    next_run = t.data.get("retry_at")
    if next_run and t.reason in (Reason.RETRY_SCHEDULED, Reason.SNOOZED):
        key = "retry_at" if t.reason == Reason.RETRY_SCHEDULED else "run_again_at"
        segments.append(text[key].format(t=_next_time(next_run, t.at)))
    if t.corrects is not None:
        segments.append(text["corrects"].format(seq=t.corrects))
    if t.data.get("effects_checked"):
        segments.append(text["effects_checked"])
    segments.extend(explain_durable.details(t.reason, t.data, lang))
    if t.reason == Reason.ENQUEUED and t.data.get("cron_window"):  # cron (scheduler.py)
        cron, tz = t.data.get("cron", "?"), t.data.get("tz", "UTC")
        segments.append(text["cron_window"].format(w=t.data["cron_window"], cron=cron, tz=tz))
    return text["join"].join(segments) + " — " + transition_sentence(t, lang, effect_confirmed)


def transition_sentence(t: Transition, lang: str = "en", effect_confirmed: bool = False) -> str:
    """The sentence for one transition: its reason's, except where it depends on more than the
    code — an unclassified error's retry ("unclassified error, retried by default", never
    "transient") and a completion, "finished", that says "the side effect is confirmed" only
    when ``effect_confirmed`` (the task has a confirmed effect)."""
    text = _TEXT[lang]
    if t.reason == Reason.COMPLETED and effect_confirmed:
        return text["completed_effect"]
    if t.reason == Reason.RETRY_SCHEDULED and t.error_category == ErrorCategory.UNCLASSIFIED:
        return text["retry_unclassified"]
    return _reason_sentence(t.reason, t.to_state, lang, effect_confirmed)


def _reason_sentence(reason: str, to: State, lang: str, effect_confirmed: bool) -> str:
    """A reason's sentence where it depends on what happened: ``cancel_too_late``
    "came after the submission" only when an effect is confirmed or the handler submitted
    (it went to ``awaiting_receipt``); otherwise the handler simply finished before any
    boundary could see the cancel."""
    if reason == Reason.CANCEL_TOO_LATE and not effect_confirmed and to != State.AWAITING_RECEIPT:
        return _TEXT[lang]["too_late_no_effect"]
    return sentence(reason, lang)


def _header(
    task: Task, now: datetime, lang: str, extra: list[str] | None, effect_confirmed: bool
) -> list[str]:
    text = _TEXT[lang]
    name = STATE_NAMES[lang][task.state]
    if task.state is State.DEAD and task.dismissed:
        name = "dismissed, no action needed" if lang == "en" else "已关闭，无需处理"
    code = task.state.value
    if task.last_reason:
        state = text["state_reason"].format(
            code=code if name == code else text["paren"].format(a=code, b=name),
            reason=task.last_reason,
            sentence=_reason_sentence(task.last_reason, task.state, lang, effect_confirmed),
        )
    else:
        state = code if name == code else text["paren"].format(a=code, b=name)
    lines = [
        text["h_task"].format(v=task.id),
        text["h_kind"].format(v=task.kind),
        text["h_queue"].format(v=task.queue),
        text["h_tenant"].format(v=task.tenant or text["none"]),
        text["h_state"].format(v=state),
        text["h_attempts"].format(v=f"{task.attempts}/{task.max_attempts}"),
        text["h_replays"].format(v=task.replay_count),
    ]
    if task.state is State.QUEUED and task.run_at is not None and task.run_at.year < 9999:
        due = _utc(task.run_at) <= _utc(now)
        when = text["due_now"] if due else _relative(task.run_at, now, lang)
        lines.append(text["h_next"].format(v=text["paren"].format(a=_iso(task.run_at), b=when)))
    why = why_not_running(task, now, lang, extra)
    if why:
        lines.append(text["h_why"].format(v=why))
    if task.state is State.SUCCEEDED and task.result is not None:
        shown = json.dumps(task.result, ensure_ascii=False, separators=(", ", ": "))
        if len(shown) > _RESULT_LIMIT:
            shown = shown[: _RESULT_LIMIT - 1] + "…"
        lines.append(text["h_result"].format(v=shown))
    return lines


def render(
    task: Task,
    transitions: list[Transition],
    now: datetime,
    lang: str = "en",
    extra: list[str] | None = None,
    *,
    effect_confirmed: bool = False,
) -> str:
    """The whole narrative: a header, then one line per transition in ``seq`` order.

    ``now`` is the database's current time; ``extra`` as for :func:`why_not_running`.
    ``effect_confirmed``: the task has a confirmed effect, so its completion says so (a
    plain success is only "finished").
    """
    _check_lang(lang)
    ordered = sorted(transitions, key=lambda t: t.seq)
    # Columns widen for the few codes and states longer than the usual layout, so they never touch.
    reason_w = max([_REASON_WIDTH - 1, *(len(t.reason) for t in ordered)]) + 1
    state_w = max([_STATE_WIDTH - 1, *(len(t.to_state.value) for t in ordered)]) + 1
    lines = _header(task, now, lang, extra, effect_confirmed)
    lines.append("")
    lines.append(_TEXT[lang]["h_history"])
    for t in ordered:
        lines.append(
            f"{_iso(t.at)}  {t.reason:<{reason_w}}{t.to_state.value:<{state_w}}"
            + _details(t, lang, effect_confirmed)
        )
    return "\n".join(lines)


def tracebacks(transitions: list[Transition], lang: str = "en") -> str:
    """Each failure's whole traceback, oldest first (``jobtrail explain --traceback``): a line
    naming the transition (seq, time, reason, attempt, exception class), then the traceback
    indented by four spaces, so that no line of it begins at the margin."""
    _check_lang(lang)
    text = _TEXT[lang]
    lines = [text["h_tracebacks"]]
    failures = [t for t in sorted(transitions, key=lambda t: t.seq) if t.traceback]
    for t in failures:
        lines.append(
            text["tb_head"].format(
                seq=t.seq,
                at=_iso(t.at),
                reason=t.reason,
                n=t.attempt if t.attempt is not None else "?",
                cls=t.error_class or "?",
            )
        )
        lines.extend("    " + line for line in (t.traceback or "").rstrip("\n").splitlines())
    if not failures:
        lines.append(text["no_tracebacks"])
    return "\n".join(lines)
