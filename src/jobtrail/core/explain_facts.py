"""Live facts for an explanation that only the store knows: the step a sequential child waits
for, a workflow's children, steps and effects with their keys and receipts, outbox deliveries."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..model.machine import Reason, State
from ..model.models import task_from_row
from ..store.base import Driver, Row, Tx
from . import explain_controls, explain_durable, workflow

_WORDS = {
    "en": {
        "waits": "waiting for the previous step #{id} ({kind}, {state})",
        "children": "children: {summary}",
        "steps": "steps and effects:",
        "step": "  step   {name}: confirmed (attempt {attempt}) → {result}",
        "effect_ok": "  effect {name} [key {key}]: confirmed (attempt {attempt}), receipt {result}",
        "effect_open": "  effect {name} [key {key}]: started by attempt {attempt}, outcome "
        "uncertain{error}",
        "effect_refused": "  effect {name} [key {key}]: refused by the provider in attempt "
        "{attempt} (nothing happened; the next attempt calls again){error}",
        "record": "  {record:<6} {name}: recorded (attempt {attempt}) → {result}",
        "record_sleep": "sleep",
        "record_event": "wait",
        "record_join": "join",
        "record_spawn": "spawn",
        "record_now": "now",
        "record_uuid": "uuid",
        "record_patched": "patch",
        "outbox": "outbox: {n} message(s), {pending} delivering, {done} delivered",
        "message": "  #{id} {topic}: {state}{extra}",
    },
    "zh": {
        "waits": "等待上一步 #{id}（{kind}，{state}）完成",
        "children": "子任务：{summary}",
        "steps": "步骤与副作用：",
        "step": "  步骤   {name}：已确认（第 {attempt} 次尝试）→ {result}",
        "effect_ok": "  副作用 {name} [键 {key}]：已确认（第 {attempt} 次尝试），回执 {result}",
        "effect_open": "  副作用 {name} [键 {key}]：第 {attempt} 次尝试已开始，结果不确定{error}",
        "effect_refused": "  副作用 {name} [键 {key}]：第 {attempt} 次尝试被服务方拒绝"
        "（未发生任何事；下次尝试会再次调用）{error}",
        "record": "  {record} {name}：已记录（第 {attempt} 次尝试）→ {result}",
        "record_sleep": "休眠",
        "record_event": "等待",
        "record_join": "汇合",
        "record_spawn": "子任务",
        "record_now": "时间",
        "record_uuid": "uuid",
        "record_patched": "补丁",
        "outbox": "发件箱：{n} 条消息，{pending} 条发送中，{done} 条已送达",
        "message": "  #{id} {topic}：{state}{extra}",
    },
}


@dataclass
class Facts:
    why: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


def _short(value: object, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def gather(driver: Driver, tx: Tx, row: Row, lang: str) -> Facts:
    words = _WORDS[lang]
    facts = Facts()
    if (
        row["state"] == State.QUEUED
        and row.get("after_id") is not None
        and row["run_at"] >= workflow.NOT_YET
    ):
        before = driver.task_get(tx, row["after_id"])
        if before is not None:
            facts.why.append(
                words["waits"].format(id=before["id"], kind=before["kind"], state=before["state"])
            )
    facts.why.extend(explain_controls.lines(driver, tx, row, lang))
    children = driver.children_list(tx, id=row["id"])
    task = task_from_row(row)
    joined = explain_durable.children_line(task, children, lang)  # a handler's ctx.join
    if joined is not None:
        facts.why.append(joined)
    if children:
        line = words["children"].format(summary=workflow.summary(children))
        facts.details.append(line)
        if row["state"] == State.WAITING and task.waiting_for is None:
            facts.why.append(line)
    steps = driver.step_list(tx, id=row["id"])
    if row["last_reason"] == Reason.CANCELLED_AFTER_EFFECTS:  # which effects it did
        facts.details.append(explain_durable.confirmed_effects(steps, lang))
    if steps:
        facts.details.append(words["steps"])
        for s in steps:
            key = s["effect_key"]
            record = s.get("record") or "step"
            if not s["is_effect"] and record != "step":  # a durable handler's sleep, wait...
                facts.details.append(
                    words["record"].format(
                        record=words.get(f"record_{record}", record),
                        name=s["name"],
                        attempt=s["attempt"],
                        result=_short(s["result"]),
                    )
                )
            elif not s["is_effect"]:
                facts.details.append(
                    words["step"].format(
                        name=s["name"], attempt=s["attempt"], result=_short(s["result"])
                    )
                )
            elif s["status"] == "confirmed":
                facts.details.append(
                    words["effect_ok"].format(
                        name=s["name"], key=key, attempt=s["attempt"], result=_short(s["result"])
                    )
                )
            else:
                error = f" ({s['error']})" if s["error"] else ""
                open_or_refused = "effect_refused" if s["status"] == "refused" else "effect_open"
                facts.details.append(
                    words[open_or_refused].format(
                        name=s["name"], key=key, attempt=s["attempt"], error=error
                    )
                )
    messages = driver.outbox_list(tx, id=row["id"])
    if messages:
        pending = sum(1 for m in messages if m["state"] == "pending")
        facts.details.append(
            words["outbox"].format(n=len(messages), pending=pending, done=len(messages) - pending)
        )
        for m in messages:
            state = "delivering" if m["state"] == "pending" else "delivered"
            extra = f", {m['attempts']} attempt(s)" if m["attempts"] else ""
            if m["state"] == "pending" and m["last_error"]:
                extra += f", last error: {m['last_error'][:80]}"
            facts.details.append(
                words["message"].format(id=m["id"], topic=m["topic"], state=state, extra=extra)
            )
    return facts
