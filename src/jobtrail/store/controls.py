"""The insert of a task with controls (model/controls.py): debounce, a uniqueness window,
expiry. Every decision is the database's: an insert that a unique index may refuse
(``task_insert_controlled``: the idempotency key, the open debounce key), a guarded update of
the open debounced task (``task_debounce``), a guarded release of a key whose window is over
(``task_key_release``). Never "look, then insert": two enqueues at once, in any processes, make
one task per window. Plain enqueues never come here."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..model.machine import State
from .types import NewTask, Row, Tx

if TYPE_CHECKING:
    from .base import Driver

#: How often an insert is tried again after the row it met went away meanwhile (a claim took
#: the debounced task, a window closed, the open task was locked by a claim in progress): each
#: try is one more decision by the database, after a pause that grows to ``PAUSE_MAX``.
TRIES = 50
PAUSE_MAX = 0.02


def params(driver: Driver, new: NewTask) -> dict[str, Any]:
    """The parameters of ``task_insert_controlled`` and ``task_debounce``."""
    c = new.controls
    assert c is not None
    return {
        **driver._insert_params(new),
        "debounce_key": c.debounce_key,
        "debounce": c.debounce,
        "debounce_max": c.debounce_max,
        "unique_for": c.unique_for,
        "unique_active": c.unique_active,
        "expires_in": c.expires_in,
        "expires_at": driver.encode_time(c.expires_at) if c.expires_at is not None else None,
    }


def insert(driver: Driver, tx: Tx, new: NewTask) -> tuple[Row, bool]:
    """``Driver.task_insert`` of a task with controls: the new row and True; or the task this
    enqueue met and False — the open task of its debounce key, updated (its row holds
    ``debounced`` True), or the task whose idempotency key is still within its window."""
    c = new.controls
    assert c is not None
    values = params(driver, new)
    for attempt in range(TRIES):
        if attempt >= 2:  # contention: let the transaction in the way finish
            time.sleep(min(PAUSE_MAX, 0.0005 * 2**attempt))
        if c.debounce_key is not None:
            task_id = _debounce(driver, tx, values)
            if task_id is not None:
                return {**_row(driver, tx, task_id), "debounced": True}, False
        got = tx.one("task_insert_controlled", values)
        if got is not None:
            return _row(driver, tx, got["id"]), True
        if new.idempotency_key is None:
            continue  # the debounce key's open task was made meanwhile: debounce it
        existing = tx.one(
            "task_get_by_key",
            {"tenant": new.tenant, "kind": new.kind, "idempotency_key": new.idempotency_key},
        )
        if existing is None:
            continue  # released meanwhile: insert again
        if tx.one("task_key_release", {"id": existing["id"], **_key(new)}) is None:
            return existing, False  # within its window
    raise RuntimeError(f"enqueue of {new.kind!r} met a changing task {TRIES} times; try again")


def _key(new: NewTask) -> dict[str, Any]:
    return {"idempotency_key": new.idempotency_key}


def _debounce(driver: Driver, tx: Tx, values: dict[str, Any]) -> int | None:
    """The open task of the debounce key updated (``task_debounce``), or None when none is."""
    if driver.logs_in_statement:
        got = tx.one("task_debounce", values)
        return None if got is None else int(got["id"])
    old = tx.one("task_debounce_old", values)
    if old is None:
        return None
    got = tx.one("task_debounce", {**values, "id": old["id"]})
    if got is None:
        return None
    driver.transition_insert(
        tx,
        got["id"],
        got["seq"],
        State.QUEUED,
        State.QUEUED,
        "debounced",
        values["actor"],
        attempt=got["attempts"],
        at=got["updated_at"],
        data={"replaced": old["payload_hash"]},
    )
    return int(got["id"])


def _row(driver: Driver, tx: Tx, task_id: int) -> Row:
    row = driver.task_get(tx, task_id)
    assert row is not None
    return row


def expired_queued(tx: Tx, limit: int) -> list[int]:
    """Ids of queued tasks past their expiry, the oldest expiry first (the sweeper's)."""
    return [int(r["id"]) for r in tx.all("task_expired_queued", {"limit": limit})]


def debounce_count(tx: Tx, task_id: int) -> int:
    """How many times task ``task_id`` was debounced."""
    row = tx.one("task_debounce_count", {"id": task_id})
    return 0 if row is None else int(row["n"])
