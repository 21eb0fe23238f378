"""The failed-token throttle as a pure object: burst, sustained rate, per key, bounded."""

from __future__ import annotations

import pytest

from jobtrail.web.throttle import Throttle


def test_a_burst_then_one_try_per_interval() -> None:
    t = Throttle(failures=10, window=60.0)
    for _ in range(10):
        assert t.wait("a", 0.0) == 0
        t.failed("a", 0.0)
    assert t.wait("a", 0.0) == pytest.approx(6.0)
    assert t.wait("a", 5.9) > 0 and t.wait("a", 6.0) == 0
    t.failed("a", 6.0)
    assert t.wait("a", 6.0) == pytest.approx(6.0)
    # an hour of trying as fast as allowed after that: one try per 6 s, not thousands
    tries, now = 0, 6.0
    while now < 3606.0:
        if t.wait("a", now) == 0:
            t.failed("a", now)
            tries += 1
        now += 0.5
    assert tries == 599  # at 12, 18, ..., 3600 s
    assert t.wait("b", now) == 0  # another address is not slowed


def test_quiet_time_restores_the_whole_budget() -> None:
    t = Throttle(failures=3, window=30.0)
    for _ in range(3):
        t.failed("a", 0.0)
    assert t.wait("a", 0.0) > 0
    for _ in range(3):
        assert t.wait("a", 30.0) == 0
        t.failed("a", 30.0)


def test_memory_is_bounded_by_max_clients() -> None:
    t = Throttle(failures=2, window=10.0, max_clients=100)
    for i in range(10_000):
        t.failed(f"10.0.{i // 256}.{i % 256}", 0.0)
    assert len(t) == 100
    t.failed("x", 0.0)
    t.failed("x", 0.0)
    assert t.wait("x", 0.0) > 0  # the newest addresses are the ones kept


def test_nonsense_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        Throttle(failures=0)
