"""Receipts (edges 10–12 in docs/state_machine.md): the outcome of a submission that happened
outside.

``confirm_receipt`` is called by the caller or a webhook; the sweeper handles deadlines, asking
the kind's ``check_receipt(receipt_id)`` hook first (``receipt_requeried``): ``True`` →
succeeded, ``False`` → failed (classified like a handler's error), ``None`` or an exception →
``receipt_timeout``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ..core import transition
from ..core.decide import Decision, decide_receipt_verdict
from ..model.kinds import KindSpec
from ..model.machine import TERMINAL, Reason, State
from ..store.base import Driver, Move, Row, Tx

log = logging.getLogger("jobtrail.services.receipts")


def apply_outcome(
    driver: Driver, tx: Tx, row: Row, decision: Decision, actor: str, note: str | None = None
) -> Row | None:
    return transition.apply(
        driver,
        tx,
        transition.move_for(
            decision,
            task_id=row["id"],
            from_state=State.AWAITING_RECEIPT,
            actor=actor,
            note=note,
            data={"receipt_id": row["receipt_id"]},
        ),
    )


def sweep_receipts(
    driver: Driver,
    kinds: dict[str, KindSpec],
    *,
    batch: int = 200,
    ended: Callable[[Sequence[int]], None] | None = None,
) -> Counter[str]:
    """Receipts past their deadline, for the kinds this App knows (another App's sweeper, or
    a worker that registers the kind, handles the rest: only it knows the kind's hook). The
    provider is asked outside any transaction, then each task moves by a conditional update;
    ``ended`` is given the id of each task so ended (a terminal state), after its commit."""
    moved: Counter[str] = Counter()
    if not kinds:
        return moved
    with driver.transaction(write=False) as tx:
        rows = [r for r in driver.task_receipt_expired(tx, limit=batch) if r["kind"] in kinds]
    for row in rows:
        spec = kinds[row["kind"]]
        verdict: Any = None
        asked = spec.check_receipt is not None
        if spec.check_receipt is not None:
            try:
                verdict = spec.check_receipt(row["receipt_id"])
            except Exception as exc:
                log.warning("check_receipt for task %s raised %s", row["id"], type(exc).__name__)
                verdict = None
        with driver.transaction() as tx:
            full = driver.task_get(tx, row["id"])
            if (
                full is None
                or full["state"] != State.AWAITING_RECEIPT
                or full["receipt_id"] != row["receipt_id"]
            ):
                continue  # confirmed (or moved) meanwhile
            if asked:
                transition.apply(
                    driver,
                    tx,
                    Move(
                        task_id=row["id"],
                        from_state=State.AWAITING_RECEIPT,
                        to_state=State.AWAITING_RECEIPT,
                        reason=Reason.RECEIPT_REQUERIED,
                        actor="sweeper",
                        data={"verdict": verdict if isinstance(verdict, bool) else None},
                    ),
                )
            decision = decide_receipt_verdict(
                verdict, spec=spec, attempts=full["attempts"], max_attempts=full["max_attempts"]
            )
            if apply_outcome(driver, tx, full, decision, "sweeper") is None:
                continue
            moved[decision.reason] += 1
        if ended is not None and decision.to_state in TERMINAL:
            ended([row["id"]])
    return moved
