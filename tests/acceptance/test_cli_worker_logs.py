"""``jobtrail worker --log-level --log-format`` as a real subprocess: the start line
names the database (no password; a relative SQLite path shown absolute), queues, kinds and
concurrency; a retried failure logs at WARNING and a dead one at ERROR, each with its
traceback; DEBUG adds one line per finished attempt; JSON lines carry task id, kind, attempt,
reason and duration. Never a payload or a result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from _worker_log import RECORD
from conftest import make_store

APP_MODULE = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.task("flaky", backoff_base=0.001, backoff_cap=0.001)
    def flaky(ctx, payload):
        if ctx.attempt == 1:
            return payload["missing"]  # KeyError on the first attempt
        return {"result_secret": "r3sult"}


    @app.task("doomed", max_attempts=1)
    def doomed(ctx, payload):
        raise RuntimeError("the printer is on fire")
""")


def _worker(cwd: Path, url: str, *options: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env["JOBTRAIL_DATABASE_URL"] = url
    base = [sys.executable, "-m", "jobtrail"]
    # only migrate creates a SQLite file (enqueue and worker refuse a missing one)
    subprocess.run([*base, "migrate"], cwd=cwd, env=env, check=True, capture_output=True)
    for kind in ("flaky", "doomed"):
        subprocess.run(
            [*base, "enqueue", kind, '{"payload_secret": "p4yload"}', "--app", "logapp:app"],
            cwd=cwd,
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
    argv = [*base, "worker", "--app", "logapp:app", "--burst", "--poll-interval", "0.05"]
    proc = subprocess.run(
        [*argv, "--concurrency", "3", *options],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "p4yload" not in proc.stderr and "r3sult" not in proc.stderr
    return proc


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    (tmp_path / "logapp.py").write_text(APP_MODULE)
    return tmp_path


def test_json_lines_on_sqlite_with_a_relative_path(cwd: Path) -> None:
    proc = _worker(cwd, "sqlite:///rel.db", "--log-level", "DEBUG", "--log-format", "json")
    lines = [json.loads(line) for line in proc.stderr.splitlines()]
    start = next(r for r in lines if "started" in r["message"])
    assert f"database=sqlite:///{cwd / 'rel.db'}" in start["message"]
    assert "queues=default" in start["message"]
    assert "kinds=doomed,flaky" in start["message"]
    assert "concurrency=3" in start["message"]
    attempts = [r for r in lines if "attempt" in r]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for record in attempts:
        assert {"task_id", "kind", "attempt", "reason", "duration_ms"} <= set(record)
        assert isinstance(record["duration_ms"], float) and record["duration_ms"] >= 0
        by_kind.setdefault(record["kind"], []).append(record)
    retried, done = by_kind["flaky"]
    assert (retried["level"], retried["reason"], retried["attempt"]) == (
        "WARNING",
        "retry_scheduled",
        1,
    )
    assert "KeyError: 'missing'" in retried["traceback"]
    assert 'logapp.py", line' in retried["traceback"]
    assert (done["level"], done["reason"], done["attempt"]) == ("DEBUG", "completed", 2)
    assert "traceback" not in done
    (dead,) = by_kind["doomed"]
    assert (dead["level"], dead["reason"], dead["state"]) == ("ERROR", "attempts_exhausted", "dead")
    assert "RuntimeError: the printer is on fire" in dead["traceback"]


def test_text_lines_on_postgres_mask_the_password(cwd: Path, tmp_path: Path) -> None:
    store = make_store("postgres", tmp_path)
    try:
        parts = urlsplit(store.url)
        host = parts.hostname or ""
        netloc = f"{parts.username or 'postgres'}:pa55word@{host}:{parts.port or 5432}"
        url = urlunsplit(parts._replace(netloc=netloc))  # trust auth: the password is unused
        proc = _worker(cwd, url)  # the defaults: INFO, text
    finally:
        store.close()
    text = proc.stderr
    assert "pa55word" not in text
    start = next(line for line in text.splitlines() if " started: " in line)
    assert f"database=postgresql://{parts.username or 'postgres'}:***@{host}" in start
    assert "INFO jobtrail.worker" in start
    assert "WARNING jobtrail.worker: task" in text and "KeyError: 'missing'" in text
    assert "ERROR jobtrail.worker: task" in text and "the printer is on fire" in text
    assert "Traceback (most recent call last):" in text
    assert "DEBUG" not in text  # INFO hides the per-attempt success lines
    assert "(completed)" not in text


FORGED = "2026-01-01 00:00:00,000 INFO jobtrail.worker: task 1 (doomed) attempt 1: succeeded"
FORGING_APP = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.task("forger", max_attempts=1)
    def forger(ctx, payload):
        raise RuntimeError(payload["text"])
""")


def test_a_handlers_error_text_cannot_start_a_log_line(tmp_path: Path) -> None:
    """Log lines are one line: the exception text of a handler (payload text here) is escaped in the
    summary line and every traceback line is indented, so no line of the log begins with it."""
    (tmp_path / "forgeapp.py").write_text(FORGING_APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env["JOBTRAIL_DATABASE_URL"] = "sqlite:///forge.db"
    base = [sys.executable, "-m", "jobtrail"]
    text = f"no\n{FORGED}\r\n{FORGED}\u2028{FORGED}\x1b[2J"
    payload = json.dumps({"text": text})
    run = {"cwd": tmp_path, "env": env, "capture_output": True, "text": True, "timeout": 60}
    subprocess.run([*base, "migrate"], check=True, **run)  # type: ignore[call-overload]
    enqueue = [*base, "enqueue", "forger", payload, "--app", "forgeapp:app"]
    subprocess.run(enqueue, check=True, **run)  # type: ignore[call-overload]
    proc = subprocess.run(  # type: ignore[call-overload]
        [*base, "worker", "--app", "forgeapp:app", "--burst", "--poll-interval", "0.05"], **run
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    summary = next(line for line in lines if "forger) attempt 1 failed" in line)
    assert "RuntimeError: no\\x0a2026-01-01" in summary and "\\x1b[2J" in summary
    assert "Traceback (most recent call last):" in proc.stderr
    for line in lines:
        # every line is a record's own head, or indented under it
        assert RECORD.match(line) or line.startswith(" "), line
        assert not line.startswith(FORGED), line
    assert "\x1b" not in proc.stderr


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_idle_worker_logs_its_start_and_its_stop_only(
    backend: str, cwd: Path, tmp_path: Path
) -> None:
    """Quiet logs (issue 38, Logs): at the default level an idle worker writes its start line
    and, when stopped, its stop — no library's routine chatter (psycopg_pool logged each
    check-out at INFO: ~20 lines a second from an idle PostgreSQL worker)."""
    store = make_store(backend, tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env["JOBTRAIL_DATABASE_URL"] = store.url
    err = tmp_path / "worker.err"
    try:
        # only migrate creates a SQLite file; the worker refuses a missing one
        migrate = [sys.executable, "-m", "jobtrail", "migrate"]
        subprocess.run(migrate, cwd=cwd, env=env, check=True, capture_output=True, timeout=60)
        with open(err, "wb") as sink:
            proc = subprocess.Popen(
                [sys.executable, "-m", "jobtrail", "worker", "--app", "logapp:app",
                 "--poll-interval", "0.05"],
                cwd=cwd, env=env, stderr=sink, stdout=subprocess.DEVNULL,
            )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while " started: " not in err.read_text() and time.monotonic() < deadline:
                assert proc.poll() is None, err.read_text()
                time.sleep(0.05)
            # idle for a while: some forty polls, each a round trip (the window is the point
            # of the test; nothing races with it)
            time.sleep(2.0)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 0, err.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        store.close()
    lines = err.read_text().splitlines()
    assert len(lines) == 3, lines
    assert " INFO jobtrail.worker: " in lines[0] and " started: " in lines[0]
    assert "signal 2, stopping" in lines[1]
    assert " stopped: " in lines[2]
