"""The part of ``App`` for dead letters (docs/operations.md): replay, batch replay as recorded
*replay runs* that go batch by batch and stop when their replayed tasks die again, and the
dead-letter view with its evidence. Held by ``App``.

A run goes one step at a time (``services/replayer.py``). ``replay_dead`` drives its run from
the calling process: after each batch (but the last) it polls every ``SETTLE_POLL`` seconds
until every task it replayed so far has settled (is no longer queued, leased or waiting;
awaiting a receipt counts as settled), or until ``stop_after_failures`` of them are dead again —
which stops the run at once — beating the run's heartbeat meanwhile. A batch that has not
settled within ``batch_timeout`` seconds (no worker running, say) stops the run as
``not_settled``: a run never waits forever, and without workers it replays one batch only. A
caller that dies stops beating, and the sweep stops its run as ``interrupted``.
``start_replay_run`` (the dashboard, the API) takes the first step only: the workers' sweep
takes the steps after it. What a run did not replay is still dead; replaying again with the
run's recorded ``until`` continues with exactly those tasks (tasks that died again after the
run started are not picked up by that ``until``).
"""

from __future__ import annotations

import builtins
import json
import logging
import time
from datetime import datetime, timedelta
from typing import Any

from ..core import replays
from ..model import validate
from ..model.machine import State
from ..model.models import Task, iso, task_from_row
from ..model.timeparse import parse_time
from ..services import replayer
from ..store.base import Row, Tx
from .core import Part, _require_text

log = logging.getLogger("jobtrail.app.replays")

#: How often a run looks at its replayed tasks while it waits for a batch to settle.
SETTLE_POLL = 0.1
#: How long a run waits, by default, for a batch to settle before it stops (``not_settled``).
DEFAULT_BATCH_TIMEOUT = 300.0
#: Recorded runs ``replay_runs`` lists by default, newest first.
RUNS_LIMIT = 50


class Replays(Part):
    """Replay one task, replay runs, and the dead letters with their evidence."""

    # -- one task --------------------------------------------------------------------------------
    def replay(
        self, task_id: str | int, *, by: str, note: str, from_step: str | None = None
    ) -> Task:
        """``dead`` → ``queued`` (edge 19): attempts start again, ``replay_count`` += 1.

        With ``from_step`` the handler resumes at that step: the recorded outcome of the step
        and of everything the task recorded after it is forgotten (kept in the history as
        superseded: ``steps(..., superseded=True)``), so those steps and effects run again —
        ``replay_preview`` says which effects. A name the task has not recorded is a
        ``ValueError`` naming it, and nothing is written."""
        _require_text(by, "by")
        _require_text(note, "note")
        step = replays.check_from_step(from_step)
        with self._driver.transaction() as tx:
            return task_from_row(self._replay(tx, task_id, by, note, from_step=step))

    def _replay(
        self,
        tx: Tx,
        task_id: str | int,
        by: str,
        note: str,
        run_id: int | None = None,
        *,
        from_step: str | None = None,
    ) -> Row:
        """Replay one dead task (and its dead children) in ``tx``; the row after it."""
        return replayer.replay_task(
            self._driver, tx, self._core._row(tx, task_id), by, note, run_id, from_step
        )

    def replay_preview(self, task_id: str | int, *, from_step: str | None = None) -> dict[str, Any]:
        """What ``replay(task_id, from_step=...)`` would do, writing nothing: ``task``,
        ``from_step``, ``forgotten`` (the names it would forget, in recorded order: the handler
        runs them again) and ``effects`` — ``again``: the effects that would run again (each
        forgotten one, ``forgotten`` true, and each intent without a confirmed receipt),
        ``skip``: the confirmed effects it keeps (with the provider ids their results name).
        An unknown step name is a ``ValueError`` as for ``replay``; a task that is not dead is
        previewed all the same (``replay`` would refuse it: ``replayable`` false)."""
        step = replays.check_from_step(from_step)
        with self._driver.transaction(write=False) as tx:
            row = self._core._row(tx, task_id)
            recorded = self._driver.step_list_recorded(tx, id=row["id"])
        forget = replays.forget_from(recorded, step, str(row["id"])) if step is not None else []
        names = [str(r["name"]) for _, r in forget]
        task = task_from_row(row)
        return {
            "task": task,
            "replayable": task.state == State.DEAD,
            "from_step": step,
            "forgotten": names,
            "effects": replays.replay_effects(recorded, names),
        }

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
        state)`` for each task it touched.

        The calling process drives the run to its end and beats its heartbeat meanwhile; if
        the process dies, a worker's sweep (or ``replay_runs``) stops the run as
        ``interrupted`` once it has not beaten for ``STALE_AFTER`` seconds."""
        run_id, me = self._open_run(
            reason, kind, since, until, by, note, limit, per_second, batch_size,
            stop_after_failures, batch_timeout, detached=False,
        )  # fmt: skip
        try:
            return self._drive(run_id, me, per_second)
        except BaseException:
            try:
                replayer.finish_interrupted(self._driver, run_id, me)
            except Exception:  # the store is gone too: the sweep will find the run stale
                pass
            raise

    def start_replay_run(
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
    ) -> dict[str, Any]:
        """``replay_dead`` as a *detached* run, for callers that cannot wait (the dashboard,
        ``POST /api/replay-runs``): the same arguments, checks and record, but this call takes
        only the run's first step (its first batch, at most ``STEP_MAX`` tasks or one second's
        worth at ``per_second``) and returns the run's record (``replay_runs``) with
        ``touched``, the ``(task id, new state)`` of that step. The sweep of every worker
        process carries the run on, step by step, with the same pace and stop conditions; the
        run needs no process of its own and goes on across restarts."""
        run_id, me = self._open_run(
            reason, kind, since, until, by, note, limit, per_second, batch_size,
            stop_after_failures, batch_timeout, detached=True,
        )  # fmt: skip
        try:
            first = replays.step_budget(per_second, None)
            touched = replayer.step(self._driver, run_id, me, budget=first).touched
        finally:
            with self._driver.transaction() as tx:
                self._driver.replay_run_release(tx, id=run_id, driver=me)
        with self._driver.transaction(write=False) as tx:
            [row] = self._driver.replay_run_list(tx, id=run_id, limit=1)
        return {**run_from_row(row), "touched": touched}

    def _open_run(
        self,
        reason: str | None,
        kind: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
        by: str,
        note: str,
        limit: int | None,
        per_second: float | None,
        batch_size: int | None,
        stop_after_failures: int | None,
        batch_timeout: float,
        *,
        detached: bool,
    ) -> tuple[int, str]:
        """Check a run's arguments, pick its tasks and record it; its id and its driver's name
        (this process, which takes at least its first step)."""
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
            me = replayer.driver_name("starter" if detached else "caller")
            created = self._driver.replay_run_insert(
                tx,
                actor=by,
                note=note,
                data=json.dumps(recorded),
                batch_size=batch_size,
                stop_after_failures=stop_after_failures,
                total=len(ids),
                driver=me,
                detached=detached,
            )
            assert created is not None
            run_id = int(created["id"])
            self._driver.replay_run_tasks_insert(tx, run_id=run_id, ids=json.dumps(ids))
        return run_id, me

    def _drive(
        self, run_id: int, me: str, per_second: float | None
    ) -> builtins.list[tuple[str, str]]:
        """Step the run from this process until it ends: one task a step at ``per_second``,
        a whole batch otherwise; between batches poll every ``SETTLE_POLL`` seconds, beating
        the heartbeat meanwhile."""
        out: builtins.list[tuple[str, str]] = []
        heart = replayer.Heart(self._driver, run_id, me)
        pace = 1.0 / per_second if per_second else 0.0
        next_at = time.monotonic()
        while True:
            if pace and (wait := next_at - time.monotonic()) > 0:
                heart.rest(wait)
            done = replayer.step(self._driver, run_id, me, budget=1 if pace else None)
            out += done.touched
            if done.done:
                return out
            if done.touched:
                heart.progressed()
                next_at = max(next_at, time.monotonic()) + pace
            else:  # waiting for the previous batch to settle
                heart.rest(SETTLE_POLL)

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
        try:  # a run whose driver is gone is shown for what it is, workers or not
            replayer.tend(self._driver, detached=False, role="reader")
        except Exception as exc:  # a read-only store or role: list what is recorded
            log.warning("replay runs: could not stop stale runs (%s)", type(exc).__name__)
        with self._driver.transaction(write=False) as tx:
            rows = self._driver.replay_run_list(tx, id=run_id, limit=limit)
        return [run_from_row(r) for r in rows]

    # -- the dead-letter view with its evidence ----------------------------------------------
    def dead(self, *, tasks: int = 0) -> builtins.list[dict[str, Any]]:
        """Dead tasks that still need a person, grouped by reason code and kind: count, oldest
        age, the code versions that failed them, their final error categories, the range of
        their attempts, the first and last failure among them, and the last error (``last_error``:
        the newest dead task's error text, its first line bounded, beside its category
        ``last_error_category``). With ``tasks`` each group also lists its newest ``tasks`` dead
        tasks with their own evidence (``evidence``): final error category and error text,
        attempts, code version, input reference (idempotency key or payload hash, never the
        payload), provider ids from their effects and receipt, first and last failure. Two
        statements (groups, then the picked tasks: at least the newest of each group) and one
        for their effects."""
        validate.integer(tasks, "tasks", 0, validate.MAX_LIMIT)
        with self._driver.transaction(write=False) as tx:
            now = self._driver.db_now(tx, big_read=True)
            rows = self._driver.dead_groups(tx)
            newest = (
                self._driver.dead_tasks_evidence(
                    tx, reason=None, kind=None, per_group=max(tasks, 1)
                )
                if rows
                else []
            )
            picked = newest if tasks else []
            effects = (
                self._driver.effect_list_for_tasks(
                    tx, ids=json.dumps([int(p["id"]) for p in picked])
                )
                if picked
                else []
            )
        last: dict[tuple[str, str], Row] = {}
        for p in newest:  # ordered newest first within each group
            last.setdefault((p["reason"], p["kind"]), p)
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
                "last_error_category": _get(last.get((r["reason"], r["kind"])), "category"),
                "last_error": replays.first_line(_get(last.get((r["reason"], r["kind"])), "error")),
                "tasks": listed.get((r["reason"], r["kind"]), []),
            }
            for r in rows
        ]


def _get(row: Row | None, key: str) -> Any:
    return None if row is None else row[key]


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
        "driver": r["driver"],
        "detached": bool(r["detached"]),
        "heartbeat_at": r["heartbeat_at"],
        "stopped_by": r["stopped_by"],
        "unattended_for": replays.unattended_for(
            bool(r["detached"]), r["state"], r.get("beat_age")
        ),
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
        "error": replays.first_line(row["error"]),
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
