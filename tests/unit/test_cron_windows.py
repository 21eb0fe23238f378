"""Cron windows as pure computation (``jobtrail.services.scheduler``): time zones, daylight
saving time, the catch-up plan. The rules tested here are the ones docs/cron.md states.

Europe/Berlin 2026: clocks go forward on 29 March at 02:00 CET (→ 03:00 CEST; 02:00–02:59 does
not exist) and back on 25 October at 03:00 CEST (→ 02:00 CET; 02:00–02:59 happens twice).
America/New_York 2026: forward on 8 March at 02:00, back on 1 November at 02:00.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobtrail.services.scheduler import (
    SKIPPED_ROWS,
    Schedule,
    make_schedule,
    plan,
    window_key,
    window_of_key,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
SPRING = date(2026, 3, 29)
FALL = date(2026, 10, 25)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def sched(cron: str, tz: str = "Europe/Berlin", catch_up: int = 1) -> Schedule:
    return make_schedule("k", cron, tz=tz, queue="default", catch_up=catch_up)


def on_local_day(schedule: Schedule, day: date) -> list[datetime]:
    """The windows whose local date (in the schedule's zone) is ``day``, in UTC."""
    start = datetime(day.year, day.month, day.day, tzinfo=UTC) - timedelta(days=1)
    windows, more = schedule.between(start, start + timedelta(days=3), 10_000)
    assert not more
    return [w for w in windows if w.astimezone(schedule.zone).date() == day]


# -- spring forward: a local time that does not exist fires once, right after the gap ----------
def test_spring_forward_nonexistent_time_fires_at_the_end_of_the_gap() -> None:
    s = sched("30 2 * * *")
    assert on_local_day(s, SPRING - timedelta(days=1)) == [utc(2026, 3, 28, 1, 30)]  # 02:30 CET
    assert on_local_day(s, SPRING) == [utc(2026, 3, 29, 1, 0)]  # 03:00 CEST
    assert on_local_day(s, SPRING + timedelta(days=1)) == [utc(2026, 3, 30, 0, 30)]  # 02:30 CEST
    assert utc(2026, 3, 29, 1, 0).astimezone(BERLIN).strftime("%H:%M %Z") == "03:00 CEST"


def test_spring_forward_windows_landing_on_one_instant_are_one_window() -> None:
    # 02:00 (does not exist → 03:00) and 03:00 are the same instant: one window, one task
    assert on_local_day(sched("0 2,3 * * *"), SPRING) == [utc(2026, 3, 29, 1, 0)]


def test_spring_forward_interval_schedules_lose_the_missing_hour() -> None:
    hourly = on_local_day(sched("0 * * * *"), SPRING)
    assert len(hourly) == 23  # the local day has 23 hours
    assert [w.astimezone(BERLIN).hour for w in hourly[:4]] == [0, 1, 3, 4]
    half = on_local_day(sched("*/30 * * * *"), SPRING)
    assert len(half) == 46
    assert all(b - a == timedelta(minutes=30) for a, b in zip(half, half[1:], strict=False))


# -- fall back: a local time that happens twice fires once, at its first occurrence -------------
def test_fall_back_repeated_time_fires_once_at_its_first_occurrence() -> None:
    s = sched("30 2 * * *")
    assert on_local_day(s, FALL) == [utc(2026, 10, 25, 0, 30)]  # 02:30 CEST, not 02:30 CET
    assert on_local_day(s, FALL + timedelta(days=1)) == [utc(2026, 10, 26, 1, 30)]  # 02:30 CET
    assert on_local_day(sched("0 2 * * *"), FALL) == [utc(2026, 10, 25, 0, 0)]
    assert on_local_day(sched("0,20,40 2 * * *"), FALL) == [
        utc(2026, 10, 25, 0, 0),
        utc(2026, 10, 25, 0, 20),
        utc(2026, 10, 25, 0, 40),
    ]


def test_fall_back_wildcard_minute_or_hour_keeps_its_rhythm_through_both_passes() -> None:
    hourly = on_local_day(sched("0 * * * *"), FALL)
    assert len(hourly) == 25  # the local day has 25 hours
    assert [w.astimezone(BERLIN).strftime("%H%Z") for w in hourly[1:5]] == [
        "01CEST",
        "02CEST",
        "02CET",
        "03CET",
    ]
    half = on_local_day(sched("*/30 * * * *"), FALL)
    assert len(half) == 50
    assert all(b - a == timedelta(minutes=30) for a, b in zip(half, half[1:], strict=False))
    # a minute field starting with "*" counts as a wildcard, even in a fixed hour
    assert len(on_local_day(sched("* 2 * * *"), FALL)) == 120
    assert len(on_local_day(sched("*/20 2 * * *"), FALL)) == 6


def test_new_york_follows_the_same_rules() -> None:
    assert on_local_day(sched("15 2 * * *", "America/New_York"), date(2026, 3, 8)) == [
        utc(2026, 3, 8, 7, 0)  # 03:00 EDT
    ]
    assert on_local_day(sched("30 1 * * *", "America/New_York"), date(2026, 11, 1)) == [
        utc(2026, 11, 1, 5, 30)  # 01:30 EDT, the first of the two
    ]


def test_utc_schedules_have_no_dst() -> None:
    s = sched("30 2 * * *", tz="UTC")
    assert on_local_day(s, SPRING) == [utc(2026, 3, 29, 2, 30)]
    assert on_local_day(s, FALL) == [utc(2026, 10, 25, 2, 30)]


@pytest.mark.parametrize(
    "cron", ["30 2 * * *", "0 * * * *", "*/30 * * * *", "0 2,3 * * *", "* 2 * * *", "0 0 * * *"]
)
@pytest.mark.parametrize("tz", ["Europe/Berlin", "America/New_York", "UTC"])
def test_newest_first_and_oldest_first_agree_across_dst(cron: str, tz: str) -> None:
    s = sched(cron, tz)
    for start in (utc(2026, 3, 6), utc(2026, 3, 27), utc(2026, 10, 23), utc(2026, 10, 30)):
        end = start + timedelta(days=4)
        forward, more = s.between(start, end, 10_000)
        assert not more
        assert s.newest(start, end, 10_000) == forward
        assert forward == sorted(set(forward))


# -- expressions -------------------------------------------------------------------------------
def test_a_sixth_field_is_seconds() -> None:
    s = sched("* * * * * */15", tz="UTC")
    windows, more = s.between(utc(2026, 1, 1), utc(2026, 1, 1, 0, 1), 100)
    assert not more and len(windows) == 4
    assert windows[0] == utc(2026, 1, 1, 0, 0, 15) and windows[-1] == utc(2026, 1, 1, 0, 1)


def test_hashed_fields_spread_by_kind_and_are_stable() -> None:
    a = make_schedule("report_a", "H H * * *", queue="q")
    b = make_schedule("report_a", "H H * * *", queue="q")
    assert a.next_after(utc(2026, 1, 1)) == b.next_after(utc(2026, 1, 1))


def test_between_and_newest_bounds() -> None:
    s = sched("0 * * * *", tz="UTC")
    windows, more = s.between(utc(2026, 1, 1), utc(2026, 1, 2), 5)
    assert more and windows == [utc(2026, 1, 1, h) for h in range(1, 6)]
    assert s.between(utc(2026, 1, 1), utc(2026, 1, 1, 1), 5) == ([utc(2026, 1, 1, 1)], False)
    assert s.newest(utc(2026, 1, 1), utc(2026, 1, 1, 10, 30), 2) == [
        utc(2026, 1, 1, 9),
        utc(2026, 1, 1, 10),
    ]
    assert s.newest(utc(2026, 1, 1, 10), utc(2026, 1, 1, 10, 30), 2) == []  # start excluded
    assert s.next_after(utc(2026, 1, 1, 10)) == utc(2026, 1, 1, 11)


def test_window_keys_round_trip() -> None:
    w = utc(2026, 3, 29, 1, 0)
    assert window_key(w) == "cron:2026-03-29T01:00:00Z"
    assert window_key(w.astimezone(BERLIN)) == "cron:2026-03-29T01:00:00Z"
    assert window_of_key(window_key(w)) == w
    assert window_of_key("note-42") is None and window_of_key(None) is None
    assert window_of_key("cron:garbage") is None


# -- the catch-up plan -------------------------------------------------------------------------
def test_plan_runs_the_newest_catch_up_windows() -> None:
    s = sched("0 * * * *", tz="UTC", catch_up=2)
    p = plan(s, utc(2026, 1, 1), utc(2026, 1, 1, 5, 30))
    assert p.run == [utc(2026, 1, 1, 4), utc(2026, 1, 1, 5)]
    assert p.skipped == [utc(2026, 1, 1, h) for h in (1, 2, 3)]
    assert p.earlier_skipped == 0
    assert plan(s, utc(2026, 1, 1, 5), utc(2026, 1, 1, 5, 30)).run == []


def test_plan_bounds_the_rows_and_counts_the_rest() -> None:
    s = sched("* * * * *", tz="UTC", catch_up=0)
    p = plan(s, utc(2026, 1, 1), utc(2026, 1, 1, 3))  # 180 missed windows
    assert p.run == [] and len(p.skipped) == SKIPPED_ROWS
    assert p.skipped[-1] == utc(2026, 1, 1, 3)
    assert p.earlier_skipped == 80
