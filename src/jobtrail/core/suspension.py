"""Durable handlers, the store's side: a handler's suspension written by its worker, the
wake-ups (``event_received``, ``children_finished``, ``wait_timed_out``) and the cancel of a
suspended task — each a move through ``transition.apply`` in the transaction that decides it.

Races are closed by ordering inside the transactions: a suspension on an event takes the
event's lock (``Driver.durable_event_lock``) before it moves the task and then looks for the
event, as ``send_event`` takes the lock before it stores the event and looks for waiting tasks;
a suspension on children moves (locks) the parent row before it reads the children, as a child's
terminal move locks the parent before it reads its siblings. Whichever commits second sees the
other, so a task is never left waiting for something that has happened.
"""

from __future__ import annotations

import json
from typing import Any

from ..model.machine import TERMINAL, Reason, State
from ..model.models import iso
from ..store.base import Driver, Move, Row, Tx
from . import transition
from .decide import Decision
from .durable import Suspend, check_event_key, event_payload_text

#: A queued task whose handler is suspended (asleep, or woken and not yet resumed).
RESUMABLE = frozenset(
    {Reason.SLEEPING, Reason.EVENT_RECEIVED, Reason.CHILDREN_FINISHED, Reason.WAIT_TIMED_OUT}
)
#: The reasons of a waiting task whose handler is suspended.
SUSPENDED_WAITING = frozenset({Reason.WAITING_FOR_EVENT, Reason.WAITING_FOR_CHILDREN})


def suspended(row: Row) -> bool:
    """Whether the task row's handler is suspended: queued after a sleep or a wake-up, or
    waiting for an event or for its children (never a workflow parent waiting by the rule)."""
    reason = row["last_reason"]
    if row["state"] == State.QUEUED:
        return reason in RESUMABLE
    return row["state"] == State.WAITING and reason in SUSPENDED_WAITING


def write_suspension(
    driver: Driver,
    tx: Tx,
    *,
    task_id: int,
    owner: str,
    attempt: int,
    actor: str,
    suspend: Suspend,
    cancel_requested: bool,
    effect_confirmed: bool,
) -> Decision | None:
    """The worker's move for a handler that raised ``Suspend`` (``None``: the guard failed,
    the lease is lost). A cancel requested meanwhile is confirmed here instead: ``cancelled``
    by ``cancel_confirmed``, or ``cancelled_after_effects`` once an effect was confirmed, and
    the unfinished children are cancelled."""
    held = {"owner": owner, "attempt": attempt}
    if cancel_requested:
        reason = Reason.CANCELLED_AFTER_EFFECTS if effect_confirmed else Reason.CANCEL_CONFIRMED
        decision = Decision(State.CANCELLED, reason)
        move = transition.move_for(
            decision,
            task_id=task_id,
            from_state=State.CANCEL_REQUESTED,
            actor=actor,
            **held,
            data={"suspended": suspend.kind},
        )
        if transition.apply(driver, tx, move) is None:
            return None
        cancel_children(driver, tx, task_id, actor)
        return decision
    if suspend.kind == "event":
        assert suspend.key is not None
        # before the move: a send of this key either committed already or waits for us
        driver.durable_event_lock(tx, tenant=_tenant(driver, tx, task_id), key=suspend.key)
    reason = {
        "sleep": Reason.SLEEPING,
        "event": Reason.WAITING_FOR_EVENT,
        "children": Reason.WAITING_FOR_CHILDREN,
    }[suspend.kind]
    target = State.QUEUED if suspend.kind == "sleep" else State.WAITING
    decision = Decision(target, reason, counts_attempt=False)
    until = None if suspend.until is None else iso(suspend.until)
    ids = [str(i) for i in suspend.ids or []]
    data: dict[str, Any]
    if suspend.kind == "sleep":
        data = {"sleep": suspend.name, "until": until}
    elif suspend.kind == "event":
        data = {"key": suspend.key, "deadline": until}
    else:
        data = {"children": ids, "deadline": until}
    move = transition.move_for(
        decision, task_id=task_id, from_state=State.LEASED, actor=actor, data=data, **held
    )
    moved = transition.apply(driver, tx, move)
    if moved is None:
        return None
    driver.durable_wait_set(
        tx,
        id=task_id,
        kind=suspend.kind,
        name=suspend.name,
        key=suspend.key,
        until=suspend.until,
        ids=None if suspend.ids is None else json.dumps(suspend.ids),
    )
    if suspend.kind == "sleep":
        driver.notify_queued(tx, moved["queue"])
    elif suspend.kind == "event":
        assert suspend.key is not None
        tenant = _tenant(driver, tx, task_id)
        event = driver.durable_event_get(tx, tenant=tenant, key=suspend.key)
        if event is not None and _wake(  # sent while the handler was suspending: wake it now
            driver,
            tx,
            task_id,
            moved["queue"],
            Reason.EVENT_RECEIVED,
            actor,
            {"key": suspend.key},
        ):
            driver.durable_record_event(
                tx, id=task_id, name=suspend.name, tenant=tenant, key=suspend.key
            )
    else:
        joined = set(suspend.ids or [])
        children = {c["id"]: c for c in driver.durable_children(tx, id=task_id)}
        if all(children[i]["state"] in TERMINAL for i in suspend.ids or [] if i in children):
            _wake(
                driver,
                tx,
                task_id,
                moved["queue"],
                Reason.CHILDREN_FINISHED,
                "system",  # the rule's move, as when the last child ends after this commit
                {"children": {str(i): c["state"] for i, c in children.items() if i in joined}},
            )
    return decision


def _tenant(driver: Driver, tx: Tx, task_id: int) -> str:
    row = driver.durable_wait_get(tx, id=task_id)
    assert row is not None
    return str(row["tenant"])


def _wake(
    driver: Driver,
    tx: Tx,
    task_id: int,
    queue: str,
    reason: Reason,
    actor: str,
    data: dict[str, Any],
) -> bool:
    """``waiting → queued`` by ``reason``, due now; the queue's workers are woken."""
    moved = transition.apply(
        driver,
        tx,
        Move(
            task_id=task_id,
            from_state=State.WAITING,
            to_state=State.QUEUED,
            reason=reason,
            actor=actor,
            run_in=0.0,
            data=data,
        ),
    )
    if moved is None:
        return False
    driver.notify_queued(tx, queue)
    return True


# -- events -----------------------------------------------------------------------------------
def send_event(
    driver: Driver, key: str, payload: Any = None, *, tenant: str = "", actor: str = "caller"
) -> int:
    """Store the event ``(tenant, key)`` (the first payload wins) and move every task waiting
    for it ``waiting → queued`` (``event_received``) in the same transaction; the number of
    tasks woken (0 for a repeat). Bad input raises ``ValueError``/``TypeError`` naming it,
    before anything is written."""
    try:
        check_event_key(key)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(tenant, str) or len(tenant) > 255:
        raise TypeError("tenant must be a string of at most 255 characters")
    if "\x00" in tenant:
        raise ValueError("tenant contains a NUL character")
    text = event_payload_text(payload)
    woken = 0
    with driver.transaction() as tx:
        driver.durable_event_lock(tx, tenant=tenant, key=key)
        if not driver.durable_event_put(tx, tenant=tenant, key=key, payload=text):
            return 0
        for row in driver.durable_event_waiters(tx, tenant=tenant, key=key):
            if _wake(
                driver, tx, row["id"], row["queue"], Reason.EVENT_RECEIVED, actor, {"key": key}
            ):
                driver.durable_record_event(
                    tx, id=row["id"], name=f"event/{key}", tenant=tenant, key=key
                )
                woken += 1
    if woken:
        driver.wake()
    return woken


# -- children ---------------------------------------------------------------------------------
def cancel_suspended(driver: Driver, tx: Tx, row: Row, *, by: str, note: str | None) -> bool:
    """``queued``/``waiting → cancelled`` (``cancelled_while_suspended``) for a task whose
    handler is suspended, then its unfinished children, in ``tx``; False when it moved
    first."""
    moved = transition.apply(
        driver,
        tx,
        Move(
            task_id=row["id"],
            from_state=State(row["state"]),
            to_state=State.CANCELLED,
            reason=Reason.CANCELLED_WHILE_SUSPENDED,
            actor=by,
            note=note,
        ),
    )
    if moved is None:
        return False
    cancel_children(driver, tx, row["id"], by, note)
    return True


def cancel_children(
    driver: Driver, tx: Tx, parent_id: int, by: str, note: str | None = None
) -> None:
    """Cancel the unfinished children of a durable parent by the usual rules, in ``tx``: a
    queued one before it starts, a suspended one at once (and its own children), a running one
    by a request its worker confirms; one awaiting a receipt cannot be cancelled."""
    for child in driver.durable_children(tx, id=parent_id):
        state = State(child["state"])
        if state in TERMINAL:
            continue
        wait = driver.durable_wait_get(tx, id=child["id"])
        if wait is not None and suspended(wait):
            cancel_suspended(driver, tx, wait, by=by, note=note)
            continue
        target, reason = {
            State.QUEUED: (State.CANCELLED, Reason.CANCELLED_BEFORE_START),
            State.LEASED: (State.CANCEL_REQUESTED, Reason.CANCEL_REQUESTED),
        }.get(state, (None, None))
        if target is None or reason is None:
            continue  # awaiting a receipt, a cancel already requested, a workflow parent
        transition.apply(
            driver,
            tx,
            Move(
                task_id=child["id"],
                from_state=state,
                to_state=target,
                reason=reason,
                actor=by,
                note=note,
            ),
        )


# -- the sweeper ------------------------------------------------------------------------------
def time_out_waits(driver: Driver, *, batch: int) -> int:
    """``waiting → queued`` (``wait_timed_out``) for every waiting task past its wait's
    deadline, its wait record marked timed out (the resumed call raises ``WaitTimedOut``);
    the number moved."""
    moved = 0
    while True:
        with driver.transaction() as tx:
            rows = driver.durable_wait_expired(tx, limit=batch)
            for row in rows:
                driver.durable_record_time_out(tx, id=row["id"], name=row["wait_name"])
                if _wake(
                    driver,
                    tx,
                    row["id"],
                    row["queue"],
                    Reason.WAIT_TIMED_OUT,
                    "sweeper",
                    {"wait": row["wait_kind"]},
                ):
                    moved += 1
        if len(rows) < batch:
            return moved
