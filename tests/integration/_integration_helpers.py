"""Shared helpers of the integration tests: polling with deadlines, database-clock reads,
the claim seam, process entry points (importable by ``multiprocessing`` spawn children) and a
small app module + runner script written into ``tmp_path`` for worker subprocesses.

Nothing here sleeps to hide a race: every wait is a poll of an observable condition with a
deadline that fails the test when it passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg import sql as psql

import jobtrail
from jobtrail.core import transition
from jobtrail.store.base import Claim

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], *, timeout: float, what: str, interval: float = 0.02
) -> T:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def task_row(app: jobtrail.App, task_id: str | int) -> dict[str, Any]:
    """The raw task row plus ``db_now`` (the database clock, read in the same statement)."""
    with app._driver.transaction(write=False) as tx:
        row = app._driver.task_get(tx, int(task_id))
    assert row is not None, f"task {task_id} vanished"
    return row


def lease_expired_by_db_clock(app: jobtrail.App, task_id: str | int) -> bool:
    row = task_row(app, task_id)
    return row["lease_expires_at"] is not None and row["lease_expires_at"] <= row["db_now"]


def claim_one(
    app: jobtrail.App, owner: str, kinds: list[str], queues: list[str] | None = None
) -> list[dict[str, Any]]:
    """Edge 3 through the seam, as a worker would (one transaction, ``limit=1``)."""
    request = Claim(owner=owner, queues=queues or ["default"], kinds=kinds, limit=1, version=None)
    with app._driver.transaction() as tx:
        return transition.claim(app._driver, tx, request)


def listening(url: str, channel: str) -> psycopg.Connection[Any]:
    """A connection of its own that LISTENs on ``channel`` (a store's: ``driver.channels``)."""
    conn: psycopg.Connection[Any] = psycopg.connect(url, autocommit=True)
    conn.execute(f"LISTEN {channel}")
    return conn


def analyze(conn: Any, postgres: bool) -> None:
    """Fresh planner statistics for the store's tables only. On PostgreSQL a bare ``ANALYZE``
    walks every table of the database, other tests' schemas too, and its locks deadlocked with
    another test process dropping its schema (CI, session 19)."""
    if not postgres:
        conn.execute("ANALYZE")
        return
    names = [
        row[0]
        for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
    ]
    conn.execute(psql.SQL("ANALYZE {}").format(psql.SQL(", ").join(map(psql.Identifier, names))))


def reasons(app: jobtrail.App, task_id: str) -> list[str]:
    return [t.reason for t in app.transitions(task_id)]


# -- multiprocessing (spawn) entry points ---------------------------------------------------------


def claim_racer(url: str, owner: str, kind: str, rounds: int, barrier: Any, results: Any) -> None:
    """One contender of the claim race: each round, wait at the barrier, then claim."""
    app = jobtrail.App(url)
    try:
        for r in range(rounds):
            barrier.wait(timeout=60)
            try:
                rows = claim_one(app, owner, [kind])
                results.put((r, owner, [str(row["id"]) for row in rows], None))
            except Exception as exc:  # reported to the parent, which fails the test
                results.put((r, owner, [], repr(exc)))
    finally:
        app.close()


def recording_worker(url: str, out_path: str, barrier: Any, results: Any) -> None:
    """A burst worker whose handler appends ``<task id> <pid>`` to ``out_path`` (O_APPEND)."""
    app = jobtrail.App(url)

    @app.task("rec")
    def rec(ctx: jobtrail.Context, payload: Any) -> None:
        line = f"{ctx.task_id} {os.getpid()} {ctx.attempt}\n".encode()
        fd = os.open(out_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    try:
        barrier.wait(timeout=60)
        processed = app.run_worker(burst=True, concurrency=4, poll_interval=0.1)
        results.put((os.getpid(), processed, None))
    except Exception as exc:
        results.put((os.getpid(), -1, repr(exc)))
    finally:
        app.close()


# -- an app module and a runner for worker subprocesses -------------------------------------

APP_MODULE = '''
"""A small app for worker subprocesses of the integration tests (written by the test)."""
import os
import time
from pathlib import Path

import jobtrail

app = jobtrail.App()  # the URL comes from JOBTRAIL_DATABASE_URL
MARKS = Path(os.environ["JT_MARKS"])


def _append(name, line):
    fd = os.open(str(MARKS / name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _slow(ctx, payload):
    """Marks its start, then runs for up to 60 s unless the task's "done" marker exists."""
    (MARKS / f"started-{ctx.task_id}-{ctx.attempt}").touch()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (MARKS / f"done-{ctx.task_id}").exists():
            break
        time.sleep(0.02)
    (MARKS / f"finished-{ctx.task_id}-{ctx.attempt}").touch()


app.task("slow_reentrant", reentrant=True, lease_seconds=0.5)(_slow)
app.task("slow_once", reentrant=False, lease_seconds=0.5)(_slow)


@app.task("one_second", lease_seconds=5)
def one_second(ctx, payload):
    (MARKS / f"started-{ctx.task_id}-{ctx.attempt}").touch()
    time.sleep(1.0)  # the handler's own work
    (MARKS / f"finished-{ctx.task_id}-{ctx.attempt}").touch()


@app.task("half_second", lease_seconds=1)
def half_second(ctx, payload):
    _append("runs", f"{ctx.task_id} {ctx.attempt}\\n")
    time.sleep(0.5)  # still running when the test crashes the server


@app.task("tick", lease_seconds=2)
def tick(ctx, payload):
    _append("runs", f"{ctx.task_id} {ctx.attempt}\\n")
    time.sleep(0.01)  # the handler's own work
'''

RUNNER = '''
"""Runs a worker of crashapp in this process (exit code 0 after a clean stop)."""
import argparse
import logging
import sys

import crashapp

parser = argparse.ArgumentParser()
parser.add_argument("--concurrency", type=int, default=2)
parser.add_argument("--burst", action="store_true")
parser.add_argument("--grace", type=float, default=30.0)
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                    format="%(asctime)s %(threadName)s %(name)s: %(message)s")
processed = crashapp.app.run_worker(concurrency=args.concurrency, burst=args.burst,
                                    grace=args.grace, poll_interval=0.2, sweep_interval=0.2)
print(f"processed {processed}", flush=True)
sys.exit(0)
'''


class WorkerDir:
    """``crashapp.py`` + ``runner.py`` in a directory, and a way to start runners there; as a
    context manager, the runners still alive are killed when the block ends."""

    def __init__(self, root: Path, url: str, extra_env: dict[str, str] | None = None) -> None:
        self.root = root
        self.extra_env = extra_env or {}  # JOBTRAIL_POOLER behind PgBouncer
        self.marks = root / "marks"
        self.marks.mkdir(parents=True, exist_ok=True)
        (root / "crashapp.py").write_text(textwrap.dedent(APP_MODULE))
        (root / "runner.py").write_text(textwrap.dedent(RUNNER))
        self.url = url
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["JOBTRAIL_DATABASE_URL"] = self.url
        env.pop("JOBTRAIL_POOLER", None)
        env.update(self.extra_env)
        env["JT_MARKS"] = str(self.marks)
        env["PYTHONPATH"] = os.pathsep.join([str(self.root), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
        env.pop("JOBTRAIL_APP_VERSION", None)
        return env

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        log = self.root / f"worker-{len(self.procs)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, str(self.root / "runner.py"), *args],
                cwd=self.root,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.procs.append((proc, log))
        return proc

    def output(self, proc: subprocess.Popen[bytes]) -> str:
        for p, log in self.procs:
            if p is proc:
                return log.read_text(errors="replace")[-4000:]
        return ""

    def mark(self, name: str) -> Path:
        return self.marks / name

    def __enter__(self) -> WorkerDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def cleanup(self) -> None:
        """Kill the runners still alive (their logs stay for ``output``)."""
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
