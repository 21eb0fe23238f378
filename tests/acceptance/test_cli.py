"""The real ``jobtrail`` CLI, run as subprocesses against a fresh SQLite file.

Exit codes (``jobtrail.cli.EXIT_CODES``; each is tested in test_cli_errors.py): 0 success, 1
refusal, 2 bad input, 3 the store cannot be used. Expected errors are one line on stderr, never
a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _worker_log import stray_traceback

APP_MODULE = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.task("echo")
    def echo(ctx, payload):
        return payload


    @app.task("boom")
    def boom(ctx, payload):
        raise jobtrail.PermanentError("bad input", category="invalid_input")
""")


class Cli:
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
        self.env["JOBTRAIL_DATABASE_URL"] = f"sqlite:///{cwd / 't.db'}"

    def __call__(
        self, *args: str, code: int = 0, app: bool = False
    ) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "jobtrail", *args]
        if app:
            argv += ["--app", "cliapp:app"]
        proc = subprocess.run(
            argv, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=60
        )
        assert not stray_traceback(proc.stderr), proc.stderr
        assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
        if code:
            assert proc.stderr.startswith("jobtrail: error: "), proc.stderr
            assert proc.stderr.count("\n") == 1, proc.stderr
        return proc

    def json(self, *args: str, app: bool = False) -> Any:
        return json.loads(self(*args, "--json", app=app).stdout)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    (tmp_path / "cliapp.py").write_text(APP_MODULE)
    return Cli(tmp_path)


def test_migrate_enqueue_idempotency_and_bad_input(cli: Cli) -> None:
    # Read-only verbs before migrate: a clear refusal, and no stray database file.
    assert "jobtrail migrate" in cli("list", code=3).stderr
    assert not (cli.cwd / "t.db").exists()
    assert "applied migration(s) 1" in cli("migrate").stdout
    assert "up to date" in cli("migrate").stdout
    assert cli.json("migrate")["applied"] == []

    # Malformed payload: exit 2, nothing stored.
    err = cli("enqueue", "echo", "{not json", app=True, code=2).stderr
    assert "PAYLOAD_JSON is not valid JSON" in err
    assert cli.json("list") == []

    first = cli.json("enqueue", "echo", '{"n": 1}', "--key", "order-7", app=True)
    again = cli.json("enqueue", "echo", '{"n": 1}', "--key", "order-7", app=True)
    assert (first["created"], again["created"]) == (True, False)
    assert again["id"] == first["id"] and again["state"] == "queued"

    err = cli("enqueue", "echo", '{"n": 2}', "--key", "order-7", app=True, code=1).stderr
    assert "idempotency key 'order-7'" in err and f"task {first['id']}" in err

    err = cli("enqueue", "nope", app=True, code=2).stderr
    assert "unknown task kind 'nope'" in err and "boom, echo" in err
    err = cli("enqueue", "echo", "{}", code=2).stderr  # no --app, no JOBTRAIL_APP
    assert "--app" in err and "JOBTRAIL_APP" in err
    assert len(cli.json("list")) == 1

    # Cancel a delayed task; a second cancel is idempotent.
    delayed = cli.json("enqueue", "echo", "--delay", "1h", app=True)
    out = cli("cancel", delayed["id"], "--by", "alice", "--note", "wrong one").stdout
    assert "cancelled" in out
    again = cli.json("cancel", delayed["id"], "--by", "alice")
    assert again == {
        "task_id": delayed["id"],
        "outcome": "already_terminal",
        "state": "cancelled",
        "reason": "cancelled_before_start",
    }

    assert "Missing option '--by'" in cli("cancel", delayed["id"], code=2).stderr
    assert "no task with id '999'" in cli("status", "999", code=1).stderr


def test_worker_status_explain_replay_force_dismiss(cli: Cli) -> None:
    cli("migrate")
    ok = cli.json("enqueue", "echo", '{"hello": "world"}', app=True)["id"]
    dead1 = cli.json("enqueue", "boom", "{}", app=True)["id"]
    dead2 = cli.json("enqueue", "boom", "{}", "--priority", "5", app=True)["id"]

    worker = cli("worker", "--burst", "--poll-interval", "0.05", "--prefetch", "AUTO", app=True)
    assert "processed 3 attempt(s)" in worker.stdout
    assert "INFO" in worker.stderr

    states = {t["id"]: (t["state"], t["last_reason"]) for t in cli.json("list")}
    assert states == {
        ok: ("succeeded", "completed"),
        dead1: ("dead", "permanent_error"),
        dead2: ("dead", "permanent_error"),
    }
    table = cli("list", "--state", "dead").stdout.splitlines()
    assert table[0].split()[:5] == ["ID", "KIND", "QUEUE", "TENANT", "STATE"]
    assert len(table) == 3 and all("permanent_error" in line for line in table[1:])
    assert "unknown state 'nope'" in cli("list", "--state", "nope", code=2).stderr

    status = cli("status", dead1).stdout
    assert "dead (permanent_error)" in status and "1/5" in status and "bad input" in status
    assert cli.json("status", ok)["state"] == "succeeded"

    explained = cli("explain", dead1).stdout
    for code in ("enqueued", "claimed", "permanent_error"):
        assert code in explained
    # --traceback: each failure's whole traceback, indented under a line naming it
    assert "Traceback (most recent call last)" not in explained
    full = cli("explain", dead1, "--traceback").stdout
    assert full.startswith(explained.rstrip("\n"))
    tail = full.split("\ntracebacks:\n", 1)[1].splitlines()
    assert tail[0].startswith("#3 ") and "permanent_error, attempt 1: " in tail[0]
    assert tail[0].endswith("jobtrail.model.errors.PermanentError")
    assert tail[1] == "    Traceback (most recent call last):"
    assert all(line.startswith("    ") for line in tail[1:])
    assert "PermanentError: bad input" in tail[-1]
    assert "没有调用栈" in cli("explain", ok, "--traceback", "--lang", "zh").stdout
    data = cli.json("explain", ok)
    assert [t["reason"] for t in data["transitions"]] == ["enqueued", "claimed", "completed"]
    assert data["task"]["id"] == ok and data["explanation"]

    # replay: only a dead task; the refusal names the current state.
    assert "succeeded" in cli("replay", ok, "--by", "ops", "--note", "again", code=1).stderr
    replayed = cli.json("replay", dead1, "--by", "ops", "--note", "fixed the input")
    assert (replayed["state"], replayed["replay_count"]) == ("queued", 1)

    # replay-dead: by reason and a duration ago (the database clock); dead1 is no longer dead.
    batch = cli.json(
        "replay-dead",
        "--reason",
        "permanent_error",
        "--since",
        "1h",
        "--by",
        "ops",
        "--note",
        "bulk fix",
    )
    assert batch == [{"task_id": dead2, "state": "queued"}]
    assert (
        "--since"
        in cli("replay-dead", "--since", "yesterday", "--by", "ops", "--note", "x", code=2).stderr
    )

    # force: operator and note required; queued → dead is a manual_fix.
    assert "Missing option '--note'" in cli("force", dead1, "dead", "--by", "ops", code=2).stderr
    forced = cli.json("force", dead1, "dead", "--by", "ops", "--note", "not needed")
    assert (forced["state"], forced["last_reason"]) == ("dead", "manual_fix")

    note = cli.json("annotate", dead1, "--by", "ops", "--note", "typo", "--corrects", "1")
    assert (note["reason"], note["corrects"]) == ("correction", 1)
    dismissed = cli.json("dismiss", dead1, "--by", "ops", "--note", "revoked permission")
    assert dismissed["dismissed"] is True and dismissed["state"] == "dead"
    assert "dead" in cli("dismiss", ok, "--by", "ops", "--note", "x", code=1).stderr

    assert cli("sweep").stdout.startswith("swept")
    assert cli.json("check") == []
