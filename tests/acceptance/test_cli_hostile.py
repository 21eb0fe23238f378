"""Hostile input through the real ``jobtrail`` CLI, on both backends: an argument
that is not text (an undecodable byte: NUL itself cannot travel in argv) or a number or
duration out of range is exit 2 with one line naming the option, never a traceback, and changes
nothing; a store that cannot write is one line and exit 1; and stored text with terminal control
characters is printed escaped in every human output, exact in ``--json``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _worker_log import stray_traceback
from conftest import Store
from test_http_hostile import fill, small_disk  # noqa: F401 - the fixture

SRC = Path(__file__).resolve().parents[2] / "src"
APP_MODULE = textwrap.dedent("""
    import jobtrail

    app = jobtrail.App()


    @app.task("send")
    def send(ctx, payload):
        return None


    @app.task("evil\\x1b[31m", max_attempts=1)
    def evil(ctx, payload):
        text = "boom \\x1b]0;owned\\x07 \\x1b[2J\\r\\x9b1mgone \\u202eexe.txt"
        raise jobtrail.PermanentError(text, category="invalid_input")
""")
#: What must never reach a terminal raw: C0 but newline and tab, DEL, C1, bidi overrides
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class Cli:
    def __init__(self, cwd: Path, url: str) -> None:
        (cwd / "hostileapp.py").write_text(APP_MODULE)
        self.cwd = cwd
        # behind PgBouncer the store fixture's JOBTRAIL_POOLER stays, as a deployment sets it
        # (without it the App says once that it found the pooler, on stderr)
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("JOBTRAIL_") or k == "JOBTRAIL_POOLER"
        }
        self.env.update(PYTHONPATH=str(SRC), JOBTRAIL_DATABASE_URL=url)

    def __call__(self, *args: str | bytes, code: int = 0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "jobtrail", *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            timeout=60,
        )
        out = proc.stdout.decode("utf-8")
        err = proc.stderr.decode("utf-8")
        assert not stray_traceback(err), err
        assert proc.returncode == code, (args, proc.returncode, out, err)
        if code:
            assert err.startswith("jobtrail: error: ") and err.count("\n") == 1, err
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)

    def snapshot(self) -> Any:
        tasks = self.json("list")
        return (
            tasks,
            [self.json("explain", t["id"])["transitions"] for t in tasks],
            self.json("queues"),
            self.json("queues", "--history", "default"),
        )


@pytest.fixture
def cli(store: Store, tmp_path: Path) -> Cli:
    c = Cli(tmp_path, store.url)
    c("migrate")
    return c


def test_bad_arguments_are_exit_2_naming_the_option(cli: Cli) -> None:
    task = cli.json("enqueue", "send", '{"n": 1}', "--app", "hostileapp:app")["id"]
    before = cli.snapshot()
    bad = b"a\xffb"  # not UTF-8: Python hands it over as a lone surrogate
    huge = "99999999999999999999"
    cases: list[tuple[tuple[str | bytes, ...], str]] = [
        (("list", "--kind", bad), "kind is not valid Unicode"),
        (("list", "--tenant", bad), "tenant is not valid Unicode"),
        (("list", "--queue", bad), "queue is not valid Unicode"),
        (("cancel", task, "--by", bad), "by is not valid Unicode"),
        (("cancel", task, "--by", "ops", "--note", bad), "note is not valid Unicode"),
        (("annotate", task, "--by", "ops", "--note", bad), "note is not valid Unicode"),
        (("pause", "default", "--by", bad, "--note", "n"), "by is not valid Unicode"),
        (("pause", bad, "--by", "ops", "--note", "n"), "queue is not valid Unicode"),
        (("replay-dead", "--kind", bad, "--by", "o", "--note", "n"), "kind is not valid"),
        (("replay-dead", "--kind", "send", "--limit", huge, "--by", "o", "--note", "n"), "--limit"),
        (("replay-dead", "--since", "99999999999d", "--by", "o", "--note", "n"), "--since"),
        (
            ("replay-dead", "--until", "0001-01-01T00:00:00+01:00", "--by", "o", "--note", "n"),
            "--until",
        ),
        (
            ("replay-dead", "--kind", "send", "--per-second", "1e-300", "--by", "o", "--note", "n"),
            "--per-second",
        ),
        (("prune", "--older-than", "99999999999d"), "--older-than must be at most 100 years"),
        (("stats", "--window", "99999999999d"), "--window must be at most 100 years"),
        (("limit", "default", "--total", huge, "--by", "o", "--note", "n"), "--total"),
        (
            ("limit", "default", "--per-tenant", "2147483648", "--by", "o", "--note", "n"),
            "--per-tenant",
        ),
        (("enqueue", "send", "--app", "hostileapp:app", "--priority", huge), "--priority"),
        (("enqueue", "send", "--app", "hostileapp:app", "--max-attempts", huge), "--max-attempts"),
        (("enqueue", "send", "--app", "hostileapp:app", "--delay", "99999999999d"), "--delay"),
        (
            ("enqueue", "send", "--app", "hostileapp:app", "--run-at", "9999-12-31T23:59:59-01:00"),
            "--run-at",
        ),
        (("enqueue", "send", "--app", "hostileapp:app", "--tenant", bad), "tenant"),
        (("worker", "--app", "hostileapp:app", "--burst", "--grace", "inf"), "--grace"),
        (("worker", "--app", "hostileapp:app", "--burst", "--concurrency", huge), "--concurrency"),
        (("worker", "--app", "hostileapp:app", "--burst", "--prefetch", huge), "--prefetch"),
        (("worker", "--app", "hostileapp:app", "--burst", "--prefetch", "-1"), "--prefetch"),
        (("worker", "--app", "hostileapp:app", "--burst", "--prefetch", "soon"), "'auto'"),
        (("annotate", task, "--by", "o", "--note", "n", "--corrects", huge), "--corrects"),
    ]
    wrong = []
    for args, names in cases:
        err = cli(*args, code=2).stderr
        if names not in err:
            wrong.append((args, err))
    assert wrong == []
    assert cli.snapshot() == before


def test_a_full_disk_is_one_line_and_exit_3(small_disk: Path, tmp_path: Path) -> None:  # noqa: F811
    cli = Cli(tmp_path, f"sqlite:///{small_disk / 'full.db'}")
    cli("migrate")
    cli("enqueue", "send", "--app", "hostileapp:app")
    fill(small_disk)
    big = json.dumps("x" * 900_000)
    for _ in range(12):  # what the journal already holds may take a task or two
        proc = subprocess.run(
            [sys.executable, "-m", "jobtrail", "enqueue", "send", "-", "--app", "hostileapp:app"],
            cwd=cli.cwd,
            env=cli.env,
            input=big,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0:
            break
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith(
        "jobtrail: error: the store cannot write (disk full or read-only); nothing was stored"
    ), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_a_full_postgres_is_one_line_and_exit_3(pg: Store, tmp_path: Path) -> None:
    cli = Cli(tmp_path, pg.url)
    cli("migrate")
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION jobtrail_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' "
            "USING ERRCODE = 'disk_full'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER full_disk BEFORE INSERT ON jobtrail_tasks "
            "FOR EACH ROW EXECUTE FUNCTION jobtrail_test_disk_full()"
        )
    err = cli("enqueue", "send", "--app", "hostileapp:app", code=3).stderr
    assert "the store cannot write (disk full or read-only); nothing was stored" in err
    assert cli.json("list") == []


def test_control_characters_in_stored_text_are_escaped_for_people(tmp_path: Path) -> None:
    cli = Cli(tmp_path, f"sqlite:///{tmp_path / 'esc.db'}")
    cli("migrate")
    app = ("--app", "hostileapp:app")
    evil = cli.json("enqueue", "evil\x1b[31m", '{"v": "\\u001b[2J"}', "--tenant", "t\x1b[1m", *app)
    ok = cli.json("enqueue", "send", *app)["id"]
    worker = cli("worker", "--burst", "--poll-interval", "0.05", *app)
    note = "see \x1b]8;;http://evil.example\x07here\x1b]8;;\x07\r\x9b2K"
    cli("annotate", ok, "--by", "ops\x1b[8m", "--note", note)
    cli("pause", "default", "--by", "ops", "--note", note)
    outputs = {
        "worker log": worker.stderr,
        "explain": cli("explain", evil["id"]).stdout,
        "explain ok": cli("explain", ok).stdout,
        "status": cli("status", evil["id"]).stdout,
        "list": cli("list").stdout,
        "queues": cli("queues").stdout,
        "history": cli("queues", "--history", "default").stdout,
        "dead": cli("dead").stdout,
        "error": cli("status", "\x1b[2J", code=1).stderr,
    }
    for name, text in outputs.items():
        assert RAW_CONTROL.search(text) is None, (name, text)
    assert "\\x1b]0;owned\\x07 \\x1b[2J" in outputs["explain"]
    assert "evil\\x1b[31m" in outputs["list"] and "t\\x1b[1m" in outputs["list"]
    assert "\\x1b]0;owned" in outputs["status"] and "\\x0d\\x9b1mgone \\u202e" in outputs["status"]
    assert "\\x1b]8;;http://evil.example\\x07here" in outputs["explain ok"]
    assert "ops\\x1b[8m" in outputs["explain ok"]
    assert "\\x1b]8;;" in outputs["queues"] and "\\x1b]8;;" in outputs["history"]
    assert "evil\\x1b[31m" in outputs["dead"]
    # JSON for machines stays exact
    data = cli.json("explain", evil["id"])
    assert data["task"]["kind"] == "evil\x1b[31m" and data["task"]["tenant"] == "t\x1b[1m"
    assert data["task"]["payload"] == {"v": "\x1b[2J"}
    assert data["task"]["last_error"].endswith(
        "boom \x1b]0;owned\x07 \x1b[2J\r\x9b1mgone \u202eexe.txt"
    )
    notes = [t["note"] for t in cli.json("explain", ok)["transitions"]]
    assert note in notes
    assert cli.json("queues")[0]["paused_note"] == note
