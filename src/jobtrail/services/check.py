"""The invariant checker: what must hold of any jobtrail store at any moment.

Shared by the tests (after every model step, after the chaos soak) and by ``jobtrail check``,
which operators may run against production data: it only reads (a read-only transaction on
PostgreSQL, a deferred read transaction on SQLite) and reads the log in pages.

Each violation is a dict with ``rule``, ``task_id`` (str) and the detail that shows it. Rules:

- ``state_is_last_transition``: a task's state is the ``to_state`` of its last transition;
- ``seq_contiguous``: its log is numbered 1..n without gaps and the task's ``seq`` is n;
- ``log_chain``: each transition starts where the one before it ended;
- ``edge_allowed``: every ``(from_state, to_state, reason)`` is an edge of
  ``jobtrail.model.machine`` (the first one from nothing);
- ``terminal_finished``: a terminal task has ``finished_at``;
- ``effect_key_unique``: no two confirmed effects share a key;
- ``held_has_lease``: a leased (or cancel-requested) task has an owner and an expiry;
- ``queued_without_lease``: no queued task holds an unexpired lease;
- ``row_evidence_is_the_log``: the dead-letter evidence a task row keeps (tasks
  created since migration 17) is its log's: the version of its last claim, its first failure;
- ``parent_aggregate``: a parent's state agrees with ``workflow.aggregate`` of its children
  (skipped when an operator forced the parent with ``manual_fix``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..core.workflow import aggregate
from ..model.machine import Reason, State, find_edge
from ..store.base import Driver, Row, Tx

#: Transitions read per page by the edge check.
PAGE = 5000

_SIMPLE_RULES: tuple[tuple[str, Callable[[Driver, Tx], list[Row]]], ...] = (
    ("state_is_last_transition", Driver.check_state_projection),
    ("seq_contiguous", Driver.check_seq_contiguous),
    ("log_chain", Driver.check_log_chain),
    ("terminal_finished", Driver.check_terminal_finished),
    ("effect_key_unique", Driver.check_effect_keys),
    ("held_has_lease", Driver.check_held_lease),
    ("queued_without_lease", Driver.check_queued_lease),
    ("row_evidence_is_the_log", Driver.check_row_evidence),
)


def run(driver: Driver, *, page: int = PAGE) -> list[dict[str, Any]]:
    """Every violation in the store (an empty list when all invariants hold)."""
    with driver.transaction(write=False) as tx:
        driver.check_read_only(tx)
        out: list[dict[str, Any]] = []
        for rule, query in _SIMPLE_RULES:
            out.extend(_violation(rule, row) for row in query(driver, tx))
        out.extend(_edges(driver, tx, page))
        out.extend(_parents(driver, tx))
        return out


def _violation(rule: str, row: Row) -> dict[str, Any]:
    detail = {k: _plain(v) for k, v in row.items() if k != "task_id"}
    return {"rule": rule, "task_id": str(row["task_id"]), **detail}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _pages(driver: Driver, tx: Tx, page: int) -> Iterator[list[Row]]:
    after = (0, 0)
    while True:
        rows = driver.check_transitions_page(
            tx, after_task=after[0], after_seq=after[1], limit=page
        )
        if not rows:
            return
        yield rows
        after = (rows[-1]["task_id"], rows[-1]["seq"])


def _edges(driver: Driver, tx: Tx, page: int) -> Iterator[dict[str, Any]]:
    for rows in _pages(driver, tx, page):
        for row in rows:
            if not _edge_allowed(row["from_state"], row["to_state"], row["reason"]):
                yield _violation(
                    "edge_allowed",
                    {
                        "task_id": row["task_id"],
                        "seq": row["seq"],
                        "from_state": row["from_state"],
                        "to_state": row["to_state"],
                        "reason": row["reason"],
                    },
                )


def _edge_allowed(source: str | None, target: str, reason: str) -> bool:
    try:
        src = State(source) if source is not None else None
        return find_edge(src, State(target), Reason(reason)) is not None
    except ValueError:  # a state or reason code this version does not know
        return False


def _parents(driver: Driver, tx: Tx) -> Iterator[dict[str, Any]]:
    groups: dict[int, tuple[Row, list[State]]] = {}
    for row in driver.check_parents(tx):
        groups.setdefault(row["task_id"], (row, []))[1].append(State(row["child_state"]))
    for parent, children in groups.values():
        if parent["last_reason"] == Reason.MANUAL_FIX:
            continue
        expected, _ = aggregate(children)
        if parent["state"] != expected:
            yield _violation(
                "parent_aggregate",
                {
                    "task_id": parent["task_id"],
                    "state": parent["state"],
                    "expected": expected.value,
                    "children": ",".join(c.value for c in children),
                },
            )
