"""Replay runs, issue 19: a replay run whose driving process dies is seen for what it is. A real
``jobtrail replay-dead`` subprocess drives a run whose first batch cannot settle (no worker
runs), beats its heartbeat while it waits, and is killed with SIGKILL; the sweep then stops the
run as ``interrupted`` (naming the driver that stopped beating), the tasks it did not replay stay
dead, and replaying with the run's recorded ``until`` continues with exactly those. Both
backends."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from _integration_helpers import wait_until

import jobtrail
from jobtrail.services.sweeper import sweep

SRC = Path(__file__).resolve().parents[2] / "src"
#: The silence after which this test's sweeps take a driver for gone (the default is 30 s;
#: the driver beats every second, so 2.5 s of silence is a stopped driver, not a slow one).
STALE = 2.5


def _dead(app: jobtrail.App, n: int) -> list[str]:
    @app.task("boom", max_attempts=1)
    def boom(ctx: Any, payload: Any) -> None:
        raise jobtrail.PermanentError("still broken", category="invalid_input")

    ids = [app.enqueue("boom", {"n": i}).id for i in range(n)]
    app.run_worker(burst=True, poll_interval=0.05)
    assert all(app.get(i).state == "dead" for i in ids)
    return ids


def _cli(store: Any, tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env.update(store.env())
    env["PYTHONPATH"] = str(SRC)
    env["JOBTRAIL_DATABASE_URL"] = store.url
    with open(tmp_path / "cli.log", "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "jobtrail", *args],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_a_sigkilled_replay_run_is_stopped_as_interrupted_and_can_be_continued(
    store: Any, tmp_path: Path
) -> None:
    app = store.app()
    ids = _dead(app, 5)
    proc = _cli(store, tmp_path, "replay-dead", "--kind", "boom", "--by", "ops", "--note",
                "provider back?", "--batch-size", "2", "--batch-timeout", "600")  # fmt: skip
    try:
        first = wait_until(
            lambda: [r for r in app.replay_runs() if r["replayed"] == 2],
            timeout=30,
            what="the CLI to replay its first batch",
        )[0]
        assert first["state"] == "running" and first["detached"] is False
        assert f":{proc.pid}/" in first["driver"] and first["driver"].startswith("caller@")

        # alive and waiting for a batch that cannot settle: it beats, so sweeps that take a
        # driver silent for STALE seconds for gone leave it running
        def beaten() -> bool:
            sweep(app._driver, replay_stale=STALE)
            [now] = app.replay_runs(run_id=first["id"])
            assert now["state"] == "running", now
            return bool(now["heartbeat_at"] - first["heartbeat_at"] > timedelta(seconds=STALE))

        wait_until(beaten, timeout=20, interval=0.2, what="the driver to beat past STALE")
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(10)
    [killed] = app.replay_runs(run_id=first["id"])
    assert killed["state"] == "running"  # nothing stopped it yet: its record cannot know

    def stopped() -> dict[str, Any] | None:
        sweep(app._driver, replay_stale=STALE)
        [now] = app.replay_runs(run_id=first["id"])
        return now if now["state"] != "running" else None

    record = wait_until(stopped, timeout=20, interval=0.2, what="the sweep to stop the run")
    assert (record["state"], record["stop_code"]) == ("stopped", "interrupted")
    assert (record["replayed"], record["batches"], record["died_again"]) == (2, 1, 0)
    assert record["driver"] == first["driver"] and record["stopped_by"].startswith("sweeper@")
    assert record["stop_reason"].startswith(f"its driver {first['driver']} stopped beating at ")
    assert record["stop_reason"].endswith("(killed?); the rest stay dead")
    assert record["finished_at"] is not None
    replayed = [i for i in ids if app.get(i).state != "dead"]
    assert len(replayed) == 2 and all(app.get(i).state == "queued" for i in replayed)
    # a late sweep changes nothing more
    sweep(app._driver, replay_stale=STALE)
    assert app.replay_runs(run_id=first["id"]) == [record]

    # continuing: the run's recorded until picks exactly the three it did not replay
    rest = app.replay_dead(kind="boom", until=record["filter"]["until"], by="ops", note="rest")
    assert sorted(i for i, _ in rest) == sorted(set(ids) - set(replayed))
    newest = app.replay_runs()[0]
    assert (newest["state"], newest["replayed"]) == ("completed", 3)


def _age_heartbeat(store: Any, run_id: int, seconds: float) -> None:
    """Move a run's last beat ``seconds`` into the past, straight in the store (what 30 s of
    silence would leave), so that the readers' default bound applies without waiting it."""
    if store.postgres:
        import psycopg

        with psycopg.connect(store.direct_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE jobtrail_replay_runs SET heartbeat_at = heartbeat_at - "
                "make_interval(secs => %s) WHERE id = %s",
                (seconds, run_id),
            )
    else:
        import sqlite3

        conn = sqlite3.connect(store.url.removeprefix("sqlite:///"))
        with conn:
            conn.execute(
                "UPDATE jobtrail_replay_runs SET heartbeat_at = heartbeat_at - ? WHERE id = ?",
                (seconds, run_id),
            )
        conn.close()


def test_without_any_worker_the_run_list_itself_stops_a_run_whose_driver_is_gone(
    store: Any, tmp_path: Path
) -> None:
    app = store.app()
    _dead(app, 3)
    proc = _cli(store, tmp_path, "replay-dead", "--kind", "boom", "--by", "ops", "--note", "n",
                "--batch-size", "1", "--batch-timeout", "600")  # fmt: skip
    try:
        first = wait_until(
            lambda: [r for r in app.replay_runs() if r["replayed"] == 1],
            timeout=30,
            what="the CLI to replay its first batch",
        )[0]
    finally:
        proc.kill()
        proc.wait(10)
    _age_heartbeat(store, first["id"], 29.0)  # silent, but not for 30 s yet: still running
    assert app.replay_runs(run_id=first["id"])[0]["state"] == "running"
    _age_heartbeat(store, first["id"], 2.0)
    [record] = app.replay_runs(run_id=first["id"])  # no sweep: the reader stops it
    assert (record["state"], record["stop_code"], record["replayed"]) == (
        "stopped",
        "interrupted",
        1,
    )
    assert "stopped beating" in record["stop_reason"]
    assert record["stopped_by"].startswith("reader@")
