"""The adaptive prefetch's rule (``worker.prefetch``): when it claims ahead, and how many."""

from __future__ import annotations

from typing import Any

import pytest

from jobtrail.core.context import Attempt
from jobtrail.model.kinds import KindSpec
from jobtrail.worker.prefetch import BATCH, MEMORY, SHORT, WAIT, Prefetch, ahead_for


def attempt(
    kind: str, *, started: float = 100.0, begun: bool = True, done: bool = False
) -> Attempt:
    task: Any = type("T", (), {"kind": kind, "id": "1", "parent_id": None})()
    spec: Any = KindSpec.__new__(KindSpec)
    a = Attempt(task=task, spec=spec, owner="w", number=1, lease_seconds=30.0, started=started)
    a.begun, a.handler_done = begun, done
    return a


def warm(concurrency: int = 4) -> Prefetch:
    p = Prefetch(None, concurrency=concurrency)
    p.observe("quick", 0.001, now=10.0)
    return p


def test_nothing_ahead_before_anything_ran_or_with_one_slot() -> None:
    assert Prefetch(None, concurrency=4).room([], now=100.0) == 0
    assert warm(concurrency=1).room([], now=100.0) == 0


def test_what_the_slots_run_in_wait_at_the_slowest_pace_at_most_sixty_a_round_trip() -> None:
    # runs just under SHORT: four per slot
    assert [ahead_for(c) for c in (1, 2, 4, 10, 16, 40, 70)] == [0, 8, 16, 40, 44, 39, 69]
    # runs of a millisecond: the round trip is filled to BATCH (at least concurrency - 1)
    assert [ahead_for(c, 0.001) for c in (1, 2, 4, 10, 70)] == [0, 58, 56, 50, 69]
    assert [ahead_for(4, s) for s in (0.005, 0.01, 0.015)] == [56, 32, 20]
    for concurrency in (2, 4, 10):  # a held task waits about WAIT at most
        for slowest in (0.0001, 0.001, 0.004, 0.01, 0.019):
            ahead = ahead_for(concurrency, slowest)
            assert ahead + concurrency <= BATCH
            assert ahead / concurrency * slowest <= WAIT
    p = warm()
    assert p.room([], now=100.0) == 56
    young = [attempt("quick"), attempt("quick", begun=False), attempt("slow", done=True)]
    assert p.room(young, now=100.0 + SHORT / 2) == 56
    p.observe("steady", 0.01, now=100.0)  # the slowest kind sets the pace
    assert p.room([], now=100.0) == 32


def test_nothing_ahead_while_a_handler_runs_long_or_an_unseen_kind_is_held() -> None:
    p = warm()
    assert p.room([attempt("quick", started=100.0 - 2 * SHORT)], now=100.0) == 0
    assert p.room([attempt("new", begun=False)], now=100.0) == 0
    assert p.room([attempt("new")], now=100.0) == 0


def test_a_long_run_stops_claiming_ahead_for_a_while_and_its_kind_until_it_decays() -> None:
    p = warm()
    p.observe("mixed", 2.0, now=100.0)
    assert p.room([], now=100.0 + MEMORY / 2) == 0
    later = 100.0 + MEMORY + 1
    assert p.room([], now=later) == 4  # one per slot while "mixed" is the slowest
    assert p.room([attempt("mixed", started=later)], now=later) == 0  # still not short
    runs = 0
    while not p.short("mixed"):
        p.observe("mixed", 0.001, now=later)
        runs += 1
        assert runs < 1000
    assert 50 < runs < 150  # about a hundred short runs


def test_a_fixed_prefetch_claims_its_count_ahead_whatever_runs() -> None:
    assert Prefetch(3, concurrency=1).room([], now=0.0) == 3
    assert Prefetch(0, concurrency=1).room([attempt("x", started=0.0)], now=0.0) == 0
    with pytest.raises(ValueError, match="prefetch"):
        Prefetch(-1, concurrency=1)
