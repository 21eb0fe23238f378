"""Rate limits and ramps (docs/operations.md), the operator's side: ``set_rate``, the ramp of
``resume(ramp=...)``, how a queue's rate reads in ``queues()`` and ``explain``. The claim that
honours them is ``store/flow.py``; the arithmetic ``model/rates.py``. Held by ``App`` and given
to ``Ops``, whose ``resume`` uses ``ramp_on_resume``."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from ..model import i18n, rates, validate
from ..store.base import Row, Tx, dumps
from .core import Part, _require_name, _require_text

#: the pace before a pause that a rate-less resume ramp measures, seconds
MEASURE_SECONDS = 60.0


def rate_view(row: Row) -> dict[str, Any]:
    """The rate fields of ``queues()`` for a queue row (all ``None`` without a rate)."""
    return {
        "rate_per_second": row.get("rate_per_second"),
        "rate_burst": row.get("rate_burst"),
        "rate_per_tenant": row.get("rate_per_tenant"),
        "ramp_seconds": row.get("ramp_seconds"),
        "ramp_started_at": row.get("ramp_started_at"),
        "rate_until": row.get("rate_until"),
    }


def queue_view(row: Row | None, name: str, kind_rates: list[Row] | None = None) -> dict[str, Any]:
    """A queue as ``queues()`` lists it: pause state, concurrency limits and rate (and, when
    ``kind_rates`` is given, the rates of its kinds: ``kind``, ``per_second``, ``burst``)."""
    row = row or {}
    extra: dict[str, Any] = {}
    if kind_rates is not None:
        extra["kind_rates"] = [
            {"kind": k["kind"], "per_second": k["per_second"], "burst": k["burst"]}
            for k in kind_rates
            if k["queue"] == name
        ]
    return {
        "queue": name,
        "paused": bool(row.get("paused")),
        "paused_by": row.get("paused_by"),
        "paused_note": row.get("paused_note"),
        "paused_since": row.get("paused_at"),
        "limit_total": row.get("limit_total"),
        "limit_per_tenant": row.get("limit_per_tenant"),
        **rate_view(row),
        **extra,
    }


def _number(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


class Rates(Part):
    """``set_rate``, and what ``Ops`` asks of a queue's rate (a resume's ramp, the facts of
    ``explain``)."""

    def set_rate(
        self,
        queue: str,
        *,
        per_second: float | None = None,
        burst: int | None = None,
        per_tenant: float | None = None,
        by: str,
        note: str,
        ramp: float | None = None,
        kind: str | None = None,
    ) -> dict[str, Any]:
        """At most ``per_second`` claims a second from ``queue`` across all workers, and at
        most ``per_tenant`` a second for each tenant in it: token buckets kept in the store,
        decided by the database clock in every claim. ``burst``: how many claims may start at
        once (the bucket's size; default one second's worth, at least 1). ``ramp``: seconds
        over which the allowed rate grows from a tenth to the full rate. ``None`` lifts a rate
        (both ``None``: no rate). Audited in ``queue_history`` (action ``rate``).

        With ``kind``: the rate of that kind within ``queue``, beside the queue's own
        (``per_second`` and ``burst`` only; ``per_second=None`` lifts it); audited the same
        way, with the kind in the entry's data."""
        validate.filter_text(queue, "queue")
        _require_name(queue, "queue")
        _require_text(by, "by")
        _require_text(note, "note")
        if kind is not None:
            return self._set_kind_rate(
                queue,
                kind,
                per_second=per_second,
                burst=burst,
                per_tenant=per_tenant,
                ramp=ramp,
                by=by,
                note=note,
            )
        if per_second is not None:
            per_second = validate.rate(per_second, "per_second")
        if per_tenant is not None:
            per_tenant = validate.rate(per_tenant, "per_tenant")
        if burst is not None:
            validate.integer(burst, "burst", 0, validate.MAX_CONCURRENCY_LIMIT)
        if ramp is not None:
            ramp = validate.seconds(ramp, "ramp", positive=True)
        if per_second is None and per_tenant is None and (burst is not None or ramp is not None):
            raise ValueError("burst and ramp need a rate: give per_second or per_tenant")
        with self._driver.transaction() as tx:
            self._ensure_queue_row(tx, queue)
            row = self._driver.queue_rate_set(
                tx,
                name=queue,
                per_second=per_second,
                burst=burst,
                per_tenant=per_tenant,
                ramp=ramp,
                until=None,
            )
            data = {"per_second": per_second, "burst": burst, "per_tenant": per_tenant}
            if ramp is not None:
                data["ramp"] = ramp
            self._driver.queue_history_insert(
                tx, queue=queue, action="rate", actor=by, note=note, data=dumps(data)
            )
            self._driver.notify_queued(tx, queue)  # a lifted or raised rate: look again now
        return queue_view(row, queue)

    def _set_kind_rate(
        self,
        queue: str,
        kind: str,
        *,
        per_second: float | None,
        burst: int | None,
        per_tenant: float | None,
        ramp: float | None,
        by: str,
        note: str,
    ) -> dict[str, Any]:
        """``set_rate(queue, kind=...)``: the bucket of one kind within a queue."""
        validate.filter_text(kind, "kind", max_length=255)
        if not kind:
            raise ValueError("kind must be a non-empty string")
        if per_tenant is not None or ramp is not None:
            raise ValueError("per_tenant and ramp are for a queue's own rate, not with kind")
        if per_second is not None:
            per_second = validate.rate(per_second, "per_second")
        if burst is not None:
            validate.integer(burst, "burst", 0, validate.MAX_CONCURRENCY_LIMIT)
            if per_second is None:
                raise ValueError("burst needs a rate: give per_second")
        with self._driver.transaction() as tx:
            self._ensure_queue_row(tx, queue)
            if per_second is None:
                self._driver.kind_rate_delete(tx, queue=queue, kind=kind)
            else:
                self._driver.kind_rate_set(
                    tx, queue=queue, kind=kind, per_second=per_second, burst=burst
                )
            self._driver.queue_kind_rated_sync(tx, name=queue)
            data = {"kind": kind, "per_second": per_second, "burst": burst}
            self._driver.queue_history_insert(
                tx, queue=queue, action="rate", actor=by, note=note, data=dumps(data)
            )
            self._driver.notify_queued(tx, queue)
            row = self._driver.queue_get(tx, name=queue)
            kinds = self._driver.kind_rate_list(tx, queue=queue)
        return queue_view(row, queue, kinds)

    def _ensure_queue_row(self, tx: Tx, queue: str) -> Row:
        current = self._driver.queue_get(tx, name=queue)
        if current is not None:
            return current
        row = self._driver.queue_upsert(
            tx,
            name=queue,
            paused=False,
            paused_by=None,
            paused_note=None,
            limit_total=None,
            limit_per_tenant=None,
        )
        assert row is not None
        return row

    def ramp_on_resume(self, tx: Tx, current: Row, ramp: float) -> dict[str, Any]:
        """The ramp of ``resume(queue, ramp=...)`` on a paused queue, in the resume's
        transaction; returns what the history entry records. A queue with a rate of its own
        ramps that rate. A queue without one gets a temporary rate that ends with the ramp:
        its full value is the queue's pace over the minute before the pause (claims a second)
        or the due backlog spread over the ramp, whichever is higher (at least 1/s)."""
        queue = current["name"]
        now = self._driver.db_now(tx)
        rate = rates.of(current, now)
        if rate is not None and current.get("rate_until") is None:
            self._driver.queue_rate_set(
                tx,
                name=queue,
                per_second=rate.per_second,
                burst=rate.burst,
                per_tenant=rate.per_tenant,
                ramp=ramp,
                until=None,
            )
            return {"ramp": ramp, "rate": "own"}
        paused_at: datetime = current.get("paused_at") or now
        measured = self._driver.queue_claims_between(
            tx,
            queue=queue,
            since=self._driver.encode_time(paused_at - timedelta(seconds=MEASURE_SECONDS)),
            until=self._driver.encode_time(paused_at),
        )
        pace = (measured["n"] if measured else 0) / MEASURE_SECONDS
        due = self._driver.queue_due_count(tx, queue=queue)
        backlog = (due["n"] if due else 0) / ramp
        full = min(validate.MAX_RATE, max(1.0, pace, backlog))
        full = math.ceil(full * 1000) / 1000
        self._driver.queue_rate_set(
            tx, name=queue, per_second=full, burst=None, per_tenant=None, ramp=ramp, until=ramp
        )
        return {
            "ramp": ramp,
            "rate": full,
            "measured": round(pace, 3),
            "due": due["n"] if due else 0,
        }

    def _kind_rate_facts(self, tx: Tx, row: Row, queue: Row, now: datetime, lang: str) -> list[str]:
        """Why a queued task waits for its kind's bucket within its queue."""
        if not queue.get("kind_rated"):
            return []
        for bucket in self._driver.kind_rate_list(tx, queue=row["queue"]):
            if bucket["kind"] != row["kind"]:
                continue
            rate = rates.of_kind(bucket)
            full = bucket["per_second"]
            left = rates.tokens(rate, full, bucket["tokens"], bucket["tokens_at"], now)
            if left < 1.0:
                return [
                    i18n.t(
                        "explain.rate_kind",
                        lang,
                        kind=row["kind"],
                        queue=row["queue"],
                        rate=_number(full),
                        wait=_number(rates.next_slot(rate, full, left, now)),
                    )
                ]
        return []

    def rate_facts(self, tx: Tx, row: Row, queue: Row, lang: str) -> list[str]:
        """Why a due queued task waits for its queue's or its tenant's rate, and when the
        next slot is (database clock)."""
        now = self._driver.db_now(tx)
        out = self._kind_rate_facts(tx, row, queue, now, lang)
        rate = rates.of(queue, now)
        if rate is None:
            return out
        name = row["queue"]
        if rate.per_second is not None:
            left = rates.tokens(rate, rate.per_second, queue["tokens"], queue["tokens_at"], now)
            if left < 1.0:
                out.append(
                    i18n.t(
                        "explain.rate_queue",
                        lang,
                        queue=name,
                        rate=_number(rate.per_second * rate.share(now)),
                        wait=_number(rates.next_slot(rate, rate.per_second, left, now)),
                    )
                )
        if rate.per_tenant is not None:
            full = rate.per_tenant
            since = now - timedelta(seconds=rates.full_until(rate, full))
            buckets = self._driver.tenant_rate_list(
                tx, queue=name, since=self._driver.encode_time(since)
            )
            mine = [b for b in buckets if b["tenant"] == row["tenant"]]
            if mine:
                left = rates.tokens(rate, full, mine[0]["tokens"], mine[0]["tokens_at"], now)
                if left < 1.0:
                    out.append(
                        i18n.t(
                            "explain.rate_tenant",
                            lang,
                            tenant=row["tenant"] or "(none)",
                            queue=name,
                            rate=_number(full * rate.share(now)),
                            wait=_number(rates.next_slot(rate, full, left, now)),
                        )
                    )
        return out
