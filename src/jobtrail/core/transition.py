"""The one path through which every state change in jobtrail passes.

``apply`` checks the move against the edge table (``machine.EDGES``), then the driver runs the
conditional update and appends the transition row in the same transaction. A guard that no
longer matches returns ``None``: somebody else moved the task first, so the caller re-reads and
decides again (never read–decide–write unconditionally).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..model.errors import IllegalTransition
from ..model.machine import TERMINAL, Reason, State, find_edge
from ..store.base import Claim, Driver, Move, NewTask, Row, T, Tx
from . import workflow
from .decide import Decision


def check(task_id: int | str, source: State | None, target: State, reason: str) -> None:
    """Raise ``IllegalTransition`` (naming the current state) unless the edge exists."""
    try:
        code = Reason(reason)
    except ValueError:
        raise ValueError(f"unknown reason code {reason!r}") from None
    if find_edge(source, target, code) is None:
        attempted = f"move to {target.value} by {code.value}"
        raise IllegalTransition(str(task_id), source or State.QUEUED, attempted)


def apply(driver: Driver, tx: Tx, move: Move) -> Row | None:
    """Carry out one edge on one task; ``None`` if the task was no longer where expected.

    When a workflow child reaches a terminal state, its parent is re-derived (and the next
    sequential child released) in this same transaction.
    """
    check(move.task_id, move.from_state, move.to_state, move.reason)
    row = driver.task_move(tx, move)
    if (
        row is not None
        and row.get("parent_id") is not None
        and move.to_state in TERMINAL
        and move.from_state != move.to_state
    ):
        workflow.after_child_moved(driver, tx, row, apply)
    return row


def move_for(
    decision: Decision, *, task_id: int, from_state: State, actor: str, **guard: Any
) -> Move:
    """The ``Move`` that carries out ``decision`` for a task in ``from_state`` — the one place
    a decision becomes a move (the worker, the sweeper, receipts and cancel all come here).
    ``guard``: the rest of ``Move``'s fields (owner, attempt, receipt, note, data, ...)."""
    return Move(
        task_id=task_id,
        from_state=from_state,
        to_state=decision.to_state,
        reason=decision.reason,
        actor=actor,
        run_in=decision.delay,
        uncount_attempt=not decision.counts_attempt,
        set_error=decision.category is not None or decision.error is not None,
        error_category=decision.category,
        error=decision.error,
        **guard,
    )


def complete_many(
    driver: Driver,
    tx: Tx,
    owner: str,
    actor: str,
    attempts: Sequence[tuple[int, int]],
    results: Mapping[int, str] | None = None,
) -> set[int]:
    """Edge 4 (``leased`` → ``succeeded``, ``completed``) for a worker's batch of plain
    successes, ``(task id, attempt)`` each, under the worker guard; returns the ids that moved
    (``Driver.task_complete_many``; never a workflow child). ``results``: each returned value's
    JSON text by task id, stored by the same statement."""
    check("complete", State.LEASED, State.SUCCEEDED, Reason.COMPLETED)
    return driver.task_complete_many(tx, owner, actor, attempts, results)


def complete_and_claim(
    driver: Driver,
    tx: Tx,
    attempts: Sequence[tuple[int, int]],
    request: Claim,
    queue: str,
    limit: int,
    results: Mapping[int, str] | None = None,
) -> tuple[set[int], list[Row]]:
    """``complete_many`` and edge 3 for up to ``limit`` tasks of ``queue`` in one statement
    (``Driver.task_complete_and_claim``): the worker's round trip."""
    check("complete", State.LEASED, State.SUCCEEDED, Reason.COMPLETED)
    check("claim", State.QUEUED, State.LEASED, Reason.CLAIMED)
    return driver.task_complete_and_claim(tx, attempts, request, queue, limit, results)


def create(driver: Driver, tx: Tx, new: NewTask) -> tuple[Row, bool]:
    """Edges 1 and 2: a new task and its ``enqueued`` transition (or the existing one); with a
    debounce key, edge 23d on the open task of the key instead (its row holds ``debounced``)."""
    if find_edge(None, new.state, Reason.ENQUEUED) is None:
        raise ValueError(f"a task cannot be created in state {new.state.value}")
    if new.controls is not None and new.controls.debounce_key is not None:
        check("debounce", State.QUEUED, State.QUEUED, Reason.DEBOUNCED)
    return driver.task_insert(tx, new)


def create_alone(driver: Driver, new: NewTask, *, wait_for_disk: bool = True) -> tuple[Row, bool]:
    """``create`` as its own committed transaction (workers are woken when it is created);
    ``wait_for_disk=False``: its commit need not reach the disk before it returns."""
    if find_edge(None, new.state, Reason.ENQUEUED) is None:
        raise ValueError(f"a task cannot be created in state {new.state.value}")
    if not wait_for_disk:
        return driver.task_insert_unflushed(new)
    return driver.task_insert_alone(new)


def create_batches(
    driver: Driver,
    tx: Tx,
    batches: Iterable[Sequence[NewTask]],
    made: Callable[[NewTask, int, datetime, datetime, Any], T],
) -> list[T]:
    """``create`` for tasks without idempotency keys or parents, batch by batch (the batches
    may be produced while earlier ones are in flight); ``made`` of each task, in order, from its
    id, creation and due times and payload (``Driver.task_insert_batches``)."""

    def checked() -> Iterator[Sequence[NewTask]]:
        first: NewTask | None = None
        for batch in batches:
            for state in dict.fromkeys(new.state for new in batch):  # each state once, in order
                if find_edge(None, state, Reason.ENQUEUED) is None:
                    raise ValueError(f"a task cannot be created in state {state.value}")
            first = first or batch[0]
            for new in batch:
                if new.idempotency_key is not None or new.parent_id is not None:
                    raise ValueError("create_batches takes no idempotency keys or parents")
                if new.actor != first.actor or new.data != first.data:
                    raise ValueError("create_batches takes one actor and one data")
            yield batch

    return driver.task_insert_batches(tx, checked(), made)


def claim(driver: Driver, tx: Tx, request: Claim) -> list[Row]:
    """Edge 3 for up to ``request.limit`` due tasks at once."""
    check("claim", State.QUEUED, State.LEASED, Reason.CLAIMED)
    return driver.task_claim(tx, request)


def claim_unlimited(driver: Driver, tx: Tx, request: Claim) -> list[Row]:
    """Edge 3 from the queues of ``request`` without concurrency limits (one statement each)."""
    check("claim", State.QUEUED, State.LEASED, Reason.CLAIMED)
    return driver.task_claim_unlimited(tx, request)
