"""The live-worker line of an explanation: a due task that no live worker can
take says so — "no live worker serves queue Q" / "no live worker registers kind K" — and
names the workers that are live. Pure: the caller reads the rows (``worker_list``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..model import live
from ..model.machine import State
from . import workflow

_WORDS = {
    "en": {
        live.NO_QUEUE: "no live worker serves queue {queue} (live workers: {who})",
        live.NO_KIND: "no live worker registers kind {kind} (live workers serving queue "
        "{queue}: {who})",
        "none": "none",
        "more": ", and {n} more",
        "sep": ", ",
    },
    "zh": {
        live.NO_QUEUE: "没有存活的工作器服务队列 {queue}（存活的工作器：{who}）",
        live.NO_KIND: "没有存活的工作器注册类型 {kind}（服务队列 {queue} 的存活工作器：{who}）",
        "none": "无",
        "more": "，另有 {n} 个",
        "sep": "，",
    },
}
#: Workers named in the line; the rest are counted.
SHOWN = 5


def unserved(row: Mapping[str, Any], workers: Sequence[Mapping[str, Any]], lang: str) -> list[str]:
    """The line for a due ``queued`` task ``row`` (with the database's ``db_now``) that none
    of the live ``workers`` takes; nothing for any other task."""
    if row["state"] != State.QUEUED or not _due(row):
        return []
    why = live.missing(row["queue"], row["kind"], workers)
    if why is None:
        return []
    words = _WORDS[lang]
    if why == live.NO_QUEUE:
        named = [f"{w['id']} [{','.join(w['queues']) or '-'}]" for w in workers]
    else:
        serving = [w for w in workers if row["queue"] in w["queues"]]
        named = [f"{w['id']} [{','.join(w['kinds']) or '-'}]" for w in serving]
    who = words["sep"].join(named[:SHOWN]) or words["none"]
    if len(named) > SHOWN:
        who += words["more"].format(n=len(named) - SHOWN)
    return [words[why].format(queue=row["queue"], kind=row["kind"], who=who)]


def _due(row: Mapping[str, Any]) -> bool:
    run_at, now = row.get("run_at"), row.get("db_now")
    if not isinstance(run_at, datetime) or not isinstance(now, datetime):
        return False
    return run_at < workflow.NOT_YET and run_at <= now
