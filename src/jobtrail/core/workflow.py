"""Parents and children: the fixed aggregation rule, evaluated in the same transaction as
every child transition, and the release of the next sequential child.

The rule: any child ``dead`` → parent ``dead`` (``child_dead``); else any child not terminal →
``waiting``; else all ``succeeded`` → ``succeeded`` (``children_succeeded``); else
``cancelled`` (``children_cancelled``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from ..model.machine import TERMINAL, Reason, State
from ..store.base import Driver, Move, Row, Tx, dumps

#: ``run_at`` of a sequential child whose previous sibling has not succeeded yet.
NOT_YET = datetime(9999, 12, 31, tzinfo=UTC)


def aggregate(states: Sequence[State]) -> tuple[State, Reason | None]:
    """The parent's state for its children's states (pure)."""
    if any(s is State.DEAD for s in states):
        return State.DEAD, Reason.CHILD_DEAD
    if not states or any(s not in TERMINAL for s in states):
        return State.WAITING, None
    if all(s is State.SUCCEEDED for s in states):
        return State.SUCCEEDED, Reason.CHILDREN_SUCCEEDED
    return State.CANCELLED, Reason.CHILDREN_CANCELLED


def after_child_moved(
    driver: Driver, tx: Tx, child: Row, apply: Callable[[Driver, Tx, Move], Row | None]
) -> None:
    """Called by ``transition.apply`` after a child task moved to a terminal state."""
    if child["state"] == State.SUCCEEDED:
        for released in driver.task_release_next(tx, child["id"]):
            driver.notify_queued(tx, released["queue"])
    parent_id = child["parent_id"]
    parent = driver.task_lock(tx, id=parent_id)
    if parent is None or parent["state"] != State.WAITING:
        return
    wait = driver.durable_wait_get(tx, id=parent_id)
    if wait is not None and wait["wait_kind"] is not None:
        # a parent whose handler spawned it: the handler decides, never the rule below
        after_child_ended(driver, tx, wait, apply)
        return
    children = driver.children_list(tx, id=parent_id)
    target, reason = aggregate([State(c["state"]) for c in children])
    if reason is None:
        return
    # a chain (sequential: each child after the one before) succeeds with its children's
    # results, in order
    chained = target is State.SUCCEEDED and any(c.get("after_id") for c in children)
    results = dumps(driver.children_results(tx, parent_id)) if chained else None
    apply(
        driver,
        tx,
        Move(
            task_id=parent_id,
            from_state=State.WAITING,
            to_state=target,
            reason=reason,
            actor="system",
            data={"children": {str(c["id"]): c["state"] for c in children}},
            set_result=chained,
            result=results,
        ),
    )


def summary(children: list[Row]) -> str:
    """``render #2 succeeded, publish #3 cancelled``."""
    return ", ".join(f"{c['kind']} #{c['id']} {c['state']}" for c in children)


def after_child_ended(
    driver: Driver, tx: Tx, parent: Row, apply: Callable[[Driver, Tx, Move], Row | None]
) -> None:
    """A child of a suspended ``parent`` (locked, ``waiting``) ended: the parent's handler
    decides, never the workflow rule. When it waits for its children and every child it joins
    has ended, it moves ``waiting → queued`` (``children_finished``) in this transaction."""
    if parent["wait_kind"] != "children" or parent["last_reason"] != Reason.WAITING_FOR_CHILDREN:
        return
    joined = [int(i) for i in parent["wait_ids"] or []]
    states = {c["id"]: c["state"] for c in driver.durable_children(tx, id=parent["id"])}
    if all(states.get(i) in TERMINAL for i in joined):
        moved = apply(
            driver,
            tx,
            Move(
                task_id=parent["id"],
                from_state=State.WAITING,
                to_state=State.QUEUED,
                reason=Reason.CHILDREN_FINISHED,
                actor="system",
                run_in=0.0,
                data={"children": {str(i): states[i] for i in joined}},
            ),
        )
        if moved is not None:
            driver.notify_queued(tx, parent["queue"])
