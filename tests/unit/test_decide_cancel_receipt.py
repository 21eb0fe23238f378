"""The cancel decision table and the receipt decisions, as pure functions (``decide.py``)."""

from __future__ import annotations

import pytest

from jobtrail.core.decide import (
    Decision,
    decide_cancel,
    decide_receipt_outcome,
    decide_receipt_verdict,
)
from jobtrail.model.kinds import KindSpec
from jobtrail.model.machine import TERMINAL, ErrorCategory, Reason, State


@pytest.mark.parametrize(
    ("state", "outcome", "target", "reason"),
    [
        (State.QUEUED, "cancelled", State.CANCELLED, Reason.CANCELLED_BEFORE_START),
        (State.LEASED, "cancel_requested", State.CANCEL_REQUESTED, Reason.CANCEL_REQUESTED),
        (
            State.AWAITING_RECEIPT,
            "too_late",
            State.AWAITING_RECEIPT,
            Reason.CANCEL_REFUSED_SUBMITTED,
        ),
    ],
)
def test_cancel_moves(state: State, outcome: str, target: State, reason: Reason) -> None:
    verdict = decide_cancel(state)
    assert verdict.outcome == outcome
    assert verdict.decision == Decision(target, reason)


def test_cancel_of_a_waiting_parent_cancels_its_children() -> None:
    assert decide_cancel(State.WAITING).outcome == "children"


@pytest.mark.parametrize("state", sorted(TERMINAL, key=lambda s: s.value))
def test_cancel_of_a_terminal_task_moves_nothing(state: State) -> None:
    verdict = decide_cancel(state)
    assert (verdict.outcome, verdict.decision) == ("already_terminal", None)


def test_a_repeated_cancel_moves_nothing() -> None:
    verdict = decide_cancel(State.CANCEL_REQUESTED)
    assert (verdict.outcome, verdict.decision) == ("cancel_requested", None)


def test_every_state_has_a_cancel_answer() -> None:
    for state in State:
        assert decide_cancel(state).outcome


def spec(**options: object) -> KindSpec:
    return KindSpec(name="k", handler=None, queue="default", **options)  # type: ignore[arg-type]


def test_a_confirmed_receipt_succeeds() -> None:
    decision = decide_receipt_outcome(
        True, category=None, error=None, spec=None, attempts=1, max_attempts=3
    )
    assert decision == Decision(State.SUCCEEDED, Reason.RECEIPT_CONFIRMED)


def test_a_failed_receipt_is_classified() -> None:
    retry = decide_receipt_outcome(
        False, category="unavailable", error="down", spec=None, attempts=1, max_attempts=3
    )
    assert (retry.to_state, retry.reason, retry.category) == (
        State.QUEUED,
        Reason.RECEIPT_FAILED,
        ErrorCategory.UNAVAILABLE,
    )
    dead = decide_receipt_outcome(
        False, category="unavailable", error="down", spec=None, attempts=3, max_attempts=3
    )
    assert dead.to_state is State.DEAD
    with pytest.raises(ValueError, match="unknown error category"):
        decide_receipt_outcome(
            False, category="nope", error=None, spec=None, attempts=1, max_attempts=3
        )


def test_a_receipt_past_its_deadline_without_an_answer_is_dead() -> None:
    decision = decide_receipt_verdict(None, spec=None, attempts=1, max_attempts=3)
    assert decision == Decision(
        State.DEAD,
        Reason.RECEIPT_TIMEOUT,
        category=ErrorCategory.TIMEOUT,
        error="no receipt before the deadline",
    )


def test_a_receipt_past_its_deadline_takes_the_providers_answer() -> None:
    assert decide_receipt_verdict(True, spec=None, attempts=1, max_attempts=3) == Decision(
        State.SUCCEEDED, Reason.RECEIPT_CONFIRMED
    )
    failed = decide_receipt_verdict(False, spec=None, attempts=1, max_attempts=3)
    assert (failed.reason, failed.category, failed.error) == (
        Reason.RECEIPT_FAILED,
        ErrorCategory.UNCLASSIFIED,
        "the provider reported a failure",
    )
