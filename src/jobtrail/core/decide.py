"""Pure decisions: what an attempt's outcome does to a task, and when it runs next.

Nothing here touches the store or a clock: every function takes the facts (attempt number,
limits, elapsed budget measured by the database) and returns a decision the store carries out.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ..model import validate
from ..model.errors import (
    Cancelled,
    ChildFailed,
    PermanentError,
    Snooze,
    TransientError,
    WaitTimedOut,
)
from ..model.kinds import KindSpec
from ..model.machine import TERMINAL, ErrorCategory, Reason, State

_HTTP_CATEGORIES = {
    429: ErrorCategory.RATE_LIMITED,
    502: ErrorCategory.UNAVAILABLE,
    503: ErrorCategory.UNAVAILABLE,
    504: ErrorCategory.UNAVAILABLE,
    408: ErrorCategory.TIMEOUT,
    409: ErrorCategory.CONFLICT,
    400: ErrorCategory.INVALID_INPUT,
    422: ErrorCategory.INVALID_INPUT,
    401: ErrorCategory.UNAUTHORIZED,
    403: ErrorCategory.UNAUTHORIZED,
    404: ErrorCategory.NOT_FOUND,
    410: ErrorCategory.NOT_FOUND,
}


#: Raised by a durable handler's wait from its recorded outcome (a timed-out wait, a child that
#: ended dead or cancelled): a retry would run the handler again into the same record and raise
#: the same error, so one that escapes the handler fails the task at once (``permanent_error``),
#: as a workflow whose timeout is not caught fails in Temporal or DBOS.
RECORDED_OUTCOMES = WaitTimedOut | ChildFailed


def http_status(exc: BaseException) -> int | None:
    """The HTTP status an exception carries: status_code, status or response.status_code."""
    for holder in (exc, getattr(exc, "response", None)):
        if holder is None:
            continue
        for attr in ("status_code", "status"):
            value = getattr(holder, attr, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                return value
    return None


def classify(
    exc: BaseException, hook: Callable[[BaseException], object] | None = None
) -> ErrorCategory:
    """The category of an exception: our own errors, then the kind's hook, then the built-ins."""
    if isinstance(exc, TransientError | PermanentError):
        return exc.category
    if isinstance(exc, WaitTimedOut):
        return ErrorCategory.TIMEOUT
    if isinstance(exc, ChildFailed):
        return ErrorCategory.UNCLASSIFIED
    if hook is not None:
        verdict = hook(exc)
        if verdict is not None:
            return ErrorCategory(verdict)  # type: ignore[arg-type]
    status = http_status(exc)
    if status is not None and status in _HTTP_CATEGORIES:
        return _HTTP_CATEGORIES[status]
    if isinstance(exc, TimeoutError):
        return ErrorCategory.TIMEOUT
    if isinstance(exc, ConnectionError):
        return ErrorCategory.UNAVAILABLE
    return ErrorCategory.UNCLASSIFIED


def backoff_ceiling(failed_attempt: int, base: float, cap: float) -> float:
    """The n-th failed attempt's (n from 1) longest wait: ``min(cap, base * 2**(n-1))``."""
    exponent = max(0, failed_attempt - 1)
    if exponent > 60:  # 2**61 seconds is already past any cap a person would set
        return cap
    return min(cap, base * 2.0**exponent)


def backoff(
    failed_attempt: int, base: float, cap: float, rng: random.Random | None = None
) -> float:
    """Full jitter: ``random(0, min(cap, base * 2**(n-1)))`` seconds."""
    ceiling = backoff_ceiling(failed_attempt, base, cap)
    return (rng or random).uniform(0.0, ceiling)


@dataclass(frozen=True)
class Decision:
    """Where an attempt goes: ``to_state`` by ``reason``; ``delay`` seconds for a requeue."""

    to_state: State
    reason: Reason
    delay: float | None = None
    category: ErrorCategory | None = None
    error: str | None = None
    counts_attempt: bool = True


def error_text(exc: BaseException) -> str:
    """A short summary of an error for the log (type and message, bounded)."""
    message = str(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    text = validate.kept_text(text)
    return text if len(text) <= 2000 else text[:1997] + "..."


def decide_failure(
    exc: BaseException,
    *,
    spec: KindSpec,
    attempt: int,
    max_attempts: int,
    elapsed: float,
    cancel_requested: bool = False,
    effect_confirmed: bool = False,
    rng: random.Random | None = None,
) -> Decision:
    """The fate of an attempt that raised ``exc``.

    ``attempt`` is this attempt's number (from 1); ``elapsed`` is the database's measure of the
    seconds since the task's retry budget started (enqueue or replay).
    """
    if isinstance(exc, Snooze):
        if cancel_requested:
            return _after_cancel(exc, None, effect_confirmed)
        return Decision(State.QUEUED, Reason.SNOOZED, delay=exc.seconds, counts_attempt=False)
    if isinstance(exc, Cancelled) and cancel_requested:
        return Decision(State.CANCELLED, Reason.CANCEL_CONFIRMED)
    category = classify(exc, spec.classify)
    if cancel_requested:
        return _after_cancel(exc, category, effect_confirmed)
    text = error_text(exc)
    permanent = category.permanent or (
        category is ErrorCategory.UNCLASSIFIED and not spec.retry_unclassified
    )
    if isinstance(exc, PermanentError | RECORDED_OUTCOMES):
        permanent = True
    if permanent:
        return Decision(State.DEAD, Reason.PERMANENT_ERROR, category=category, error=text)
    if attempt >= max_attempts:
        return Decision(State.DEAD, Reason.ATTEMPTS_EXHAUSTED, category=category, error=text)
    retry_after = exc.retry_after if isinstance(exc, TransientError) else None
    delay = (
        retry_after
        if retry_after is not None
        else backoff(attempt, spec.backoff_base, spec.backoff_cap, rng)
    )
    if spec.max_elapsed is not None and elapsed + delay > spec.max_elapsed:
        return Decision(State.DEAD, Reason.RETRY_BUDGET_EXHAUSTED, category=category, error=text)
    return Decision(
        State.QUEUED, Reason.RETRY_SCHEDULED, delay=delay, category=category, error=text
    )


def _after_cancel(
    exc: BaseException, category: ErrorCategory | None, effect_confirmed: bool
) -> Decision:
    text = error_text(exc)
    if effect_confirmed:
        return Decision(State.DEAD, Reason.FAILED_AFTER_CANCEL, category=category, error=text)
    return Decision(State.CANCELLED, Reason.CANCEL_CONFIRMED, category=category, error=text)


def decide_success(*, cancel_requested: bool, submitted: bool = False) -> Decision:
    """A handler that returned: ``completed`` (or ``submitted`` when it called
    ``ctx.await_receipt``), or ``cancel_too_late`` when a cancel was requested meanwhile."""
    target = State.AWAITING_RECEIPT if submitted else State.SUCCEEDED
    if cancel_requested:
        return Decision(target, Reason.CANCEL_TOO_LATE)
    return Decision(target, Reason.SUBMITTED if submitted else Reason.COMPLETED)


def decide_receipt_failure(
    category: ErrorCategory,
    *,
    spec: KindSpec | None,
    attempts: int,
    max_attempts: int,
    error: str | None,
    rng: random.Random | None = None,
) -> Decision:
    """A provider reported that a submission failed (edge 11): classified like a handler's error."""
    retry_unclassified = spec.retry_unclassified if spec else True
    permanent = category.permanent or (
        category is ErrorCategory.UNCLASSIFIED and not retry_unclassified
    )
    if permanent or attempts >= max_attempts:
        return Decision(State.DEAD, Reason.RECEIPT_FAILED, category=category, error=error)
    base, cap = (spec.backoff_base, spec.backoff_cap) if spec else (1.0, 300.0)
    return Decision(
        State.QUEUED,
        Reason.RECEIPT_FAILED,
        delay=backoff(attempts, base, cap, rng),
        category=category,
        error=error,
    )


def decide_expired(*, state: State, reentrant: bool, attempts: int, max_attempts: int) -> Decision:
    """What the sweeper does with a lease that expired (edges 7, 8 and 18)."""
    if state is State.CANCEL_REQUESTED:
        if reentrant:
            return Decision(State.CANCELLED, Reason.LEASE_EXPIRED_CANCELLED)
        return Decision(State.DEAD, Reason.LEASE_EXPIRED_EFFECT_UNCERTAIN)
    if not reentrant:
        return Decision(State.DEAD, Reason.LEASE_EXPIRED_EFFECT_UNCERTAIN)
    if attempts >= max_attempts:
        return Decision(
            State.DEAD,
            Reason.ATTEMPTS_EXHAUSTED,
            category=ErrorCategory.TIMEOUT,
            error="lease expired on the last attempt",
        )
    return Decision(State.QUEUED, Reason.LEASE_EXPIRED, delay=0.0)


def decide_receipt_outcome(
    ok: bool,
    *,
    category: str | None,
    error: str | None,
    spec: KindSpec | None,
    attempts: int,
    max_attempts: int,
) -> Decision:
    """A receipt confirmed by the caller or a webhook (``App.confirm_receipt``, edges 10–11):
    ``ok`` → succeeded; else the provider's failure, classified like a handler's error
    (``category`` a code, default ``unclassified``; an unknown code is a ``ValueError``)."""
    if ok:
        return Decision(State.SUCCEEDED, Reason.RECEIPT_CONFIRMED)
    try:
        cat = ErrorCategory(category or ErrorCategory.UNCLASSIFIED)
    except ValueError:
        raise ValueError(f"unknown error category {category!r}") from None
    return decide_receipt_failure(
        cat, spec=spec, attempts=attempts, max_attempts=max_attempts, error=error
    )


def decide_receipt_verdict(
    verdict: object, *, spec: KindSpec | None, attempts: int, max_attempts: int
) -> Decision:
    """A receipt past its deadline (the sweeper, edge 12): the kind's ``check_receipt`` answer
    ``True`` → succeeded, ``False`` → failed (classified like a handler's error),
    anything else (no hook, ``None``, an exception) → dead by ``receipt_timeout``."""
    if verdict is True or verdict is False:
        return decide_receipt_outcome(
            verdict,
            category=None if verdict else "unclassified",
            error=None if verdict else "the provider reported a failure",
            spec=spec,
            attempts=attempts,
            max_attempts=max_attempts,
        )
    return Decision(
        State.DEAD,
        Reason.RECEIPT_TIMEOUT,
        category=ErrorCategory.TIMEOUT,
        error="no receipt before the deadline",
    )


@dataclass(frozen=True)
class CancelDecision:
    """What a cancel does to a task: ``outcome`` as ``CancelResult`` reports it, and the move
    (``None`` when nothing moves). ``children``: a waiting parent, whose children are
    cancelled instead; ``illegal``: no cancel edge leaves this state."""

    outcome: str
    decision: Decision | None = None


def decide_cancel(state: State) -> CancelDecision:
    """Two-phase cancel: ``queued`` → ``cancelled``; ``leased`` → ``cancel_requested``
    (the worker confirms at a boundary); ``awaiting_receipt`` → refused (recorded, too late);
    repeats and terminal tasks move nothing."""
    if state is State.WAITING:
        return CancelDecision("children")
    if state in TERMINAL:
        return CancelDecision("already_terminal")
    if state is State.CANCEL_REQUESTED:
        return CancelDecision("cancel_requested")
    if state is State.QUEUED:
        return CancelDecision("cancelled", Decision(State.CANCELLED, Reason.CANCELLED_BEFORE_START))
    if state is State.LEASED:
        return CancelDecision(
            "cancel_requested", Decision(State.CANCEL_REQUESTED, Reason.CANCEL_REQUESTED)
        )
    if state is State.AWAITING_RECEIPT:
        return CancelDecision("too_late", Decision(state, Reason.CANCEL_REFUSED_SUBMITTED))
    return CancelDecision("illegal")
