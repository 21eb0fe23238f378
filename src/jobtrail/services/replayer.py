"""Replay runs advance here, one *step* at a time, whoever drives them.

A run is a row (``jobtrail_replay_runs``) and its ordered tasks; everything it needs to go on is
in the store: how far it got (``replayed + skipped``), when its latest batch went out
(``batch_at``), its filter, pace and stop conditions. A step reads that and does the one thing
due next: between batches, look at the replayed tasks (stop if enough died again or the batch
did not settle in time, wait if it has not settled yet); else replay the next tasks of the
current batch; at the end, finish. So a step is the same whoever takes it:

- an *attached* run (the CLI, ``App.replay_dead``) is stepped by the process that started it,
  which waits between steps and beats its heartbeat at least every ``HEARTBEAT`` seconds; when
  that process is gone (SIGKILL, power loss) and has not beaten for ``STALE_AFTER`` seconds, a
  worker's sweep (or a reader of the runs) stops it as ``interrupted``;
- a *detached* run (the dashboard) has no process of its own: the sweep of every worker process
  takes it (``replay_run_take``, one holder at a time), steps it once and lets it go, so it goes
  on across server and worker restarts; a holder that dies mid-step is taken over after
  ``STALE_AFTER``.

Only the run's current driver moves it (``replay_run_progress`` is guarded on it, in the same
transaction as the task's replay): a driver that was found stale and stopped replays nothing
more, even if it comes back.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core import replays, transition
from ..model.errors import IllegalTransition, TaskNotFound
from ..model.machine import Reason, State
from ..store.base import Driver, Move, Row, Tx

log = logging.getLogger("jobtrail.services.replayer")

#: How many running runs one sweep looks at.
RUNS_PER_SWEEP = 20


def driver_name(role: str) -> str:
    """A name for one driver of runs: its role, host and process, and a token of its own (two
    drivers in one process are two drivers)."""
    return f"{role}@{socket.gethostname()}:{os.getpid()}/{uuid.uuid4().hex[:6]}"


class RunLost(Exception):
    """The run is not this driver's any more (stopped as stale, or its step taken over): the
    transaction that raised it rolls back."""


def replay_task(
    driver: Driver,
    tx: Tx,
    row: Row,
    by: str,
    note: str,
    run_id: int | None,
    from_step: str | None = None,
) -> Row:
    """Replay one dead task (its ``task_get`` row) and its dead children in ``tx``; the row
    after it. With ``run_id`` each ``replayed`` transition names the replay run in its data.
    With ``from_step`` the task's recorded outcome of that step and of everything recorded
    after it is forgotten (moved to the superseded steps, marked with this replay), so the
    handler runs them again; the transition's data names them (``from_step``, ``superseded``).
    An unknown step name is a ``ValueError`` raised before anything is written."""
    if row["state"] != State.DEAD:
        raise IllegalTransition(str(row["id"]), row["state"], "replay (only dead tasks)")
    forget = (
        replays.forget_from(driver.step_list_recorded(tx, id=row["id"]), from_step, str(row["id"]))
        if from_step is not None
        else []
    )
    children = driver.children_list(tx, id=row["id"])
    for child in children:  # edge 21: replaying a parent replays its dead children
        if child["state"] == State.DEAD:
            again = driver.task_get(tx, child["id"])
            assert again is not None
            replay_task(driver, tx, again, by, note, run_id)
    moved = transition.apply(
        driver,
        tx,
        Move(
            task_id=row["id"],
            from_state=State.DEAD,
            to_state=State.WAITING if children and not _spawned(driver, tx, row) else State.QUEUED,
            reason=Reason.REPLAYED,
            actor=by,
            note=note,
            run_in=0.0,
            reset_attempts=True,
            replay=True,
            data=_replay_data(run_id, from_step, forget),
        ),
    )
    if moved is None:  # pragma: no cover - writes are serialised in this transaction
        raise IllegalTransition(str(row["id"]), row["state"], "replay")
    driver.notify_queued(tx, row["queue"])
    after = driver.task_get(tx, row["id"])
    if after is None:  # pragma: no cover - the row was just written in this transaction
        raise TaskNotFound(str(row["id"]))
    for position, step_row in forget:
        name = str(step_row["name"])
        driver.step_supersede(
            tx, id=row["id"], name=name, replay_seq=int(after["seq"]), position=position
        )
        driver.step_forget(tx, id=row["id"], name=name)
    return after


def _replay_data(
    run_id: int | None, from_step: str | None, forget: list[tuple[int, Mapping[str, Any]]]
) -> dict[str, Any]:
    """The ``replayed`` transition's data: the replay run, the step it replays from and the
    names it forgot (in recorded order)."""
    data: dict[str, Any] = {"replay_run": run_id} if run_id is not None else {}
    if from_step is not None:
        data["from_step"] = from_step
        data["superseded"] = [str(r["name"]) for _, r in forget]
    return data


def _spawned(driver: Driver, tx: Tx, row: Row) -> bool:
    """Whether the task's children were spawned by its handler (``ctx.spawn``): replayed, it
    runs its handler again (``queued``), which joins them, instead of waiting by the rule."""
    return any(s.get("record") == "spawn" for s in driver.step_list(tx, id=row["id"]))


@dataclass
class Step:
    """What one step did: the tasks it touched (id, new state), whether the run has ended (by
    this step or before it; also when it is no longer this driver's)."""

    touched: list[tuple[str, str]] = field(default_factory=list)
    done: bool = False


def step(driver: Driver, run_id: int, me: str, *, budget: int | None = None) -> Step:
    """Take the run one step further as its driver ``me``: replay at most ``budget`` tasks of the
    current batch (``None``: the rest of it; ``paced_budget`` for a detached run), or look at the
    previous batch and stop or wait, or finish."""
    with driver.transaction(write=False) as tx:
        run = driver.replay_run_get(tx, id=run_id)
    if run is None or run["state"] != replays.RUNNING or run["driver"] != me:
        return Step(done=True)
    total = int(run["total"])
    size = int(run["batch_size"] or max(total, 1))
    position = int(run["replayed"]) + int(run["skipped"])
    recorded = run["data"] if isinstance(run["data"], dict) else {}
    if position >= total:
        return Step(done=_finish(driver, run_id, me, None))
    if position % size == 0 and int(run["batches"]) > 0:  # between two batches
        died, still_open = observe(driver, run_id)
        saf = run["stop_after_failures"]
        timeout = float(recorded.get("batch_timeout") or 0.0)
        timed_out = float(run["batch_age"] or 0.0) >= timeout
        settled = replays.settled(died=died, still_open=still_open, stop_after_failures=saf)
        if not (timed_out or settled):
            return Step()  # not settled yet: wait
        code = replays.stop_code(
            died=died, still_open=still_open, stop_after_failures=saf, timed_out=timed_out
        )
        if code is not None:
            return Step(done=_finish(driver, run_id, me, code))
    batch_end = min(total, (position // size + 1) * size)
    n = batch_end - position if budget is None else min(budget, batch_end - position)
    if n <= 0:
        return Step()
    with driver.transaction(write=False) as tx:
        nexts = driver.replay_run_tasks_next(tx, run_id=run_id, after=position, limit=n)
    out = Step()
    try:
        for t in nexts:
            out.touched.append(
                _replay_one(driver, run, me, int(t["position"]), t["task_id"], batch_end)
            )
    except RunLost:
        out.done = True
        return out
    if position + len(nexts) >= total:
        out.done = _finish(driver, run_id, me, None)
    return out


def paced_budget(driver: Driver, run_id: int) -> int:
    """``step_budget`` for a detached run: its rate and the time since its last progress."""
    with driver.transaction(write=False) as tx:
        run = driver.replay_run_get(tx, id=run_id)
    if run is None:
        return 0
    recorded = run["data"] if isinstance(run["data"], dict) else {}
    return replays.step_budget(recorded.get("per_second"), run["progress_age"])


def _replay_one(
    driver: Driver, run: Row, me: str, position: int, task_id: Any, batch_end: int
) -> tuple[str, str]:
    """One task of a run: its replay, its mark and the run's progress in one transaction (the
    batch's last closes the batch). A task moved by someone else meanwhile is ``skipped``."""
    run_id, by, note = int(run["id"]), str(run["actor"]), str(run["note"])
    closes = 1 if position == batch_end else 0
    with driver.transaction() as tx:
        row = driver.task_get(tx, task_id)
        if row is None or row["state"] != State.DEAD:  # replayed, moved or purged meanwhile
            if not driver.replay_run_progress(
                tx, id=run_id, driver=me, replayed=0, skipped=1, batches=closes
            ):
                raise RunLost(run_id)
            return str(task_id), str(row["state"]) if row is not None else "missing"
        after = replay_task(driver, tx, row, by, note, run_id)
        driver.replay_run_task_mark(tx, run_id=run_id, position=position, seq=after["seq"])
        if not driver.replay_run_progress(
            tx, id=run_id, driver=me, replayed=1, skipped=0, batches=closes
        ):
            raise RunLost(run_id)  # rolls this task's replay back with it
    return str(after["id"]), str(after["state"])


def observe(driver: Driver, run_id: int) -> tuple[int, int]:
    """How many of the run's replayed tasks are dead again, and how many still open."""
    with driver.transaction(write=False) as tx:
        seen = driver.replay_run_observe(tx, id=run_id)
    return (int(seen["died"] or 0), int(seen["open"] or 0)) if seen else (0, 0)


def _finish(driver: Driver, run_id: int, me: str, code: str | None) -> bool:
    died, _ = observe(driver, run_id)
    with driver.transaction() as tx:
        driver.replay_run_finish(
            tx,
            id=run_id,
            driver=me,
            state=replays.STOPPED if code else replays.COMPLETED,
            stop_code=code,
            died=died,
        )
    return True


def finish_interrupted(driver: Driver, run_id: int, me: str) -> None:
    """The driver ``me`` stops its run as ``interrupted`` (Ctrl-C, its store failed)."""
    _finish(driver, run_id, me, replays.INTERRUPTED)


class Heart:
    """The heartbeat of one attached driver: ``rest`` waits and beats at least every
    ``HEARTBEAT`` seconds meanwhile."""

    def __init__(self, driver: Driver, run_id: int, me: str) -> None:
        self.driver, self.run_id, self.me = driver, run_id, me
        self.beat_at = time.monotonic()

    def progressed(self) -> None:
        self.beat_at = time.monotonic()  # progress beats (``replay_run_progress``)

    def rest(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            if now - self.beat_at >= replays.HEARTBEAT:
                with self.driver.transaction() as tx:
                    self.driver.replay_run_beat(tx, id=self.run_id, driver=self.me)
                self.beat_at = now
            left = until - now
            if left <= 0:
                return
            time.sleep(min(left, replays.HEARTBEAT))


# -- the sweep's part -------------------------------------------------------------------------
def tend(
    driver: Driver,
    *,
    stale: float = replays.STALE_AFTER,
    detached: bool = True,
    role: str = "sweeper",
) -> dict[str, int]:
    """What a sweep does for replay runs: stop attached runs whose driver stopped beating
    ``stale`` seconds ago (``interrupted``), and (with ``detached``) take each detached run
    nobody holds one step further. Returns counts (``replay_runs_interrupted``,
    ``replay_runs_stepped``)."""
    with driver.transaction(write=False) as tx:
        due = driver.replay_run_due(tx, stale=stale, limit=RUNS_PER_SWEEP)
    counts = {"replay_runs_interrupted": 0, "replay_runs_stepped": 0}
    if not due:
        return counts
    me = driver_name(role)  # recorded as ``stopped_by`` / a detached run's step driver
    for r in due:
        run_id = int(r["id"])
        try:
            if not r["detached"]:
                counts["replay_runs_interrupted"] += interrupt(driver, run_id, me, stale)
            elif detached:
                counts["replay_runs_stepped"] += advance(driver, run_id, me, stale)
        except Exception as exc:  # one run's trouble must not stop the sweep
            log.warning("replay run %s: step failed (%s)", run_id, type(exc).__name__)
    return {k: v for k, v in counts.items() if v}


def interrupt(driver: Driver, run_id: int, by: str, stale: float) -> int:
    """Stop one attached run whose driver has not beaten for ``stale`` seconds (guarded: a
    driver that beat in between keeps it); 1 when it stopped it."""
    died, _ = observe(driver, run_id)
    with driver.transaction() as tx:
        n = driver.replay_run_interrupt(tx, id=run_id, by=by, died=died, stale=stale)
    if n:
        log.warning("replay run %s stopped: its driver stopped beating %g s ago", run_id, stale)
    return int(n)


def advance(driver: Driver, run_id: int, me: str, stale: float) -> int:
    """Take a detached run, step it once at its pace, let it go; 1 when this sweep took it."""
    with driver.transaction() as tx:
        if not driver.replay_run_take(tx, id=run_id, driver=me, stale=stale):
            return 0  # another sweeper holds it
    try:
        step(driver, run_id, me, budget=paced_budget(driver, run_id))
    finally:
        with driver.transaction() as tx:
            driver.replay_run_release(tx, id=run_id, driver=me)
    return 1
