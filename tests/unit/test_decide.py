"""The pure decision functions: classification, backoff and the fate of an attempt."""

from __future__ import annotations

import random

import pytest

from jobtrail import PermanentError, Snooze, TransientError
from jobtrail.core.decide import (
    backoff,
    backoff_ceiling,
    classify,
    decide_expired,
    decide_failure,
    decide_success,
)
from jobtrail.model.errors import Cancelled
from jobtrail.model.kinds import KindSpec
from jobtrail.model.machine import ErrorCategory, Reason, State


def spec(**kw: object) -> KindSpec:
    return KindSpec(name="k", handler=None, queue="default", **kw)  # type: ignore[arg-type]


class HTTPError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


class Response:
    def __init__(self, status: int) -> None:
        self.status_code = status


class ClientError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__("client error")
        self.response = Response(status)


@pytest.mark.parametrize(
    ("exc", "category"),
    [
        (TimeoutError("slow"), ErrorCategory.TIMEOUT),
        (ConnectionError("reset"), ErrorCategory.UNAVAILABLE),
        (ConnectionRefusedError("no"), ErrorCategory.UNAVAILABLE),
        (HTTPError(429), ErrorCategory.RATE_LIMITED),
        (HTTPError(502), ErrorCategory.UNAVAILABLE),
        (HTTPError(503), ErrorCategory.UNAVAILABLE),
        (HTTPError(504), ErrorCategory.UNAVAILABLE),
        (HTTPError(400), ErrorCategory.INVALID_INPUT),
        (HTTPError(422), ErrorCategory.INVALID_INPUT),
        (HTTPError(401), ErrorCategory.UNAUTHORIZED),
        (HTTPError(403), ErrorCategory.UNAUTHORIZED),
        (HTTPError(404), ErrorCategory.NOT_FOUND),
        (HTTPError(410), ErrorCategory.NOT_FOUND),
        (ClientError(401), ErrorCategory.UNAUTHORIZED),
        (ValueError("x"), ErrorCategory.UNCLASSIFIED),
        (TransientError("x", category="conflict"), ErrorCategory.CONFLICT),
        (PermanentError("x", category="not_found"), ErrorCategory.NOT_FOUND),
    ],
)
def test_builtin_classification(exc: BaseException, category: ErrorCategory) -> None:
    assert classify(exc) is category


def test_classify_hook_wins_over_builtins_but_not_over_our_errors() -> None:
    def hook(exc: BaseException) -> str | None:
        return "conflict" if isinstance(exc, KeyError) else None

    assert classify(KeyError("deadlock"), hook) is ErrorCategory.CONFLICT
    assert classify(TimeoutError(), hook) is ErrorCategory.TIMEOUT
    assert (
        classify(PermanentError("x", category="unauthorized"), hook) is ErrorCategory.UNAUTHORIZED
    )


def test_error_categories_are_checked() -> None:
    with pytest.raises(ValueError, match="not a transient category"):
        TransientError("x", category="unauthorized")
    with pytest.raises(ValueError, match="unknown error category"):
        PermanentError("x", category="nope")
    with pytest.raises(ValueError):
        Snooze(-1)


@pytest.mark.parametrize(
    ("n", "ceiling"), [(1, 1.0), (2, 2.0), (3, 4.0), (9, 256.0), (10, 300.0), (500, 300.0)]
)
def test_backoff_ceiling(n: int, ceiling: float) -> None:
    assert backoff_ceiling(n, 1.0, 300.0) == ceiling


def test_full_jitter_spreads_within_the_ceiling() -> None:
    rng = random.Random(7)
    waits = [backoff(4, 1.0, 300.0, rng) for _ in range(2000)]
    assert all(0.0 <= w <= 8.0 for w in waits)
    # full jitter: spread over the whole range, not clustered at the ceiling
    assert min(waits) < 0.5 and max(waits) > 7.5
    assert 3.0 < sum(waits) / len(waits) < 5.0


def test_transient_failure_retries_with_backoff() -> None:
    d = decide_failure(
        TransientError("busy", category="rate_limited"),
        spec=spec(),
        attempt=2,
        max_attempts=5,
        elapsed=1.0,
        rng=random.Random(1),
    )
    assert d.to_state is State.QUEUED and d.reason is Reason.RETRY_SCHEDULED
    assert d.category is ErrorCategory.RATE_LIMITED and 0.0 <= (d.delay or 0) <= 2.0


def test_retry_after_wins_even_above_the_cap() -> None:
    d = decide_failure(
        TransientError("busy", retry_after=900),
        spec=spec(backoff_cap=10.0),
        attempt=1,
        max_attempts=5,
        elapsed=0.0,
    )
    assert d.delay == 900


def test_retry_after_never_past_the_budget() -> None:
    d = decide_failure(
        TransientError("busy", retry_after=900),
        spec=spec(max_elapsed=600.0),
        attempt=1,
        max_attempts=5,
        elapsed=0.0,
    )
    assert d.to_state is State.DEAD and d.reason is Reason.RETRY_BUDGET_EXHAUSTED


def test_last_attempt_is_exhausted_with_its_category() -> None:
    d = decide_failure(TimeoutError("slow"), spec=spec(), attempt=5, max_attempts=5, elapsed=0.0)
    assert (d.to_state, d.reason, d.category) == (
        State.DEAD,
        Reason.ATTEMPTS_EXHAUSTED,
        ErrorCategory.TIMEOUT,
    )
    assert d.error is not None and "slow" in d.error


def test_permanent_and_unclassified_policies() -> None:
    d = decide_failure(
        PermanentError("revoked", category="unauthorized"),
        spec=spec(),
        attempt=1,
        max_attempts=5,
        elapsed=0.0,
    )
    assert (d.to_state, d.reason) == (State.DEAD, Reason.PERMANENT_ERROR)
    d = decide_failure(ValueError("?"), spec=spec(), attempt=1, max_attempts=5, elapsed=0.0)
    assert d.reason is Reason.RETRY_SCHEDULED
    d = decide_failure(
        ValueError("?"), spec=spec(retry_unclassified=False), attempt=1, max_attempts=5, elapsed=0.0
    )
    assert (d.reason, d.category) == (Reason.PERMANENT_ERROR, ErrorCategory.UNCLASSIFIED)


def test_snooze_does_not_count_the_attempt() -> None:
    d = decide_failure(Snooze(12), spec=spec(), attempt=5, max_attempts=5, elapsed=0.0)
    assert (d.reason, d.delay, d.counts_attempt) == (Reason.SNOOZED, 12.0, False)


def test_outcomes_after_a_cancel_request() -> None:
    assert decide_success(cancel_requested=True).reason is Reason.CANCEL_TOO_LATE
    assert decide_success(cancel_requested=False).reason is Reason.COMPLETED
    d = decide_failure(
        ValueError("x"), spec=spec(), attempt=1, max_attempts=5, elapsed=0, cancel_requested=True
    )
    assert (d.to_state, d.reason) == (State.CANCELLED, Reason.CANCEL_CONFIRMED)
    d = decide_failure(
        ValueError("x"),
        spec=spec(),
        attempt=1,
        max_attempts=5,
        elapsed=0,
        cancel_requested=True,
        effect_confirmed=True,
    )
    assert (d.to_state, d.reason) == (State.DEAD, Reason.FAILED_AFTER_CANCEL)
    d = decide_failure(
        Cancelled(), spec=spec(), attempt=1, max_attempts=5, elapsed=0, cancel_requested=True
    )
    assert (d.to_state, d.reason) == (State.CANCELLED, Reason.CANCEL_CONFIRMED)
    # raised by the handler's own code with no cancel requested: an ordinary failure
    d = decide_failure(Cancelled(), spec=spec(), attempt=1, max_attempts=5, elapsed=0)
    assert (d.to_state, d.reason) == (State.QUEUED, Reason.RETRY_SCHEDULED)


@pytest.mark.parametrize(
    ("state", "reentrant", "attempts", "expected"),
    [
        (State.LEASED, True, 1, (State.QUEUED, Reason.LEASE_EXPIRED)),
        (State.LEASED, True, 5, (State.DEAD, Reason.ATTEMPTS_EXHAUSTED)),
        (State.LEASED, False, 1, (State.DEAD, Reason.LEASE_EXPIRED_EFFECT_UNCERTAIN)),
        (State.CANCEL_REQUESTED, True, 1, (State.CANCELLED, Reason.LEASE_EXPIRED_CANCELLED)),
        (State.CANCEL_REQUESTED, False, 1, (State.DEAD, Reason.LEASE_EXPIRED_EFFECT_UNCERTAIN)),
    ],
)
def test_expired_leases(
    state: State, reentrant: bool, attempts: int, expected: tuple[State, Reason]
) -> None:
    d = decide_expired(state=state, reentrant=reentrant, attempts=attempts, max_attempts=5)
    assert (d.to_state, d.reason) == expected
