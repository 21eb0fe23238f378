"""The sweeper: moves tasks whose holder stopped renewing (edges 7, 8 and 18), and tends replay
runs (``replayer.tend``): stops those whose driver stopped beating, steps the detached ones;
and wakes durable handlers whose wait passed its deadline (``wait_timed_out``).

It runs inside every worker and as ``jobtrail sweep``. Like every other actor it only moves a
task by a conditional update: the lease must still be expired and held by the same owner and
attempt it saw, so a worker that renewed or finished in between wins. The old process is never
asked to clean up.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence

from ..core import replays, transition
from ..core.decide import decide_expired
from ..core.suspension import time_out_waits
from ..model.kinds import KindSpec
from ..model.machine import TERMINAL, Reason, State
from ..store.base import Driver, Move
from .receipts import sweep_receipts
from .replayer import tend

log = logging.getLogger("jobtrail.services.sweeper")

BATCH = 200


def sweep(
    driver: Driver,
    kinds: dict[str, KindSpec] | None = None,
    *,
    batch: int = BATCH,
    replay_stale: float = replays.STALE_AFTER,
    ended: Callable[[Sequence[int]], None] | None = None,
) -> dict[str, int]:
    """One pass over expired leases and receipt deadlines, then the replay runs; returns how
    many tasks moved, by reason code. ``kinds`` gives the ``check_receipt`` hooks (absent kinds
    have none); a replay run whose driver has not beaten for ``replay_stale`` seconds is taken
    for gone. ``ended`` is given the ids of the tasks this pass ended (a terminal state), after
    each batch's commit: their runs ended without their handlers."""
    moved: Counter[str] = Counter()
    while True:
        finished: list[int] = []
        with driver.transaction() as tx:
            rows = driver.task_expired(tx, batch)
            for row in rows:
                state = State(row["state"])
                decision = decide_expired(
                    state=state,
                    reentrant=bool(row["reentrant"]),
                    attempts=row["attempts"],
                    max_attempts=row["max_attempts"],
                )
                move = transition.move_for(
                    decision,
                    task_id=row["id"],
                    from_state=state,
                    actor="sweeper",
                    expired_owner=row["lease_owner"],
                    attempt=row["attempts"],
                    data={"owner": row["lease_owner"]},
                )
                if transition.apply(driver, tx, move) is not None:
                    moved[decision.reason] += 1
                    if decision.to_state in TERMINAL:
                        finished.append(row["id"])
                    log.info(
                        "swept task %s: %s -> %s (%s)",
                        row["id"],
                        state,
                        decision.to_state,
                        decision.reason,
                    )
        if finished and ended is not None:
            ended(finished)
        if len(rows) < batch:
            break
    moved.update(sweep_receipts(driver, kinds or {}, batch=batch, ended=ended))
    timed_out = time_out_waits(driver, batch=batch)  # durable handlers' wait deadlines
    if timed_out:
        moved["wait_timed_out"] += timed_out
    moved.update(sweep_expired(driver, batch=batch, ended=ended))
    tend(driver, stale=replay_stale)  # its own counts are logged; this returns tasks moved
    mark_ids(driver)
    return dict(moved)


#: seconds between two id marks of one process (the statement keeps one a minute for all)
MARK_EVERY = 60.0


def mark_ids(driver: Driver) -> None:
    """An id mark (``Driver.id_mark``) when this process has not made one for a minute."""
    if not driver.id_marks or time.monotonic() < driver.id_mark_due:
        return
    with driver.transaction() as tx:
        driver.id_mark(tx)
    driver.id_mark_due = time.monotonic() + MARK_EVERY


def sweep_expired(
    driver: Driver,
    *,
    batch: int = BATCH,
    ended: Callable[[Sequence[int]], None] | None = None,
) -> dict[str, int]:
    """Queued tasks past their expiry (``expires_in``/``expires_at``) → ``cancelled``
    (``expired``, edge 13e). No claim takes such a task (the claim skips it), so it was never
    handed to a handler; the guarded move loses to nothing but another sweeper."""
    moved: Counter[str] = Counter()
    while True:
        finished: list[int] = []
        with driver.transaction() as tx:
            ids = driver.task_expired_queued(tx, batch)
            for task_id in ids:
                move = Move(
                    task_id=task_id,
                    from_state=State.QUEUED,
                    to_state=State.CANCELLED,
                    reason=Reason.EXPIRED,
                    actor="sweeper",
                )
                if transition.apply(driver, tx, move) is not None:
                    moved[Reason.EXPIRED] += 1
                    finished.append(task_id)
                    log.info("swept task %s: queued -> cancelled (expired)", task_id)
        if finished and ended is not None:
            ended(finished)
        if len(ids) < batch:
            break
    return dict(moved)
