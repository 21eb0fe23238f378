"""Cron on both backends: windows by the database clock, one task per window,
first run without backfill, the catch-up bound, paused queues, schedule changes.

Downtime is simulated without waiting: ``rewind`` moves a schedule's anchor (the time its
windows count from) into the past, as if the schedulers had last run then. Schedules are daily
or hourly and anchors fall on whole days or hours, so the number of due windows is exact.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobtrail
from jobtrail.services import scheduler

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
BOUND = "window_skipped_catch_up_bound"
PAUSED = "window_skipped_paused"


def rewind(app: jobtrail.App, kind: str, to: datetime) -> None:
    """Simulate downtime: the schedule's windows count from ``to``."""
    value = app._driver.encode_time(to)
    sql = "UPDATE jobtrail_cron_schedules SET anchor_at = {p} WHERE kind = {p}"
    with app._driver.transaction() as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        mark = "?" if app._driver.dialect == "sqlite" else "%s"
        conn.execute(sql.format(p=mark), (value, kind))


def day_floor(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def hour_floor(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def nothing(ctx: Any, payload: Any) -> None:
    return None


def daily(app: jobtrail.App, kind: str = "nightly", **options: Any) -> None:
    app.periodic("0 0 * * *", kind=kind, **options)(nothing)


# -- registration ------------------------------------------------------------------------------
def test_periodic_registers_a_kind_with_task_options(app: jobtrail.App) -> None:
    @app.periodic("*/5 * * * *", max_attempts=2, payload={"report": "daily"})
    def build_report(ctx: Any, payload: Any) -> None:
        return None

    assert "build_report" in app.kinds
    assert app._kinds["build_report"].max_attempts == 2
    assert app._kinds["build_report"].queue == "default"
    (item,) = app.schedules()
    assert item["kind"] == "build_report" and item["cron"] == "*/5 * * * *"
    assert item["tz"] == "UTC" and item["catch_up"] == 1 and item["on_paused"] == "run"
    assert item["registered"] is True and item["last_window"] is None
    # a periodic kind can still be enqueued by hand
    assert app.enqueue("build_report", {"report": "now"}).created


@pytest.mark.parametrize(
    ("args", "options", "message"),
    [
        (("61 * * * *",), {}, "invalid cron expression '61 * * * *'"),
        (("every day",), {}, "invalid cron expression 'every day'"),
        (("",), {}, "non-empty string"),
        (("0 0 31 2 *",), {}, "never fires"),
        (("0 0 * * *",), {"tz": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        (("0 0 * * *",), {"catch_up": -1}, "catch_up must be an integer >= 0"),
        (("0 0 * * *",), {"catch_up": True}, "catch_up must be an integer >= 0"),
        (("0 0 * * *",), {"catch_up": 1.5}, "catch_up must be an integer >= 0"),
        (("0 0 * * *",), {"catch_up": 100_000}, "catch_up must be at most"),
        (("0 0 * * *",), {"on_paused": "wait"}, "on_paused must be 'run' or 'skip'"),
        (("0 0 * * *",), {"queue": " bad"}, "queue must be"),
    ],
)
def test_periodic_refuses_bad_input_and_registers_nothing(
    app: jobtrail.App, args: tuple[Any, ...], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("*", r"\*").replace("(", r"\(")):
        app.periodic(*args, kind="k", **options)(nothing)
    assert app.kinds == [] and app.schedules() == []


def test_periodic_refuses_a_kind_twice_and_a_bad_payload(app: jobtrail.App) -> None:
    daily(app)
    with pytest.raises(ValueError, match="already registered"):
        daily(app)
    with pytest.raises(TypeError):
        app.periodic("0 0 * * *", kind="other", payload={"x": object()})(nothing)
    assert app.kinds == ["nightly"]


# -- first run ---------------------------------------------------------------------------------
def test_first_run_does_not_backfill(app: jobtrail.App) -> None:
    daily(app)
    app.periodic("0 * * * *", kind="hourly")(nothing)
    before = app.db_now()
    assert app.schedule_due() == []
    assert app.schedule_due() == []  # seen now: still nothing due before its next window
    after = app.db_now()
    assert app.list() == []
    by_kind = {s["kind"]: s for s in app.schedules()}
    assert by_kind["nightly"]["last_window"] is None
    # SQLite's clock (julianday) resolves to about a millisecond
    tick = timedelta(milliseconds=1)
    assert before - tick <= by_kind["nightly"]["since"] <= after + tick
    assert by_kind["nightly"]["next_window"] == day_floor(after) + DAY
    assert by_kind["hourly"]["next_window"] == hour_floor(after) + HOUR
    assert app.cron_windows("nightly") == []


# -- windows, one task each --------------------------------------------------------------------
def test_due_windows_are_enqueued_once_with_run_at_the_window(app: jobtrail.App) -> None:
    seen = []

    @app.periodic("0 0 * * *", catch_up=5, payload={"n": 1})
    def nightly(ctx: Any, payload: Any) -> None:
        seen.append((scheduler.window_of_key(ctx.task.idempotency_key), ctx.task.run_at, payload))

    app.schedule_due()
    today = day_floor(app.db_now())
    rewind(app, "nightly", today - 3 * DAY)
    done = app.schedule_due()
    windows = [today - 2 * DAY, today - DAY, today]
    assert [d["window"] for d in done] == windows
    assert {d["state"] for d in done} == {"enqueued"} and {d["reason"] for d in done} == {None}
    assert app.schedule_due() == []  # a second pass finds every window recorded

    recorded = app.cron_windows("nightly")
    assert [w["window"] for w in recorded] == windows[::-1]  # newest first
    for w in recorded:
        task = app.get(w["task_id"])
        assert task.kind == "nightly" and task.tenant == "" and task.payload == {"n": 1}
        assert task.run_at == w["window"]
        assert task.idempotency_key == "cron:" + w["window"].strftime("%Y-%m-%dT%H:%M:%SZ")
        (enqueued,) = app.transitions(task.id)
        assert enqueued.actor == "cron"
        assert enqueued.data["cron"] == "0 0 * * *" and enqueued.data["tz"] == "UTC"
        assert "for cron window" in app.explain(task.id)
    assert len(app.list()) == 3

    app.run_worker(burst=True)
    assert sorted(seen, key=lambda x: x[0]) == [(w, w, {"n": 1}) for w in windows]
    assert {t.state for t in app.list()} == {"succeeded"}


def test_two_schedulers_on_one_store_collapse_into_one_task_per_window(store: Any) -> None:
    first, second = store.app(), store.app()
    for a in (first, second):
        daily(a, catch_up=10)
    first.schedule_due()
    second.schedule_due()
    today = day_floor(first.db_now())
    rewind(first, "nightly", today - 5 * DAY)
    done = first.schedule_due() + second.schedule_due()
    assert [d["window"] for d in done] == [today - DAY * i for i in (4, 3, 2, 1, 0)]
    assert len(first.list()) == 5


def test_the_worker_runs_the_scheduler(app: jobtrail.App) -> None:
    ran = []

    @app.periodic("0 * * * *", catch_up=2)
    def hourly(ctx: Any, payload: Any) -> None:
        ran.append(ctx.task.run_at)

    app.schedule_due()
    now = hour_floor(app.db_now())
    rewind(app, "hourly", now - 5 * HOUR)
    app.run_worker(burst=True)  # its first loop schedules, then claims what came due
    assert sorted(ran) == [now - HOUR, now]
    states = [(w["window"], w["state"]) for w in app.cron_windows("hourly")]
    assert states == [
        (now, "enqueued"),
        (now - HOUR, "enqueued"),
        (now - 2 * HOUR, "skipped"),
        (now - 3 * HOUR, "skipped"),
        (now - 4 * HOUR, "skipped"),
    ]


# -- catch-up bound ----------------------------------------------------------------------------
def test_catch_up_runs_the_newest_windows_and_records_the_rest_as_skipped(
    app: jobtrail.App,
) -> None:
    daily(app, catch_up=2)
    app.schedule_due()
    today = day_floor(app.db_now())
    rewind(app, "nightly", today - 10 * DAY)
    app.schedule_due()
    windows = app.cron_windows("nightly")
    assert [w["window"] for w in windows] == [today - i * DAY for i in range(10)]
    assert [w["state"] for w in windows] == ["enqueued"] * 2 + ["skipped"] * 8
    assert all(w["reason"] == BOUND and w["task_id"] is None for w in windows[2:])
    assert all(w["earlier_skipped"] == 0 for w in windows)
    assert app.cron_windows("nightly", state="skipped", limit=3) == windows[2:5]
    assert [t.run_at for t in app.list()] == [today, today - DAY]
    (item,) = app.schedules()
    assert item["last_window"] == today and item["next_window"] == today + DAY


def test_catch_up_zero_skips_every_missed_window(app: jobtrail.App) -> None:
    daily(app, catch_up=0)
    app.schedule_due()
    today = day_floor(app.db_now())
    rewind(app, "nightly", today - 3 * DAY)
    done = app.schedule_due()
    assert [(d["state"], d["reason"]) for d in done] == [("skipped", BOUND)] * 3
    assert app.list() == []


def test_catch_up_records_the_newest_skipped_windows_and_counts_the_earlier_ones(
    app: jobtrail.App,
) -> None:
    app.periodic("0 * * * *", kind="hourly", catch_up=3)(nothing)
    app.schedule_due()
    now = hour_floor(app.db_now())
    rewind(app, "hourly", now - 150 * HOUR)  # 150 missed windows
    done = app.schedule_due()
    skipped = [d for d in done if d["state"] == "skipped"]
    assert len(skipped) == scheduler.SKIPPED_ROWS == 100
    assert skipped[0]["window"] == now - 102 * HOUR
    assert skipped[0]["earlier_skipped"] == 150 - 3 - 100
    assert all(d["earlier_skipped"] == 0 for d in done[1:])
    assert [d["window"] for d in done if d["state"] == "enqueued"] == [
        now - 2 * HOUR,
        now - HOUR,
        now,
    ]


def test_catch_up_scan_is_bounded(app: jobtrail.App) -> None:
    app.periodic("* * * * * *", kind="every_second", catch_up=2)(nothing)
    app.schedule_due()
    rewind(app, "every_second", app.db_now() - 3 * DAY)  # 259,200 missed windows
    started = time.monotonic()
    done = app.schedule_due()
    assert time.monotonic() - started < 20
    assert [d["state"] for d in done] == ["skipped"] * 100 + ["enqueued"] * 2
    assert done[0]["earlier_skipped"] == scheduler.SCAN_LIMIT  # counted up to the bound
    assert len(app.list()) == 2


# -- the database clock ------------------------------------------------------------------------
@pytest.mark.parametrize("skew", [timedelta(hours=1), -timedelta(hours=1), 2 * DAY, -2 * DAY])
def test_windows_follow_the_database_clock_not_the_local_one(
    app: jobtrail.App, monkeypatch: pytest.MonkeyPatch, skew: timedelta
) -> None:
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + skew.total_seconds())
    daily(app, catch_up=10)
    app.periodic("0 * * * *", kind="hourly", catch_up=10)(nothing)
    assert app.schedule_due() == []  # first run: from the database's now, skew or not
    now = app.db_now()
    assert abs(now.timestamp() - real()) < 60  # SQLite's clock is the host's, not time.time
    by_kind = {s["kind"]: s for s in app.schedules()}
    assert by_kind["nightly"]["next_window"] == day_floor(now) + DAY
    assert by_kind["hourly"]["next_window"] == hour_floor(now) + HOUR
    rewind(app, "nightly", day_floor(now) - 3 * DAY)
    rewind(app, "hourly", hour_floor(now) - 3 * HOUR)
    done = app.schedule_due()
    assert [(d["kind"], d["window"]) for d in done] == [
        ("hourly", hour_floor(now) - 2 * HOUR),
        ("hourly", hour_floor(now) - HOUR),
        ("hourly", hour_floor(now)),
        ("nightly", day_floor(now) - 2 * DAY),
        ("nightly", day_floor(now) - DAY),
        ("nightly", day_floor(now)),
    ]


# -- paused queues -----------------------------------------------------------------------------
def pause(app: jobtrail.App, queue: str) -> None:
    app.pause(queue, by="test", note="cron test")


def test_on_paused_skip_records_the_window_and_run_enqueues_it(app: jobtrail.App) -> None:
    daily(app, "skipper", queue="reports", on_paused="skip", catch_up=2)
    daily(app, "runner", queue="reports", on_paused="run", catch_up=2)
    daily(app, "elsewhere", on_paused="skip", catch_up=2)
    app.schedule_due()
    pause(app, "reports")
    today = day_floor(app.db_now())
    for kind in ("skipper", "runner", "elsewhere"):
        rewind(app, kind, today - 3 * DAY)
    app.schedule_due()
    skipper = app.cron_windows("skipper")
    assert [(w["state"], w["reason"]) for w in skipper] == [
        ("skipped", PAUSED),
        ("skipped", PAUSED),
        ("skipped", BOUND),
    ]
    assert [w["state"] for w in app.cron_windows("runner")] == ["enqueued"] * 2 + ["skipped"]
    assert [w["state"] for w in app.cron_windows("elsewhere")] == ["enqueued"] * 2 + ["skipped"]
    assert sorted(t.kind for t in app.list()) == ["elsewhere"] * 2 + ["runner"] * 2


def test_no_queues_table_means_not_paused(app: jobtrail.App) -> None:
    daily(app, on_paused="skip")
    app.schedule_due()
    rewind(app, "nightly", day_floor(app.db_now()) - DAY)
    assert [d["state"] for d in app.schedule_due()] == ["enqueued"]


# -- schedule changes --------------------------------------------------------------------------
def test_a_changed_expression_starts_afresh(store: Any) -> None:
    old = store.app()
    daily(old, catch_up=5)
    old.schedule_due()
    today = day_floor(old.db_now())
    rewind(old, "nightly", today - 4 * DAY)

    new = store.app()
    new.periodic("0 12 * * *", kind="nightly", catch_up=5)(nothing)
    assert new.schedule_due() == []  # the changed schedule is recorded, from now
    assert new.schedule_due() == []
    (item,) = new.schedules()
    assert item["cron"] == "0 12 * * *" and item["since"] > today
    assert new.list() == []

    # a change of catch_up or queue alone keeps the schedule's history
    same = store.app()
    same.periodic("0 12 * * *", kind="nightly", catch_up=1, queue="other")(nothing)
    assert same.schedule_due() == []
    (item2,) = same.schedules()
    assert item2["since"] == item["since"] and item2["catch_up"] == 1
    assert item2["queue"] == "other"


def test_schedules_lists_what_the_store_knows_without_the_registration(store: Any) -> None:
    app = store.app()
    daily(app, tz="Europe/Berlin")
    app.schedule_due()
    bare = store.app()
    (item,) = bare.schedules()
    assert item["kind"] == "nightly" and item["registered"] is False
    assert item["tz"] == "Europe/Berlin" and item["next_window"] is not None
    assert bare.schedule_due() == []  # a bare app schedules nothing


def test_cron_windows_refuses_bad_arguments(app: jobtrail.App) -> None:
    with pytest.raises(ValueError, match="limit"):
        app.cron_windows("nightly", limit=0)
    with pytest.raises(ValueError, match="state"):
        app.cron_windows("nightly", state="done")
    with pytest.raises(ValueError, match="kind"):
        app.cron_windows("")
    assert app.cron_windows("unknown") == []


# -- time zones and daylight saving time, end to end ----------------------------------------------
def test_dst_days_in_berlin_end_to_end(app: jobtrail.App) -> None:
    """Sundays at 02:30 in Berlin from 2025-03-29 on: the clocks change on Sundays (30 March
    and 26 October 2025). 02:30 did not exist on 30 March: that window is 03:00 CEST (01:00Z).
    02:30 happened twice on 26 October: the window is its first occurrence only (00:30Z)."""
    app.periodic("30 2 * * 0", kind="sunday", tz="Europe/Berlin", catch_up=1000)(nothing)
    app.schedule_due()
    rewind(app, "sunday", datetime(2025, 3, 29, tzinfo=UTC))
    app.schedule_due()
    windows = [w["window"] for w in app.cron_windows("sunday", limit=10_000)][::-1]
    assert windows[:3] == [
        datetime(2025, 3, 30, 1, 0, tzinfo=UTC),  # spring forward: 03:00 CEST
        datetime(2025, 4, 6, 0, 30, tzinfo=UTC),  # 02:30 CEST
        datetime(2025, 4, 13, 0, 30, tzinfo=UTC),
    ]
    fall = [w for w in windows if w.date() == datetime(2025, 10, 26).date()]
    assert fall == [datetime(2025, 10, 26, 0, 30, tzinfo=UTC)]  # once, 02:30 CEST
    assert datetime(2025, 11, 2, 1, 30, tzinfo=UTC) in windows  # 02:30 CET
    assert len(windows) == len(set(windows))
    assert all(w.astimezone(scheduler.ZoneInfo("Europe/Berlin")).weekday() == 6 for w in windows)


def test_the_workers_pass_never_raises(
    app: jobtrail.App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    daily(app)

    def down() -> list[dict[str, Any]]:
        raise jobtrail.StoreUnavailable("PostgreSQL is unreachable")

    monkeypatch.setattr(app._cron, "schedule_due", down)  # the cron part owns the pass
    app._cron_tick()  # logged, not raised: the worker keeps running
    assert "cron scheduling failed: StoreUnavailable" in caplog.text
