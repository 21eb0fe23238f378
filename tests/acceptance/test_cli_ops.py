"""The operator verbs of the real ``jobtrail`` CLI, run as subprocesses against
a fresh SQLite file: pause, resume, limit, queues (and their history), stats, dead, dismiss and
prune. Exit 0 on success, 2 on bad input, with one ``jobtrail: error:`` line on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import jobtrail

SRC = Path(__file__).resolve().parents[2] / "src"


class Cli:
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.url = f"sqlite:///{cwd / 't.db'}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
        self.env["PYTHONPATH"] = str(SRC)
        self.env["JOBTRAIL_DATABASE_URL"] = self.url

    def __call__(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "jobtrail", *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
        if code:
            assert proc.stderr.startswith("jobtrail: error: "), proc.stderr
            assert proc.stderr.count("\n") == 1, proc.stderr
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def make_work(url: str) -> tuple[list[str], str, str]:
    """In this process: two tasks succeed, one dies, one stays queued and not due."""
    with jobtrail.App(url) as app:

        @app.task("echo")
        def echo(ctx: Any, payload: Any) -> Any:
            return payload

        @app.task("boom", max_attempts=1)
        def boom(ctx: Any, payload: Any) -> None:
            raise jobtrail.PermanentError("bad input", category="invalid_input")

        done = [app.enqueue("echo", n).id for n in (1, 2)]
        dead = app.enqueue("boom").id
        waiting = app.enqueue("echo", 3, delay=3600).id
        assert app.run_worker(burst=True, poll_interval=0.02) == 3
    return done, dead, waiting


def test_operator_verbs(cli: Cli) -> None:
    assert "applied migration(s) 1, 2, 3" in cli("migrate").stdout
    done, dead, waiting = make_work(cli.url)

    # pause: audited, listed, and a bad call is exit 2 with one line.
    out = cli("pause", "default", "--by", "a", "--note", "n").stdout
    assert "queue default: paused by a since" in out and '("n")' in out
    listed = {q["queue"]: q for q in cli.json("queues")}
    assert listed["default"]["paused"] is True
    assert (listed["default"]["paused_by"], listed["default"]["paused_note"]) == ("a", "n")
    assert listed["default"]["paused_since"]
    err = cli("pause", "default", "--by", "a", code=2).stderr
    assert "Missing option '--note'" in err

    # limit: keeps the pause; the other limit is kept when only one is given.
    result = cli.json("limit", "default", "--total", "2", "--by", "a", "--note", "n")
    assert (result["limit_total"], result["limit_per_tenant"], result["paused"]) == (2, None, True)
    result = cli.json("limit", "default", "--per-tenant", "1", "--by", "b", "--note", "m")
    assert (result["limit_total"], result["limit_per_tenant"]) == (2, 1)
    err = cli("limit", "default", "--total", "x", "--by", "a", "--note", "n", code=2).stderr
    assert "--total takes a non-negative integer" in err
    history = cli.json("queues", "--history", "default")
    assert [(h["action"], h["by"], h["note"], h["data"]) for h in history] == [
        ("limit", "b", "m", {"total": 2, "per_tenant": 1}),
        ("limit", "a", "n", {"total": 2, "per_tenant": None}),
        ("pause", "a", "n", {}),
    ]

    # stats: JSON that parses, with the workload in it.
    report = cli.json("stats", "--window", "10m")
    assert report["window_seconds"] == 600
    rows = {(q["queue"], q["kind"]): q for q in report["queues"]}
    assert rows[("default", "echo")]["counts"]["queued"] == 1
    assert rows[("default", "echo")]["finished_in_window"]["succeeded"] == 2
    assert rows[("default", "boom")]["dead"] == 1

    # dead: one group; dismissing the task closes it.
    table = cli("dead").stdout.splitlines()
    assert table[0].split() == [
        "REASON", "KIND", "COUNT", "OLDEST", "VERSIONS", "CATEGORIES", "ATTEMPTS",
        "FIRST", "FAILURE", "LAST", "FAILURE", "LAST", "ERROR",
    ]  # fmt: skip
    assert table[1].split()[:3] == ["permanent_error", "boom", "1"]
    # the group's evidence, then its newest tasks' own
    assert table[1].split()[5:7] == ["invalid_input", "1"]
    assert table[2] == "permanent_error / boom:"
    assert table[3].split()[:5] == ["task", dead, "invalid_input", "attempts", "1/1"]
    # the last error's text beside its category
    assert table[1].endswith("invalid_input: PermanentError: bad input")
    assert table[3].endswith("  error PermanentError: bad input")
    assert "input sha256:" in table[3]
    cli("dismiss", dead, "--by", "a", "--note", "will not replay")
    assert cli.json("dead") == []

    # prune: the two succeeded tasks go (3 transitions each); dead and queued stay.
    out = cli("prune", "--older-than", "0s").stdout
    assert out.strip() == "pruned 2 finished tasks and 6 transitions"
    with jobtrail.App(cli.url) as app:
        assert {t.id for t in app.list()} == {dead, waiting}
        assert app.check() == []
