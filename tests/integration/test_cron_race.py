"""Leader-free cron: scheduler processes racing on one store never enqueue a window twice.

Each racer is its own process (multiprocessing ``spawn``) with its own ``App`` on the same store
URL and the same periodic kinds. They start together behind a ``Barrier`` and call
``app.schedule_due()`` in a loop for a few seconds: first a catch-up after simulated downtime
(every racer plans the same missed windows at once), then every new second's window live.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

import jobtrail

RACERS = 3
SECONDS = 4.0


def nothing(ctx: Any, payload: Any) -> None:
    return None


def register(app: jobtrail.App) -> None:
    app.periodic("* * * * * *", kind="every_second", catch_up=50)(nothing)
    app.periodic("0 * * * *", kind="hourly", catch_up=5)(nothing)


def racer(url: str, barrier: Any, results: Any) -> None:
    app = jobtrail.App(url)
    register(app)
    done: list[tuple[str, str, str, str | None]] = []
    try:
        barrier.wait(timeout=60)
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            for r in app.schedule_due():
                done.append((r["kind"], r["window"].isoformat(), r["state"], r["task_id"]))
            time.sleep(0.01)
    finally:
        app.close()
        results.put(done)


def rewind(app: jobtrail.App, kind: str, to: datetime) -> None:
    value = app._driver.encode_time(to)
    sql = "UPDATE jobtrail_cron_schedules SET anchor_at = {p} WHERE kind = {p}"
    with app._driver.transaction() as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        conn.execute(sql.format(p="?" if app._driver.dialect == "sqlite" else "%s"), (value, kind))


@pytest.mark.timeout(180)
def test_racing_schedulers_enqueue_each_window_once(store: Any) -> None:
    app = store.app()
    register(app)
    assert app.schedule_due() == []  # the schedules are seen: windows count from now
    now = app.db_now()
    rewind(app, "every_second", now - timedelta(minutes=10))  # 600 missed windows
    rewind(app, "hourly", now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=8))

    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(RACERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=racer, args=(store.url, barrier, results)) for _ in range(RACERS)]
    for p in procs:
        p.start()
    reports = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0

    # Each window was decided by exactly one racer ...
    decided = Counter((kind, window) for report in reports for kind, window, _, _ in report)
    assert decided and max(decided.values()) == 1
    # ... and what they report is exactly what the store holds: one row per window,
    for kind in ("every_second", "hourly"):
        rows = app.cron_windows(kind, limit=10_000)
        assert len(rows) == len({r["window"] for r in rows})
        assert {(kind, r["window"].isoformat()) for r in rows} == {
            key for key in decided if key[0] == kind
        }
        # one task per enqueued window, due at its window, and no task without a window
        enqueued = [r for r in rows if r["state"] == "enqueued"]
        tasks = app.list(kind=kind, limit=10_000)
        assert len(tasks) == len(enqueued)
        assert sorted(t.id for t in tasks) == sorted(r["task_id"] for r in enqueued)
        by_id = {t.id: t for t in tasks}
        assert all(by_id[r["task_id"]].run_at == r["window"] for r in enqueued)
        assert Counter(t.run_at for t in tasks).most_common(1)[0][1] == 1

    hourly = app.cron_windows("hourly", limit=100)
    assert [r["state"] for r in hourly] == ["enqueued"] * 5 + ["skipped"] * 3
    # every second: the catch-up (50 run, the newest 100 skipped ones recorded, the ~450 before
    # them counted), then each live second's window with no gap and no repeat
    seconds = app.cron_windows("every_second", limit=10_000)[::-1]
    skipped = [r for r in seconds if r["state"] == "skipped"]
    # one catch-up plan records 100; racers whose passes read the database clock in different
    # seconds (a loaded machine, the pooler) plan from different nows, and the newest plan's
    # oldest skipped window or the oldest plan's newest run window may be recorded skipped by
    # the other: a few more, never fewer (seen: 101 through PgBouncer under CI's load)
    assert 100 <= len(skipped) <= 100 + 10, len(skipped)
    missed = skipped[0]["earlier_skipped"] + len(skipped) + 50  # 600, plus the racers' start
    assert 600 <= missed <= 600 + 90  # to start
    assert len(seconds) >= 150 + int(SECONDS) - 1
    gaps = {b["window"] - a["window"] for a, b in zip(seconds, seconds[1:], strict=False)}
    assert gaps == {timedelta(seconds=1)}
