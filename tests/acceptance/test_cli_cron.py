"""``jobtrail cron list``, run as a subprocess against a fresh SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

CRON_APP = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.periodic("0 0 * * *", catch_up=1, tz="Europe/Berlin")
    def nightly(ctx, payload):
        return None


    @app.periodic("*/5 * * * *", kind="poll", queue="polling", on_paused="skip")
    def poll(ctx, payload):
        return None
""")

# One scheduler pass to see the schedules, then three days of downtime for "nightly" (its
# anchor moved back), then a pass that catches up: one window enqueued, two skipped.
DOWNTIME = textwrap.dedent("""
    import sqlite3, sys
    from cronapp import app
    app.migrate()
    app.schedule_due()
    db = sqlite3.connect(sys.argv[1])
    db.execute("UPDATE jobtrail_cron_schedules SET anchor_at = anchor_at - 3 * 86400 "
               "WHERE kind = 'nightly'")
    db.commit()
    print(len(app.schedule_due()))
""")


def run(cwd: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env["JOBTRAIL_DATABASE_URL"] = f"sqlite:///{cwd / 't.db'}"
    proc = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, (args, proc.stdout, proc.stderr)
    return proc


def jobtrail(cwd: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    return run(cwd, "-m", "jobtrail", *args, code=code)


def test_cron_list(tmp_path: Path) -> None:
    (tmp_path / "cronapp.py").write_text(CRON_APP)
    err = jobtrail(tmp_path, "cron", "list", code=3).stderr
    assert err.startswith("jobtrail: error: ") and "jobtrail migrate" in err

    jobtrail(tmp_path, "migrate")
    assert "no cron schedules" in jobtrail(tmp_path, "cron", "list").stdout
    assert run(tmp_path, "-c", DOWNTIME, str(tmp_path / "t.db")).stdout.strip() == "3"

    text = jobtrail(tmp_path, "cron", "list", "--app", "cronapp:app").stdout
    assert "nightly  '0 0 * * *'  tz Europe/Berlin  queue default" in text
    assert "poll  '*/5 * * * *'  tz UTC  queue polling" in text
    assert "catch_up 0" not in text and "on_paused skip" in text
    assert text.count("window_skipped_catch_up_bound") == 2
    assert "cron window skipped: beyond the catch-up bound" in text
    assert "not registered" not in text

    data: Any = json.loads(jobtrail(tmp_path, "cron", "list", "--json").stdout)
    assert [s["kind"] for s in data] == ["nightly", "poll"]
    nightly = data[0]
    assert nightly["registered"] is False  # known from the store, without --app
    assert nightly["last_window"] and nightly["next_window"] > nightly["last_window"]
    assert [w["reason"] for w in nightly["recent_skipped"]] == ["window_skipped_catch_up_bound"] * 2
    assert nightly["recent_skipped"][0]["window"] < nightly["last_window"]
    assert data[1]["recent_skipped"] == [] and data[1]["last_window"] is None

    assert "(not registered by this app)" in jobtrail(tmp_path, "cron", "list").stdout
    fewer: Any = json.loads(jobtrail(tmp_path, "cron", "list", "--json", "--skipped", "1").stdout)
    assert len(fewer[0]["recent_skipped"]) == 1

    tasks: Any = json.loads(jobtrail(tmp_path, "list", "--json").stdout)
    assert [(t["kind"], t["idempotency_key"][:5]) for t in tasks] == [("nightly", "cron:")]
