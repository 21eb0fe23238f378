"""The parts of ``App`` for dead letters (§9, §16.6): replay, batch replay as recorded *replay
runs* that go batch by batch and stop when their replayed tasks die again, and the dead-letter
view with its evidence. Mixed into ``App``.

How a run observes its tasks across batches: after each batch (but the last) it polls the
store every ``SETTLE_POLL`` seconds until every task it replayed so far has settled (is no
longer queued, leased or waiting; awaiting a receipt counts as settled), or until
``stop_after_failures`` of them are dead again — which stops the run at once. A batch that has
not settled within ``batch_timeout`` seconds (no worker running, say) stops the run as
``not_settled``: a run never waits forever, and without workers it replays one batch only.
What it did not replay is still dead; replaying again with the run's recorded ``until``
continues with exactly those tasks (tasks that died again after the run started are not
picked up by that ``until``).
"""

from __future__ import annotations

import builtins
import json
import time
from datetime import datetime, timedelta
from typing import Any

from ..core import replays, transition
from ..model import validate
from ..model.errors import IllegalTransition
from ..model.machine import Reason, State
from ..model.models import Task, iso, task_from_row
from ..model.timeparse import parse_time
from ..store.base import Driver, Move, Row, Tx
from .core import AppCore, _require_text

#: How often a run looks at its replayed tasks while it waits for a batch to settle.
SETTLE_POLL = 0.1
#: How long a run waits, by default, for a batch to settle before it stops (``not_settled``).
DEFAULT_BATCH_TIMEOUT = 300.0
#: Recorded runs ``replay_runs`` lists by default, newest first.
RUNS_LIMIT = 50


class ReplayAPI(AppCore):
    _driver: Driver

    # -- one task --------------------------------------------------------------------------------
    def replay(self, task_id: str | int, *, by: str, note: str) -> Task:
        """``dead`` → ``queued`` (edge 19): attempts start again, ``replay_count`` += 1."""
        _require_text(by, "by")
        _require_text(note, "note")
        with self._driver.transaction() as tx:
            return task_from_row(self._replay(tx, task_id, by, note))

    def _replay(
        self, tx: Tx, task_id: str | int, by: str, note: str, run_id: int | None = None
    ) -> Row:
        """Replay one dead task (and its dead children) in ``tx``; the row after it. With
        ``run_id`` each ``replayed`` transition names the replay run in its data."""
        row = self._row(tx, task_id)
        if row["state"] != State.DEAD:
            raise IllegalTransition(str(row["id"]), row["state"], "replay (only dead tasks)")
        children = self._driver.children_list(tx, id=row["id"])
        for child in children:  # edge 21: replaying a parent replays its dead children
            if child["state"] == State.DEAD:
                self._replay(tx, child["id"], by, note, run_id)
        moved = transition.apply(
            self._driver,
            tx,
            Move(
                task_id=row["id"],
                from_state=State.DEAD,
                to_state=State.WAITING if children else State.QUEUED,
                reason=Reason.REPLAYED,
                actor=by,
                note=note,
                run_in=0.0,
                reset_attempts=True,
                replay=True,
                data={"replay_run": run_id} if run_id is not None else {},
            ),
        )
        if moved is None:  # pragma: no cover - writes are serialised in this transaction
            raise IllegalTransition(str(row["id"]), row["state"], "replay")
        self._driver.notify_queued(tx, row["queue"])
        return self._row(tx, task_id)

    # -- batch replay: a recorded run ---------------------------------------------------------
    def replay_dead(
        self,
        *,
        reason: str | None = None,
        kind: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        by: str,
        note: str,
        limit: int | None = None,
        per_second: float | None = None,
        batch_size: int | None = None,
        stop_after_failures: int | None = None,
        batch_timeout: float = DEFAULT_BATCH_TIMEOUT,
    ) -> builtins.list[tuple[str, str]]:
        """Batch replay as a formal migration: dead tasks by reason code and the time they
        became dead (``since`` inclusive, ``until`` exclusive, frozen at the database clock
        when the call starts); each gets its own ``replayed`` transition naming the run, at
        most ``per_second`` a second. Each call is a *replay run* (``replay_runs``): with
        ``batch_size`` it replays that many, waits for them to settle (at most
        ``batch_timeout`` seconds), and goes on — or stops once ``stop_after_failures`` of its
        replayed tasks are dead again (that needs ``batch_size``). Returns ``(task id, new
        state)`` for each task it touched."""
        _require_text(by, "by")
        _require_text(note, "note")
        validate.batch_filters(reason=reason, kind=kind, limit=limit)
        if per_second is not None:
            validate.rate(per_second, "per_second")
        if batch_size is not None:
            validate.integer(batch_size, "batch_size", 1, validate.MAX_BATCH)
        if stop_after_failures is not None:
            validate.integer(stop_after_failures, "stop_after_failures", 1, validate.MAX_BATCH)
            if batch_size is None:
                raise ValueError(
                    "stop_after_failures needs batch_size: a run looks at its replayed tasks "
                    "between batches"
                )
        timeout = validate.seconds(batch_timeout, "batch_timeout", positive=True)
        start = parse_time(since, "since") if since is not None else None
        end = parse_time(until, "until") if until is not None else None
        with self._driver.transaction() as tx:
            now = self._driver.db_now(tx)
            # tasks dead by now, no later: ``until`` is exclusive (as ``dead_preview`` freezes it)
            soon = now + timedelta(milliseconds=1)
            cut = min(end, soon) if end else soon
            ids = [
                r["id"]
                for r in self._driver.task_dead_select(
                    tx, reason=reason, kind=kind, since=start, until=cut, limit=limit
                )
            ]
            recorded = {
                "reason": reason,
                "kind": kind,
                "since": iso(start) if start else None,
                "until": iso(cut),
                "limit": limit,
                "per_second": per_second,
                "batch_timeout": timeout,
            }
            created = self._driver.replay_run_insert(
                tx,
                actor=by,
                note=note,
                data=json.dumps(recorded),
                batch_size=batch_size,
                stop_after_failures=stop_after_failures,
                total=len(ids),
            )
            assert created is not None
            run_id = int(created["id"])
            self._driver.replay_run_tasks_insert(tx, run_id=run_id, ids=json.dumps(ids))
        try:
            return self._replay_batches(
                run_id, ids, by, note, per_second, batch_size, stop_after_failures, timeout
            )
        except BaseException:
            self._finish_run(run_id, replays.INTERRUPTED, quiet=True)
            raise

    def _replay_batches(
        self,
        run_id: int,
        ids: builtins.list[Any],
        by: str,
        note: str,
        per_second: float | None,
        batch_size: int | None,
        stop_after_failures: int | None,
        timeout: float,
    ) -> builtins.list[tuple[str, str]]:
        out: builtins.list[tuple[str, str]] = []
        pace = 1.0 / per_second if per_second else 0.0
        next_at = time.monotonic()
        position = 0
        for number, batch in enumerate(replays.batches(ids, batch_size)):
            if number:
                code = self._settle(run_id, stop_after_failures, timeout)
                if code is not None:
                    self._finish_run(run_id, code)
                    return out
            for task_id in batch:
                position += 1
                if pace:
                    wait = next_at - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    next_at = max(next_at, time.monotonic()) + pace
                out.append(self._replay_in_run(run_id, position, task_id, by, note))
            with self._driver.transaction() as tx:
                self._driver.replay_run_progress(tx, id=run_id, replayed=0, skipped=0, batches=1)
        self._finish_run(run_id, None)
        return out

    def _replay_in_run(
        self, run_id: int, position: int, task_id: Any, by: str, note: str
    ) -> tuple[str, str]:
        """One task of a run, its mark and the run's progress in one transaction."""
        try:
            with self._driver.transaction() as tx:
                row = self._replay(tx, task_id, by, note, run_id)
                self._driver.replay_run_task_mark(
                    tx, run_id=run_id, position=position, seq=row["seq"]
                )
                self._driver.replay_run_progress(tx, id=run_id, replayed=1, skipped=0, batches=0)
            return str(row["id"]), str(row["state"])
        except IllegalTransition as exc:  # replayed or moved by someone else meanwhile
            with self._driver.transaction() as tx:
                self._driver.replay_run_progress(tx, id=run_id, replayed=0, skipped=1, batches=0)
            return str(task_id), exc.current_state.value

    def _observe(self, run_id: int) -> tuple[int, int]:
        with self._driver.transaction(write=False) as tx:
            seen = self._driver.replay_run_observe(tx, id=run_id)
        return (int(seen["died"] or 0), int(seen["open"] or 0)) if seen else (0, 0)

    def _settle(self, run_id: int, stop_after_failures: int | None, timeout: float) -> str | None:
        """Wait for the run's replayed tasks to settle; why the run stops now, if it does."""
        deadline = time.monotonic() + timeout
        while True:
            died, still_open = self._observe(run_id)
            timed_out = time.monotonic() >= deadline
            if timed_out or replays.settled(
                died=died, still_open=still_open, stop_after_failures=stop_after_failures
            ):
                return replays.stop_code(
                    died=died,
                    still_open=still_open,
                    stop_after_failures=stop_after_failures,
                    timed_out=timed_out,
                )
            time.sleep(min(SETTLE_POLL, max(deadline - time.monotonic(), 0.0)))

    def _finish_run(self, run_id: int, code: str | None, *, quiet: bool = False) -> None:
        try:
            died, _ = self._observe(run_id)
            with self._driver.transaction() as tx:
                self._driver.replay_run_finish(
                    tx,
                    id=run_id,
                    state=replays.STOPPED if code else replays.COMPLETED,
                    stop_code=code,
                    died=died,
                )
        except Exception:
            if not quiet:
                raise  # an interrupted run whose store is gone stays "running" in the record

    def replay_runs(
        self, *, limit: int = RUNS_LIMIT, run_id: int | None = None
    ) -> builtins.list[dict[str, Any]]:
        """The recorded replay runs, newest first (or the one ``run_id``): who and why, the
        filter, ``total`` selected, ``replayed`` and ``skipped`` (moved by someone else) so
        far, ``batches`` done, ``state`` (``running``, ``completed``, ``stopped``),
        ``stop_code`` and ``stop_reason`` in words, ``died_again`` (what the run saw when it
        ended) and ``died_now`` (its replayed tasks dead again now)."""
        validate.integer(limit, "limit", 1, validate.MAX_LIMIT)
        if run_id is not None:
            validate.integer(run_id, "run_id", 1, 2**63 - 1)
        with self._driver.transaction(write=False) as tx:
            rows = self._driver.replay_run_list(tx, id=run_id, limit=limit)
        return [run_from_row(r) for r in rows]

    # -- the dead-letter view with its evidence ----------------------------------------------
    def dead(self, *, tasks: int = 0) -> builtins.list[dict[str, Any]]:
        """Dead tasks that still need a person, grouped by reason code and kind: count, oldest
        age, the code versions that failed them, their final error categories, the range of
        their attempts, and the first and last failure among them. With ``tasks`` each group
        also lists its newest ``tasks`` dead tasks with their own evidence (``evidence``):
        final error category, attempts, code version, input reference (idempotency key or
        payload hash, never the payload), provider ids from their effects and receipt, first
        and last failure. Two statements (groups, then the picked tasks) and one for their
        effects."""
        validate.integer(tasks, "tasks", 0, validate.MAX_LIMIT)
        with self._driver.transaction(write=False) as tx:
            now = self._driver.db_now(tx)
            rows = self._driver.dead_groups(tx)
            picked = (
                self._driver.dead_tasks_evidence(tx, reason=None, kind=None, per_group=tasks)
                if tasks and rows
                else []
            )
            effects = (
                self._driver.effect_list_for_tasks(
                    tx, ids=json.dumps([int(p["id"]) for p in picked])
                )
                if picked
                else []
            )
        by_task: dict[str, builtins.list[Row]] = {}
        for e in effects:
            by_task.setdefault(str(e["task_id"]), []).append(e)
        listed: dict[tuple[str, str], builtins.list[dict[str, Any]]] = {}
        for p in picked:
            listed.setdefault((p["reason"], p["kind"]), []).append(
                evidence(p, by_task.get(str(p["id"]), []))
            )
        return [
            {
                "reason": r["reason"],
                "kind": r["kind"],
                "count": r["n"],
                "oldest_age": (now - r["oldest"]).total_seconds() if r["oldest"] else None,
                "versions": sorted(set((r["versions"] or "?").split(","))),
                "categories": sorted(set((r["categories"] or "-").split(","))),
                "attempts": {"min": r["attempts_min"], "max": r["attempts_max"]},
                "first_failure": r["first_failure"],
                "last_failure": r["last_failure"],
                "tasks": listed.get((r["reason"], r["kind"]), []),
            }
            for r in rows
        ]


def run_from_row(r: Row) -> dict[str, Any]:
    data = r["data"] if isinstance(r["data"], dict) else json.loads(r["data"] or "{}")
    run: dict[str, Any] = {
        "id": int(r["id"]),
        "by": r["actor"],
        "note": r["note"],
        "filter": data,
        "batch_size": r["batch_size"],
        "stop_after_failures": r["stop_after_failures"],
        "total": int(r["total"]),
        "replayed": int(r["replayed"]),
        "skipped": int(r["skipped"]),
        "batches": int(r["batches"]),
        "state": r["state"],
        "stop_code": r["stop_code"],
        "died_again": int(r["died_again"]),
        "died_now": int(r["died_now"] or 0),
        "started_at": r["created_at"],
        "updated_at": r["updated_at"],
        "finished_at": r["finished_at"],
    }
    run["stop_reason"] = replays.stop_reason(run)
    return run


def evidence(row: Row, effects: builtins.list[Row]) -> dict[str, Any]:
    """One dead task's evidence from its ``dead_tasks_evidence`` row and its effects."""
    providers: builtins.list[str] = []
    for e in effects:
        if e["status"] == "confirmed":
            providers += [p for p in replays.provider_ids(e["result"]) if p not in providers]
    if row["receipt_id"] and row["receipt_id"] not in providers:
        providers.append(row["receipt_id"])
    key = row["idempotency_key"]
    return {
        "id": str(row["id"]),
        "kind": row["kind"],
        "queue": row["queue"],
        "tenant": row["tenant"],
        "reason": row["reason"],
        "category": row["category"],
        "attempts": row["attempts"],
        "max_attempts": row["max_attempts"],
        "replay_count": row["replay_count"],
        "version": row["version"],
        "input_ref": f"key:{key}" if key is not None else f"sha256:{row['payload_hash']}",
        "idempotency_key": key,
        "payload_hash": row["payload_hash"],
        "provider_ids": providers,
        "effects": [
            {"name": e["name"], "status": e["status"], "effect_key": e["effect_key"]}
            for e in effects
        ],
        "first_failure": row["first_failure"],
        "last_failure": row["last_failure"],
        "died_at": row["finished_at"],
    }
