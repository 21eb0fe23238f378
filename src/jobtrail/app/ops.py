"""The operator's side of ``App``: pause and resume queues, concurrency limits, queue
health, dead letters as work to close, and pruning. Held by ``App``."""

from __future__ import annotations

import builtins
from datetime import datetime, timedelta
from typing import Any

from ..core import explain_facts, explain_keys, explain_workers
from ..model import validate
from ..model.timeparse import parse_duration
from ..services import retention
from ..services import stats as stats_module
from ..store.base import Row, Tx, dumps
from .core import Core, Part, _require_name, _require_text
from .rates import Rates
from .rates import queue_view as _queue_view

PRUNE_BATCH = retention.BATCH  # the batch of `prune`, retention.py's


class Ops(Part):
    """Queues (pause, resume, limits, history), health, pruning, and the live facts of a task
    that ``explain`` and ``why_not_running`` tell (given ``Rates``: a queue's rate and ramp)."""

    def __init__(self, core: Core, rates: Rates) -> None:
        super().__init__(core)
        self._rates = rates

    # -- pause, resume, limits ------------------------------------------------------------------
    def pause(self, queue: str, *, by: str, note: str) -> dict[str, Any]:
        """Stop claims from ``queue`` (within one poll, on every worker); running tasks finish.
        Audited in ``queue_history``. Pausing a paused queue changes nothing."""
        return self._set_queue(queue, "pause", by, note, paused=True)

    def resume(
        self, queue: str, *, by: str, note: str, ramp: float | None = None
    ) -> dict[str, Any]:
        """Let workers claim from ``queue`` again. Audited. ``ramp`` (seconds): claims grow
        from a tenth of the queue's rate to all of it over that time, so a backlog does not
        wake at once (a queue without a rate: see ``RatesAPI._ramp_on_resume``)."""
        if ramp is not None:
            ramp = validate.seconds(ramp, "ramp", positive=True)
        return self._set_queue(queue, "resume", by, note, paused=False, ramp=ramp)

    def set_limit(
        self,
        queue: str,
        *,
        total: int | None = None,
        per_tenant: int | None = None,
        by: str,
        note: str,
    ) -> dict[str, Any]:
        """At most ``total`` tasks of ``queue`` leased at once across all workers, and at most
        ``per_tenant`` per tenant; ``None`` lifts a limit. Audited."""
        for name, value in (("total", total), ("per_tenant", per_tenant)):
            if value is not None:
                validate.integer(value, name, 0, validate.MAX_CONCURRENCY_LIMIT)
        return self._set_queue(queue, "limit", by, note, total=total, per_tenant=per_tenant)

    def _set_queue(
        self,
        queue: str,
        action: str,
        by: str,
        note: str,
        *,
        paused: bool | None = None,
        total: int | None = None,
        per_tenant: int | None = None,
        ramp: float | None = None,
    ) -> dict[str, Any]:
        validate.filter_text(queue, "queue")
        _require_name(queue, "queue")
        _require_text(by, "by")
        _require_text(note, "note")
        with self._driver.transaction() as tx:
            current = self._driver.queue_get(tx, name=queue) or {}
            was_paused = bool(current.get("paused"))
            if action == "limit":
                now_paused = was_paused
                limits = (total, per_tenant)
                changed = limits != (current.get("limit_total"), current.get("limit_per_tenant"))
            else:
                assert paused is not None
                now_paused = paused
                limits = (current.get("limit_total"), current.get("limit_per_tenant"))
                changed = paused != was_paused
            if not changed:
                return _queue_view(current, queue)
            ramped = self._rates.ramp_on_resume(tx, current, ramp) if ramp is not None else None
            row = self._driver.queue_upsert(
                tx,
                name=queue,
                paused=now_paused,
                paused_by=by
                if now_paused and action == "pause"
                else current.get("paused_by")
                if now_paused
                else None,
                paused_note=note
                if now_paused and action == "pause"
                else current.get("paused_note")
                if now_paused
                else None,
                limit_total=limits[0],
                limit_per_tenant=limits[1],
            )
            data: dict[str, Any] = {}
            if action == "limit":
                data = {"total": total, "per_tenant": per_tenant}
            if ramped is not None:
                data = ramped
            self._driver.queue_history_insert(
                tx, queue=queue, action=action, actor=by, note=note, data=dumps(data)
            )
            if action == "resume":
                self._driver.notify_queued(tx, queue)
        return _queue_view(row, queue)

    def queues(self) -> builtins.list[dict[str, Any]]:
        """Every known queue (registered kinds' queues, the default, and any configured one)
        with paused, by, note, since and limits."""
        with self._driver.transaction(write=False) as tx:
            rows = {r["name"]: r for r in self._driver.queue_list(tx)}
            kind_rates = self._driver.kind_rate_list(tx, queue=None)
        names = (
            set(rows) | {s.queue for s in self._core._kinds.values()} | {self._core.default_queue}
        )
        return [_queue_view(rows.get(name), name, kind_rates) for name in sorted(names)]

    def queue_history(self, queue: str, *, limit: int = 100) -> builtins.list[dict[str, Any]]:
        """The audited pause / resume / limit changes of a queue, newest first."""
        validate.filter_text(queue, "queue")
        validate.integer(limit, "limit", 1, validate.MAX_LIMIT)
        with self._driver.transaction(write=False) as tx:
            rows = self._driver.queue_history_list(tx, queue=queue, limit=limit)
        return [
            {
                "action": r["action"],
                "by": r["actor"],
                "note": r["note"],
                "data": r["data"],
                "at": r["at"],
            }
            for r in rows
        ]

    # -- health ----------------------------------------------------------------------------------
    def stats(self, *, window: float = 300.0, exact: bool = False) -> dict[str, Any]:
        """Queue health per queue and kind: counts by state, oldest due age, arrival and
        completion rates per minute over the last ``window`` seconds, retries and lease
        expiries, dead count and oldest dead age, queue wait and run time p50/p95, and the
        estimated drain time. Bounded unless ``exact``: queued counts stop at 10,000 per queue
        and kind (named in the group's ``at_least``) and a window holding more than 10,000
        transitions is shortened to the newest 10,000 (``window_capped``, ``window_seconds``
        the window read): see ``services.stats``."""
        window = validate.seconds(window, "window", positive=True)
        with self._driver.transaction(write=False) as tx:
            return stats_module.collect(self._driver, tx, window, exact=exact)

    def transition_counts(self, *, window: float = 300.0) -> builtins.list[dict[str, Any]]:
        """Transitions recorded in the last ``window`` seconds, counted by queue, kind, reason
        and target state (what ``GET /metrics`` exports)."""
        window = validate.seconds(window, "window", positive=True)
        with self._driver.transaction(write=False) as tx:
            since = self._driver.db_now(tx) - timedelta(seconds=window)
            rows = self._driver.stats_reasons(tx, since=self._driver.encode_time(since))
        return [dict(r) for r in rows]

    # -- pruning ---------------------------------------------------------------------------------
    def prune(self, older_than: float | timedelta | str) -> dict[str, int]:
        """Delete ``succeeded`` and ``cancelled`` tasks that finished more than ``older_than``
        ago, with their transitions, steps and outbox rows, in bounded batches — the one
        documented exception to the append-only log. Dead tasks are kept."""
        seconds = parse_duration(older_than, "older_than")
        total = {"tasks": 0, "transitions": 0}
        for state in ("succeeded", "cancelled"):  # the same batches as retention's
            tasks, transitions = retention.prune_state(self._driver, state, seconds)
            total["tasks"] += tasks
            total["transitions"] += transitions
        return total

    # -- live facts for explanations -------------------------------------------------------------
    def live_facts(self, tx: Tx, row: Row, lang: str) -> explain_facts.Facts:
        facts = explain_facts.gather(self._driver, tx, row, lang)
        facts.why[:0] = self._queue_facts(tx, row, lang)
        if row["state"] == "queued":  # due, and no live worker takes it?
            facts.why += explain_workers.unserved(row, self._driver.worker_list(tx), lang)
        return facts

    def _queue_facts(self, tx: Tx, row: Row, lang: str) -> builtins.list[str]:
        """Why a due queued task is held back: a paused queue or a full concurrency limit."""
        if row["state"] != "queued":
            return []
        queue = self._driver.queue_get(tx, name=row["queue"])
        if queue is None:
            return []
        zh = lang == "zh"
        out = []
        if queue["paused"]:
            when = _iso(queue["paused_at"])
            out.append(
                f"队列 {row['queue']} 已被 {queue['paused_by']} 于 {when} 暂停"
                f"（“{queue['paused_note']}”）"
                if zh
                else f"queue {row['queue']} paused by {queue['paused_by']} at {when} "
                f'("{queue["paused_note"]}")'
            )
        if queue["limit_total"] is not None:
            held = self._driver.queue_held_count(tx, queue=row["queue"])
            n = held["n"] if held else 0
            if n >= queue["limit_total"]:
                out.append(
                    f"队列 {row['queue']} 并发上限已满：{n}/{queue['limit_total']} 个在执行"
                    if zh
                    else f"queue {row['queue']} concurrency limit reached: "
                    f"{n} of {queue['limit_total']} leased"
                )
        if queue["limit_per_tenant"] is not None:
            held = self._driver.queue_tenant_held(tx, queue=row["queue"], tenant=row["tenant"])
            n = held["n"] if held else 0
            if n >= queue["limit_per_tenant"]:
                tenant = row["tenant"] or "(none)"
                out.append(
                    f"租户 {tenant} 并发上限已满：{n}/{queue['limit_per_tenant']} 个在执行"
                    if zh
                    else f"tenant {tenant}: {n} of {queue['limit_per_tenant']} "
                    "leased (per-tenant limit)"
                )
        out += self._rates.rate_facts(tx, row, queue, lang)
        if queue["keyed"]:
            out += explain_keys.key_facts(self._driver, tx, row, lang)
        return out


def _iso(value: datetime | None) -> str:
    from ..model.models import iso

    return iso(value) if value is not None else "?"
