"""The adaptive prefetch's rule (``worker.prefetch``): what it claims ahead behind which tasks."""

from __future__ import annotations

from typing import Any

import pytest

from jobtrail.core.context import Attempt
from jobtrail.model.kinds import KindSpec
from jobtrail.worker.prefetch import SHORT, Prefetch


def attempt(
    kind: str, *, started: float = 100.0, begun: bool = True, done: bool = False
) -> Attempt:
    task: Any = type("T", (), {"kind": kind, "id": "1", "parent_id": None})()
    spec: Any = KindSpec.__new__(KindSpec)
    a = Attempt(task=task, spec=spec, owner="w", number=1, lease_seconds=30.0, started=started)
    a.begun, a.handler_done = begun, done
    return a


def test_nothing_ahead_while_idle_or_behind_a_kind_never_seen_run() -> None:
    p = Prefetch(None, concurrency=4)
    assert p.room([], now=100.0) == 0
    assert p.room([attempt("new")], now=100.0) == 0
    assert p.room([attempt("new", begun=False)], now=100.0) == 0


def test_one_ahead_behind_each_short_task_held_at_most_concurrency() -> None:
    p = Prefetch(None, concurrency=4)
    p.observe("quick", 0.001)
    assert p.room([attempt("quick") for _ in range(3)], now=100.0 + SHORT / 2) == 3
    # waiting for a slot counts too (it will run short), and the total is capped
    waiting = [attempt("quick", begun=False) for _ in range(6)]
    assert p.room(waiting, now=100.0) == 4
    # not behind one that has run SHORT already, nor behind one whose handler returned
    old = attempt("quick", started=100.0 - 2 * SHORT)
    done = attempt("quick", done=True)
    assert p.room([old, done], now=100.0) == 0


def test_one_long_run_withdraws_a_kind_until_it_has_decayed() -> None:
    p = Prefetch(None, concurrency=4)
    p.observe("mixed", 0.001)
    p.observe("mixed", 2.0)
    young = [attempt("mixed")]
    assert p.room(young, now=100.0) == 0
    runs = 0
    while p.room(young, now=100.0) == 0:
        p.observe("mixed", 0.001)
        runs += 1
        assert runs < 1000
    assert 50 < runs < 150  # about a hundred short runs


def test_a_fixed_prefetch_claims_its_count_ahead_whatever_runs() -> None:
    assert Prefetch(3, concurrency=1).room([], now=0.0) == 3
    assert Prefetch(0, concurrency=1).room([attempt("x", started=0.0)], now=0.0) == 0
    with pytest.raises(ValueError, match="prefetch"):
        Prefetch(-1, concurrency=1)
