"""What ``explain`` says of durable handlers: a task whose handler is suspended — sleeping,
waiting for an event, waiting for the children it spawned — and the transitions that suspend,
wake and cancel it, in English and Chinese.

Pure: the caller hands in the task (``Task.waiting_for``), the database's time, and, for a
join, the children's rows and, for ``cancelled_after_effects``, the task's recorded steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..model.machine import TERMINAL, Reason, State
from ..model.models import Task, iso

_WORDS: dict[str, dict[str, str]] = {
    "en": {
        "sleeping": "sleeping until {until} (sleep '{name}')",
        "event": "waiting for event {key} since {since} ({timeout})",
        "times_out": "times out at {at}",
        "no_timeout": "no timeout",
        "children": "waiting for {open} of {total} children: {listed}",
        "children_deadline": " (times out at {at})",
        "child": "#{id} {state}",
        "children_done": "all {total} children it joins have ended; it resumes when claimed",
        # the timeline's details of the transitions that suspend and wake a handler
        "d_sleep": "until {until} (sleep '{name}')",
        "d_event": "event {key} ({timeout})",
        "d_children": "children {ids}{deadline}",
        "d_received": "event {key}",
        "d_finished": "children {ids}",
        "d_timed_out": "the wait {what} passed its deadline",
        "d_suspended": "at its {what}",
        "what_sleep": "sleep",
        "what_event": "wait for an event",
        "what_children": "join",
        # cancelled_after_effects
        "effects_before_cancel": "effects confirmed before the cancel: {effects}",
        "effect": "{name} [key {key}]",
        "none": "(none)",
    },
    "zh": {
        "sleeping": "休眠至 {until}（休眠 '{name}'）",
        "event": "自 {since} 起等待事件 {key}（{timeout}）",
        "times_out": "于 {at} 超时",
        "no_timeout": "不超时",
        "children": "等待 {total} 个子任务中的 {open} 个：{listed}",
        "children_deadline": "（于 {at} 超时）",
        "child": "#{id} {state}",
        "children_done": "它等待的 {total} 个子任务都已结束；被领取后即恢复",
        "d_sleep": "至 {until}（休眠 '{name}'）",
        "d_event": "事件 {key}（{timeout}）",
        "d_children": "子任务 {ids}{deadline}",
        "d_received": "事件 {key}",
        "d_finished": "子任务 {ids}",
        "d_timed_out": "{what}已超过期限",
        "d_suspended": "在{what}处",
        "what_sleep": "休眠",
        "what_event": "等待事件",
        "what_children": "等待子任务",
        "effects_before_cancel": "取消前已确认的副作用：{effects}",
        "effect": "{name} [键 {key}]",
        "none": "（无）",
    },
}


def _iso(value: Any) -> str:
    """A time as ``iso`` writes it; text (a transition's data) as it is; ``?`` for none."""
    if isinstance(value, datetime):
        return iso(value if value.tzinfo else value.replace(tzinfo=UTC))
    return str(value) if value else "?"


def _timeout(deadline: Any, words: Mapping[str, str]) -> str:
    return words["times_out"].format(at=_iso(deadline)) if deadline else words["no_timeout"]


def why(task: Task, lang: str = "en") -> str | None:
    """Why a suspended task does not run, from ``Task.waiting_for`` alone: its sleep or its
    wait for an event; ``None`` for a task that is not suspended and for a join (whose line
    needs the children: ``children_line``)."""
    waits = task.waiting_for
    if waits is None:
        return None
    words = _WORDS[lang]
    if waits["kind"] == "sleep":
        return words["sleeping"].format(until=_iso(waits.get("until")), name=waits.get("name"))
    if waits["kind"] == "event":
        return words["event"].format(
            key=waits.get("key"),
            since=_iso(task.updated_at),
            timeout=_timeout(waits.get("deadline"), words),
        )
    return None


def children_line(
    task: Task, children: Iterable[Mapping[str, Any]], lang: str = "en"
) -> str | None:
    """For a task suspended in ``ctx.join``: how many of the children it joins have not
    ended, each with its state ("waiting for 2 of 3 children: #17 leased, #18 queued"), and
    the join's deadline; ``None`` for any other task."""
    waits = task.waiting_for
    if waits is None or waits["kind"] != "children":
        return None
    words = _WORDS[lang]
    states = {str(c["id"]): str(c["state"]) for c in children}
    joined = [str(i) for i in waits.get("ids") or []]
    open_ = [i for i in joined if State(states.get(i, "succeeded")) not in TERMINAL]
    if not open_:
        return words["children_done"].format(total=len(joined))
    line = words["children"].format(
        open=len(open_),
        total=len(joined),
        listed=", ".join(words["child"].format(id=i, state=states.get(i, "?")) for i in open_),
    )
    if waits.get("deadline"):
        line += words["children_deadline"].format(at=_iso(waits["deadline"]))
    return line


def details(reason: str, data: Mapping[str, Any], lang: str = "en") -> list[str]:
    """The timeline's extra words for a transition of a durable handler, from its data: the
    sleep and its wake time, the event key and deadline, the children, what timed out."""
    words = _WORDS[lang]
    if reason == Reason.SLEEPING and "sleep" in data:
        return [words["d_sleep"].format(until=_iso(data.get("until")), name=data["sleep"])]
    if reason == Reason.WAITING_FOR_EVENT and "key" in data:
        return [
            words["d_event"].format(key=data["key"], timeout=_timeout(data.get("deadline"), words))
        ]
    if reason == Reason.WAITING_FOR_CHILDREN and "children" in data:
        deadline = data.get("deadline")
        return [
            words["d_children"].format(
                ids=_ids(data["children"]),
                deadline=words["children_deadline"].format(at=_iso(deadline)) if deadline else "",
            )
        ]
    if reason == Reason.EVENT_RECEIVED and "key" in data:
        return [words["d_received"].format(key=data["key"])]
    if reason == Reason.CHILDREN_FINISHED and "children" in data:
        return [words["d_finished"].format(ids=_ids(data["children"]))]
    if reason == Reason.WAIT_TIMED_OUT:
        what = _what(data, words)
        return [words["d_timed_out"].format(what=what)] if what else []
    if reason in (Reason.CANCELLED_AFTER_EFFECTS, Reason.CANCEL_CONFIRMED) and data.get(
        "suspended"
    ):
        return [words["d_suspended"].format(what=words.get(f"what_{data['suspended']}", "?"))]
    return []


def _what(data: Mapping[str, Any], words: Mapping[str, str]) -> str:
    """What a timed-out wait was, from its data: ``wait for an event`` with the key, ``join``
    with the children."""
    if data.get("key"):
        return f"{words['what_event']} {data['key']}"
    if data.get("children"):
        return f"{words['what_children']} {_ids(data['children'])}"
    kind = data.get("wait_kind") or data.get("kind")
    return words.get(f"what_{kind}", "") if isinstance(kind, str) else ""


def _ids(ids: Any) -> str:
    return ", ".join(f"#{i}" for i in ids) if isinstance(ids, list) else str(ids)


def confirmed_effects(steps: Sequence[Mapping[str, Any]], lang: str = "en") -> str:
    """For ``cancelled_after_effects``: the effects confirmed before the cancel, each with its
    key."""
    words = _WORDS[lang]
    listed = [
        words["effect"].format(name=s["name"], key=s["effect_key"])
        for s in steps
        if s["is_effect"] and s["status"] == "confirmed"
    ]
    return words["effects_before_cancel"].format(effects=", ".join(listed) or words["none"])
