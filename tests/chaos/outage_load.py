"""An outage under load, measured as a user meets it (issue 40): worker processes started with
the real ``jobtrail worker`` command (default log level), a producer enqueuing with
idempotency keys through the outage, and a store that goes away — a PostgreSQL server crashed
with ``pg_ctl stop -m immediate`` (a private cluster), or a transaction-mode PgBouncer
SIGKILLed — and comes back. ``measure`` returns what the test asserts (and what the issue's
table reports): tasks lost, run twice, lease expiries, the log lines of each worker, and how
long the queue took to move again."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

import jobtrail

APP = """
import os
import time

import jobtrail

app = jobtrail.App()  # JOBTRAIL_DATABASE_URL, JOBTRAIL_POOLER
RUNS = os.environ["JT_RUNS"]


@app.task("job")  # the default 30 s lease: an outage of seconds must not cost it
def job(ctx, payload):
    fd = os.open(RUNS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{ctx.task_id} {ctx.attempt}\\n".encode())
    finally:
        os.close(fd)
    time.sleep(0.005)
"""


@dataclass
class Measured:
    enqueued: int = 0
    lost: int = 0
    twice: int = 0
    lease_expiries: int = 0
    left_leased: int = 0  # tasks still held when the test ends: left to their lease
    recovery: float | None = None  # seconds from the store's return to the next completions
    #: per worker: its log lines from the outage's start until the test stops it
    worker_lines: list[list[str]] = field(default_factory=list)
    producer_lines: list[str] = field(default_factory=list)
    #: exception classes the producer saw that are not jobtrail's
    foreign: Counter[str] = field(default_factory=Counter)
    refused: int = 0  # enqueues refused (StoreUnavailable) and retried

    def row(self, name: str) -> str:
        per_worker = [len(lines) for lines in self.worker_lines]
        warnings = [
            sum(1 for line in lines if " WARNING " in line or " ERROR " in line)
            for lines in self.worker_lines
        ]
        recovery = "-" if self.recovery is None else f"{self.recovery:.1f} s"
        return (
            f"| {name} | {self.lost} | {self.twice} | "
            f"{self.lease_expiries} expired + {self.left_leased} left to their lease | "
            f"{min(per_worker)}-{max(per_worker)} ({min(warnings)}-{max(warnings)} WARNING+) | "
            f"{recovery} |"
        )


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


def measure(
    tmp: Path,
    url: str,
    *,
    outage: Callable[[], None],
    back: Callable[[], None],
    pooler: str | None = None,
    workers: int = 3,
    concurrency: int = 4,
    queued: int = 300,
    rate: float = 80.0,
    down: float = 2.0,
    settle: float = 20.0,
) -> Measured:
    """Run the scenario; ``outage()`` takes the store away, ``back()`` returns it (and waits
    until it answers). ``settle``: how long the queue may take to empty after the outage —
    under the 30 s lease, so a task left to its lease shows as not done."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "outageapp.py").write_text(textwrap.dedent(APP))
    runs = tmp / "runs"
    env = dict(os.environ, JOBTRAIL_DATABASE_URL=url, JT_RUNS=str(runs))
    env.pop("JOBTRAIL_POOLER", None)
    if pooler:
        env["JOBTRAIL_POOLER"] = pooler
    env["PYTHONPATH"] = os.pathsep.join([str(tmp), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    out = Measured()
    producer_log = _Lines()
    jt_log = logging.getLogger("jobtrail")
    pool_log = logging.getLogger("psycopg")
    jt_log.addHandler(producer_log)
    jt_level = jt_log.level
    jt_log.setLevel(logging.INFO)  # as a producer's app that logs at INFO
    pool_log.addHandler(producer_log)
    app = jobtrail.App(url, pooler=pooler, connect_timeout=2.0)
    app.task("job")(lambda ctx, payload: None)  # the workers run it
    app.migrate()
    app.enqueue_many(
        [{"kind": "job", "payload": {"i": i}, "idempotency_key": f"q{i}"} for i in range(queued)]
    )
    keys = {f"q{i}" for i in range(queued)}
    read = _Reader(url)
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    stop_producing = threading.Event()
    try:
        for n in range(workers):
            path = tmp / f"worker-{n}.log"
            with open(path, "wb") as sink:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "jobtrail", "worker", "--app", "outageapp:app",
                     "--concurrency", str(concurrency)],
                    cwd=tmp, env=env, stdout=sink, stderr=subprocess.STDOUT,
                )  # fmt: skip
            procs.append((proc, path))

        def produce() -> None:
            n = 0
            while not stop_producing.is_set():
                key = f"p{n}"
                try:
                    app.enqueue("job", {"n": n}, idempotency_key=key)
                except jobtrail.JobtrailError as exc:
                    if isinstance(exc, jobtrail.StoreUnavailable):
                        out.refused += 1
                    else:
                        out.foreign[type(exc).__name__] += 1
                    stop_producing.wait(0.05)
                    continue  # the same key again: nothing was stored
                except Exception as exc:  # a driver's own exception reached the caller
                    out.foreign[type(exc).__name__] += 1
                    stop_producing.wait(0.05)
                    continue
                keys.add(key)
                n += 1
                stop_producing.wait(1.0 / rate)

        producer = threading.Thread(target=produce, name="producer", daemon=True)
        _wait(lambda: (read.done() or 0) >= 30, 60, "the workers to get going", procs)
        # every worker up (under load one may still be starting when the first ones have run
        # 30 tasks, and a worker that cannot connect at its start exits: not this test's case)
        _wait(
            lambda: all(" started: " in path.read_text() for _, path in procs),
            60,
            "every worker to start",
            procs,
        )
        producer.start()
        time.sleep(1.0)  # under load: the workers and the producer busy for a second
        begun = [_count_lines(path) for _, path in procs]
        outage()
        time.sleep(down)  # the length of the outage; nothing races with it
        back()
        returned = time.monotonic()
        at_return = _answer(read.done, procs)
        _wait(
            lambda: (read.done() or 0) >= at_return + 50,
            20,
            "the queue to move again",
            procs,
        )
        out.recovery = time.monotonic() - returned
        time.sleep(1.0)  # the producer goes on after the outage for a while
        stop_producing.set()
        producer.join(timeout=30)
        out.enqueued = len(keys)
        _wait(
            lambda: (read.done() or 0) >= len(keys),
            settle,
            f"all {len(keys)} tasks to succeed (a task left to its 30 s lease is not)",
            procs,
            fail=False,
        )
        # each worker says the store is back once it answered for a second without failing
        _wait(
            lambda: all("store back: " in path.read_text() for _, path in procs),
            10,
            "every worker to say the store is back",
            procs,
            fail=False,
        )
        ended = [_count_lines(path) for _, path in procs]
        for proc, _ in procs:
            proc.send_signal(signal.SIGTERM)
        for proc, _ in procs:
            proc.wait(timeout=30)
    finally:
        stop_producing.set()
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        jt_log.removeHandler(producer_log)
        jt_log.setLevel(jt_level)
        pool_log.removeHandler(producer_log)
    stored = dict(read.rows("SELECT idempotency_key, state FROM jobtrail_tasks") or [])
    out.lost = sum(1 for key in keys if key not in stored)
    # not done in ``settle`` (< the 30 s lease): left to wait out a lease
    out.left_leased = sum(1 for key in keys if stored.get(key) not in (None, "succeeded"))
    counted = Counter(line.split()[0] for line in runs.read_text().splitlines())
    out.twice = sum(1 for n in counted.values() if n > 1)
    expired = read.rows(
        "SELECT count(*) FROM jobtrail_transitions WHERE reason LIKE 'lease_expired%'"
    )
    out.lease_expiries = int(expired[0][0]) if expired else -1  # type: ignore[call-overload]
    read.close()
    for (_, path), first, last in zip(procs, begun, ended, strict=True):
        out.worker_lines.append(path.read_text(errors="replace").splitlines()[first:last])
    out.producer_lines = producer_log.lines
    app.close()
    return out


def _count_lines(path: Path) -> int:
    return len(path.read_text(errors="replace").splitlines())


class _Reader:
    """Counts read over a connection of the test's own (reopened after an outage)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: psycopg.Connection[tuple[object, ...]] | None = None

    def rows(self, query: str) -> list[tuple[object, ...]] | None:
        try:
            if self.conn is None or self.conn.closed:
                self.conn = psycopg.connect(
                    self.url, autocommit=True, connect_timeout=2, prepare_threshold=None
                )
            return self.conn.execute(query.encode()).fetchall()
        except psycopg.Error:
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return None

    def done(self) -> int | None:
        rows = self.rows("SELECT count(*) FROM jobtrail_tasks WHERE state = 'succeeded'")
        return None if rows is None else int(rows[0][0])  # type: ignore[call-overload]

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def _answer(
    read: Callable[[], int | None], procs: list[tuple[subprocess.Popen[bytes], Path]]
) -> int:
    found: list[int] = []
    _wait(
        lambda: found.append(n) is None if (n := read()) is not None else False,
        10,
        "an answer",
        procs,
    )
    return found[0]


def _wait(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    procs: list[tuple[subprocess.Popen[bytes], Path]],
    *,
    fail: bool = True,
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except jobtrail.StoreUnavailable:
            pass
        for proc, path in procs:
            if proc.poll() is not None:
                raise AssertionError(f"a worker exited: {path.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            if fail:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
            return
        time.sleep(0.05)
