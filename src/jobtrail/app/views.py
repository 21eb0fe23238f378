"""Read helpers for people (the dashboard, issue 5): a task's steps and effects, the "why it
is not running now" line, cheap state counts, search by idempotency key, the exact preview of a
batch replay, and arrivals vs completions per time bucket. Held by ``App``."""

from __future__ import annotations

import builtins
import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..core import replays
from ..model import validate
from ..model.models import task_from_row
from ..model.timeparse import parse_time
from ..services import stats as stats_bounds
from ..store.base import Row
from .core import Core, Part
from .reads import LiveFacts

if TYPE_CHECKING:
    from ..model.models import Task

OPEN_STATES = ("queued", "leased", "cancel_requested", "awaiting_receipt", "waiting")


class Views(Part):
    """Read helpers for people, given ``facts`` (``Ops.live_facts``)."""

    def __init__(self, core: Core, facts: LiveFacts) -> None:
        super().__init__(core)
        self._facts = facts

    def steps(
        self, task_id: str | int, *, superseded: bool = False
    ) -> builtins.list[dict[str, Any]]:
        """The task's steps and effects in the order they started: ``name``, ``effect``
        (bool), ``status`` (``confirmed``; ``intent`` — started, outcome unknown; ``refused``
        — the provider refused it, nothing happened),
        ``effect_key``, ``result`` (the step's result or the effect's receipt), ``attempt``,
        ``error``, ``created_at``, ``confirmed_at``. With ``superseded`` the outcomes that a
        replay from a step forgot come first, oldest replay first, each with ``superseded``
        true, ``superseded_at`` and ``replay_seq`` (the task's seq after that replay), and
        every current one has ``superseded`` false."""
        with self._driver.transaction(write=False) as tx:
            row = self._core._row(tx, task_id)
            rows = self._driver.step_list_recorded(tx, id=row["id"])
            old = self._driver.step_superseded_list(tx, id=row["id"]) if superseded else []
        if superseded:
            return [
                {**_step(r), "superseded": True, "superseded_at": r["superseded_at"],
                 "replay_seq": r["replay_seq"]}
                for r in old
            ] + [{**_step(r), "superseded": False} for r in rows]  # fmt: skip
        return [_step(r) for r in rows]

    def why_not_running(self, task_id: str | int, lang: str = "en") -> dict[str, Any]:
        """``why``: the sentence saying why the task is not running now (``None`` when it is
        running or about to), from the live store; ``details``: extra facts (workflow
        children, effects); ``now``: the database clock."""
        from ..core import explain

        if lang not in explain.LANGUAGES:
            raise ValueError(f"unknown language {lang!r}")
        with self._driver.transaction(write=False) as tx:
            row = self._core._row(tx, task_id)
            facts = self._facts(tx, row, lang)
        task = task_from_row(row)
        return {
            "why": explain.why_not_running(task, row["db_now"], lang, facts.why or None),
            "details": list(facts.details),
            "now": row["db_now"],
        }

    def state_counts(self, *, upto: int | None = None) -> dict[str, int]:
        """Tasks per open state plus ``dead`` (not dismissed): two indexed counts, no window.
        With ``upto`` each state is counted up to ``upto`` tasks at most (a count equal to
        ``upto`` means that many or more), so the answer never waits on a million-row count."""
        with self._driver.transaction(write=False) as tx:
            counts = {s: 0 for s in OPEN_STATES}
            if upto is None:
                rows = self._driver.view_state_counts(tx)
                dead = self._driver.view_dead_count(tx)
            else:
                upto = validate.integer(upto, "upto", 1, 2**31 - 1)
                rows = self._driver.view_state_counts_upto(tx, upto=upto)
                dead = self._driver.view_dead_count_upto(tx, upto=upto)
            for r in rows:
                counts[r["state"]] = int(r["n"])
        counts["dead"] = int(dead["n"]) if dead else 0
        return counts

    def find_by_key(self, key: str, *, tenant: str = "", kinds: Any = None) -> builtins.list[Task]:
        """Tasks whose idempotency key is exactly ``key`` in ``tenant``, for each of ``kinds``
        (default: the registered kinds): one unique-index lookup per kind."""
        validate.filter_text(key, "key")
        validate.filter_text(tenant, "tenant")
        names = sorted(set(kinds if kinds is not None else self._core.kinds))
        for kind in names:
            validate.filter_text(kind, "kind")
        out: builtins.list[Task] = []
        with self._driver.transaction(write=False) as tx:
            for kind in names:
                for r in self._driver.view_task_by_key(tx, tenant=tenant, kind=kind, key=key):
                    out.append(task_from_row(r))
        return sorted(out, key=lambda t: -int(t.id))

    def dead_preview(
        self,
        *,
        reason: str | None = None,
        kind: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """Exactly the dead tasks ``replay_dead`` would touch with the same filters, read with
        the same query, and ``until`` frozen at the database clock: replaying with
        ``until=result["until"]`` and ``limit=len(result["tasks"])`` touches these tasks and no
        task that died after the preview. ``effects`` maps each task id to the effects the
        replay would perform again (``again``: no confirmed receipt) and those it would skip
        (``skip``: confirmed, with the provider ids their results name)."""
        validate.batch_filters(reason=reason, kind=kind, limit=limit)
        start = parse_time(since, "since") if since is not None else None
        end = parse_time(until, "until") if until is not None else None
        with self._driver.transaction(write=False) as tx:
            now = self._driver.db_now(tx)
            # strictly after every task dead by now: ``until`` is exclusive
            frozen = (
                min(end, now + timedelta(milliseconds=1))
                if end
                else now + timedelta(milliseconds=1)
            )
            ids = [
                r["id"]
                for r in self._driver.task_dead_select(
                    tx, reason=reason, kind=kind, since=start, until=frozen, limit=limit
                )
            ]
            rows = {r["id"]: r for r in self._driver.view_tasks_by_ids(tx, ids=json.dumps(ids))}
            tasks = [task_from_row(rows[i]) for i in ids if i in rows]
            recorded = self._driver.effect_list_for_tasks(tx, ids=json.dumps(ids)) if ids else []
        # per task, the effects a replay performs again and those it skips (confirmed)
        split = replays.split_effects(recorded)
        effects = {t.id: split.get(t.id, {"again": [], "skip": []}) for t in tasks}
        return {"tasks": tasks, "until": frozen, "since": start, "now": now, "effects": effects}

    def activity(
        self, *, window: float = 3600.0, bucket: float = 300.0, exact: bool = False
    ) -> dict[str, Any]:
        """Arrivals and completions per queue in ``window / bucket`` buckets ending now, oldest
        first: ``{"since", "bucket", "queues": {queue: {"arrivals": [...], "completions":
        [...]}}}``. One grouped query on the transitions' time index. Unless ``exact``, at
        most the newest ``stats.WINDOW_TRANSITIONS`` transitions are read: when the window
        holds more, ``complete_since`` (otherwise ``since``) is the time from which the
        buckets are complete (older ones count nothing) and ``capped`` is true."""
        window = validate.seconds(window, "window", positive=True)
        bucket = validate.seconds(bucket, "bucket", positive=True)
        if window / bucket > 1000:
            raise ValueError("window and bucket must be positive, at most 1000 buckets")
        n = int(-(-window // bucket))
        with self._driver.transaction(write=False) as tx:
            now = self._driver.db_now(tx)
            since = now - timedelta(seconds=n * bucket)
            # the bound of stats' window: at most that many transitions read
            bounded = None if exact else stats_bounds.bounded_start(self._driver, tx, since)
            start = since if bounded is None else bounded
            rows = self._driver.view_activity(
                tx,
                since=self._driver.encode_time(since),
                bucket=bucket,
                start=None if bounded is None else self._driver.encode_time(bounded),
            )
        queues: dict[str, dict[str, builtins.list[int]]] = {}
        for r in rows:
            b = bucket_index(r["bucket"], n)
            if b is None:
                continue
            q = queues.setdefault(r["queue"], {"arrivals": [0] * n, "completions": [0] * n})
            q["arrivals"][b] += int(r["arrivals"] or 0)
            q["completions"][b] += int(r["completions"] or 0)
        return {
            "since": since,
            "now": now,
            "bucket": bucket,
            "queues": queues,
            "complete_since": start,
            "capped": start != since,
        }

    def transitions_between(self, after: datetime | None, *, lag: float = 0.0) -> dict[str, Any]:
        """What the transition log gained in ``(after, upto]``, ``upto`` being the database
        clock minus ``lag`` seconds (room for transactions that commit after their time was
        taken): ``upto``, the ``after`` of the next call; ``counts`` (queue, kind, reason,
        to_state, n); ``runs`` and ``waits`` (queue, kind, seconds: outcome − the claim before
        it, claimed − due). ``after=None`` reads only ``upto`` (a reader starts there). The
        range is read through the log's time index: the cost follows the rows appended, never
        the size of the log. The counters of ``GET /metrics``."""
        lag = validate.seconds(lag, "lag")
        with self._driver.transaction(write=False) as tx:
            upto = self._driver.db_now(tx) - timedelta(seconds=lag)
            out: dict[str, Any] = {"upto": upto, "counts": [], "runs": [], "waits": []}
            if after is None or upto <= after:
                out["upto"] = upto if after is None else after
                return out
            span = {
                "after": self._driver.encode_time(after),
                "upto": self._driver.encode_time(upto),
            }
            out["counts"] = [dict(r) for r in self._driver.view_counts_between(tx, **span)]
            for key, read in (
                ("runs", self._driver.view_runs_between),
                ("waits", self._driver.view_waits_between),
            ):
                out[key] = [
                    (r["queue"], r["kind"], float(r["seconds"]))
                    for r in read(tx, **span)
                    if r["seconds"] is not None
                ]
        return out


def bucket_index(raw: Any, n: int) -> int | None:
    """The chart bucket (0 oldest … ``n - 1`` newest) of a transition, from the store's
    ``(at - since) // bucket``; ``None`` outside the window. A transition stamped at the very
    ``now`` of the look (times are kept to the millisecond) lands on ``n``: it is the newest
    bucket's, not past the end."""
    b = int(raw)
    if b == n:
        return n - 1
    return b if 0 <= b < n else None


def _step(r: Row) -> dict[str, Any]:
    """One recorded step or effect as ``App.steps`` shows it."""
    return {
        "name": r["name"],
        "effect": bool(r["is_effect"]),
        "status": r["status"],
        "effect_key": r["effect_key"],
        "result": r["result"],
        "attempt": r["attempt"],
        "error": r["error"],
        "created_at": r["created_at"],
        "confirmed_at": r["confirmed_at"],
    }
