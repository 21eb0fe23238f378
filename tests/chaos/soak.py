"""The chaos soak, shared by ``tests/chaos/test_soak.py`` (small) and ``bench/soak.py`` (big).

Several worker subprocesses run ``pay`` tasks whose handler takes a step and then an effect
against a simulated provider with its own ledger outside the workers (a directory: one
``O_EXCL`` file per applied effect key, and an append-only log of every call). Transient errors
are thrown at random, workers are SIGKILLed at random moments and restarted; on PostgreSQL the
workers reach the server through the fault proxy (which cuts and delays connections) and the
server (a private throwaway cluster) is restarted once in the middle.

At the end: every task terminal, none lost, the invariant checker clean, and exactly one
applied charge per effect key at the provider (repeated calls for a key are deduplicated by the
provider and counted).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

import jobtrail

from .faultproxy import FaultProxy

APP = '''
import os
import random
import time
from pathlib import Path

import jobtrail

app = jobtrail.App()
LEDGER = Path(os.environ["SOAK_LEDGER"])
ERR = float(os.environ.get("SOAK_ERR", "0.05"))


def _name(key):
    return key.replace("/", "_")


def charge(key):
    """The provider: applies a charge once per idempotency key; a repeat returns the same."""
    if random.random() < ERR:
        raise jobtrail.TransientError("provider busy", category="rate_limited")
    fd = os.open(str(LEDGER / "calls.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (key + "\\n").encode())
    finally:
        os.close(fd)
    try:
        fd = os.open(str(LEDGER / "applied" / _name(key)), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
    except FileExistsError:
        pass  # deduplicated by the provider: the key was charged before
    return {"charge": key}


def reconcile(key):
    return {"charge": key} if (LEDGER / "applied" / _name(key)).exists() else None


@app.task("pay", reentrant=True, lease_seconds=1.5, max_attempts=50, backoff_base=0.02,
          backoff_cap=0.3, reconcile=reconcile)
def pay(ctx, payload):
    ctx.step("prepare", lambda: {"n": payload["n"]})
    if random.random() < ERR:
        raise jobtrail.TransientError("flaky before the charge", category="timeout")
    receipt = ctx.effect("charge", charge)
    time.sleep(random.random() * 0.02)  # the provider's answer takes a while
    if random.random() < ERR:
        raise ConnectionError("flaky after the charge")
    return receipt
'''

RUNNER = """
import logging, sys
import soakapp
logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                    format="%(asctime)s %(name)s: %(message)s")
soakapp.app.run_worker(concurrency=int(sys.argv[1]), poll_interval=0.1, sweep_interval=0.25,
                       grace=2.0)
"""


@dataclass
class Result:
    backend: str
    tasks: int
    workers: int
    kills: int = 0
    starts: int = 0
    pg_restarts: int = 0
    proxy_cuts: int = 0
    duration: float = 0.0
    states: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    violations: list[dict[str, Any]] = field(default_factory=list)
    provider_calls: int = 0
    provider_applied: int = 0
    deduped_repeats: int = 0
    dead_detail: dict[str, dict[str, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    log_errors: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["violations"] = len(self.violations)
        out["duration"] = round(self.duration, 1)
        return out


def _counts(url: str, sql: str) -> dict[str, int]:
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url[len("sqlite:///") :], timeout=30)
        try:
            return {str(k): int(v) for k, v in conn.execute(sql).fetchall()}
        finally:
            conn.close()
    with psycopg.connect(url, connect_timeout=5) as pg:
        return {str(k): int(v) for k, v in pg.execute(sql).fetchall()}  # type: ignore[arg-type]


def state_counts(url: str) -> dict[str, int]:
    return _counts(url, "SELECT state, COUNT(*) FROM jobtrail_tasks GROUP BY state")


def run(
    *,
    root: Path,
    url: str,
    tasks: int = 1000,
    workers: int = 3,
    concurrency: int = 4,
    kill_every: float = 3.0,
    cut_every: float = 2.5,
    error_rate: float = 0.05,
    timeout: float = 240.0,
    pg_restart: Any = None,
    seed: int | None = None,
    progress: bool = False,
    pooled_url: str | None = None,
) -> Result:
    """Run the soak against the (migrated, empty) store at ``url``. With ``pg_restart`` (an
    object with ``ctl(action)``), workers go through a fault proxy and the server restarts once
    when about half the tasks are done. With ``pooled_url`` (a transaction pooler in front of
    ``url``) the workers go through it instead, with ``pooler="transaction"``; ``pg_restart``
    may then restart the pooler."""
    rng = random.Random(seed)
    backend = "sqlite" if url.startswith("sqlite:") else "postgres"
    res = Result(backend, tasks, workers)
    ledger = root / "ledger"
    (ledger / "applied").mkdir(parents=True, exist_ok=True)
    (root / "soakapp.py").write_text(textwrap.dedent(APP))
    (root / "runner.py").write_text(textwrap.dedent(RUNNER))

    proxy: FaultProxy | None = None
    worker_url = url
    if pooled_url is not None:
        worker_url = pooled_url
    elif backend == "postgres":
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(url)
        proxy = FaultProxy(parts.hostname or "127.0.0.1", parts.port or 5432).start()
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        worker_url = urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{proxy.port}"))

    env = dict(os.environ)
    env.update(
        JOBTRAIL_DATABASE_URL=worker_url,
        SOAK_LEDGER=str(ledger),
        SOAK_ERR=str(error_rate),
        PYTHONPATH=os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    env.pop("JOBTRAIL_POOLER", None)
    if pooled_url is not None:
        env["JOBTRAIL_POOLER"] = "transaction"
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    logs: list[Path] = []

    def start() -> subprocess.Popen[bytes]:
        log = root / f"worker-{res.starts}.log"
        logs.append(log)
        with open(log, "wb") as out:
            p = subprocess.Popen(
                [sys.executable, str(root / "runner.py"), str(concurrency)],
                cwd=root,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        res.starts += 1
        return p

    app = jobtrail.App(url)
    # the producer stores max_attempts, the lease and reentrancy on each task at enqueue: they
    # must match the workers' kind (else every lease is the default 30 s and the sweeper only
    # sees the tasks of killed workers half a minute later)
    app.task("pay", reentrant=True, lease_seconds=1.5, max_attempts=50)(lambda ctx, payload: None)
    started = time.monotonic()
    try:
        for lo in range(0, tasks, 500):
            app.enqueue_many(
                [
                    {"kind": "pay", "payload": {"n": n}, "idempotency_key": f"pay-{n}"}
                    for n in range(lo, min(tasks, lo + 500))
                ]
            )
        # a repeated intake changes nothing
        again = app.enqueue("pay", {"n": 0}, idempotency_key="pay-0")
        assert not again.created
        procs = [(start(), logs[-1]) for _ in range(workers)]
        next_kill = time.monotonic() + rng.uniform(0.3, kill_every)
        killed_early = False
        next_cut = time.monotonic() + rng.uniform(0.4, 1.2) * cut_every
        restarted = False
        deadline = started + timeout
        while True:
            try:
                counts = state_counts(url)
            except psycopg.OperationalError:  # the server is restarting
                time.sleep(0.5)
                continue
            open_ = sum(v for k, v in counts.items() if k not in ("succeeded", "cancelled", "dead"))
            done = tasks - open_
            if progress:
                print(f"  {time.monotonic() - started:6.1f}s {counts}", flush=True)
            if open_ == 0:
                break
            if time.monotonic() > deadline:
                res.problems.append(f"timed out with {open_} tasks not terminal: {counts}")
                break
            now = time.monotonic()
            # the first kill comes once a few tasks are done at the latest, so that even a run
            # that finishes before the kill timer fires has a worker killed mid-run
            early = not killed_early and done >= max(1, tasks // 20)
            if (now >= next_kill or early) and done < tasks * 0.97:
                killed_early = True
                i = rng.randrange(len(procs))
                p, _ = procs[i]
                p.send_signal(signal.SIGKILL)
                p.wait()
                res.kills += 1
                procs[i] = (start(), logs[-1])
                next_kill = now + rng.uniform(0.2, kill_every)
            # likewise the first cut, once a tenth is done at the latest
            first_cut = res.proxy_cuts == 0 and done >= max(1, tasks // 10) and done < tasks
            if proxy is not None and (now >= next_cut or first_cut):
                proxy.set_mode("pass", delay=rng.choice([0.0, 0.0, 0.001, 0.005]))
                proxy.cut()
                res.proxy_cuts += 1
                next_cut = now + rng.uniform(0.4, 1.6) * cut_every
            if pg_restart is not None and not restarted and done >= tasks // 2:
                pg_restart.ctl("restart")  # pg_ctl -m fast: every session is thrown out
                res.pg_restarts += 1
                restarted = True
            for i, (p, _) in enumerate(procs):
                if p.poll() is not None:  # a worker that exited by itself is a finding
                    res.problems.append(f"worker exited with {p.returncode}: {logs[i]}")
                    procs[i] = (start(), logs[-1])
            time.sleep(0.05)
    finally:
        for p, _ in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p, _ in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if proxy is not None:
            proxy.stop()
    res.duration = time.monotonic() - started
    res.states = state_counts(url)
    res.reasons = _counts(
        url, "SELECT last_reason, COUNT(*) FROM jobtrail_tasks GROUP BY last_reason"
    )
    res.violations = app.check()
    for t in app.list(state="dead", kind="pay", limit=50):  # why did these give up?
        res.dead_detail[t.id] = dict(Counter(x.reason for x in app.transitions(t.id)))

    # the provider's ledger against the store
    calls = (
        Counter(line for line in (ledger / "calls.log").read_text().splitlines() if line)
        if (ledger / "calls.log").exists()
        else Counter()
    )
    applied = {f.name for f in (ledger / "applied").iterdir()}
    res.provider_calls = sum(calls.values())
    res.provider_applied = len(applied)
    res.deduped_repeats = res.provider_calls - len(calls)
    confirmed: dict[str, str] = {}
    for t in app.list(state="succeeded", kind="pay", limit=10_000) if tasks <= 10_000 else []:
        confirmed[t.id] = f"{t.id}_charge"
    if tasks > 10_000 or len(confirmed) != res.states.get("succeeded", 0):
        confirmed = {
            k: f"{k}_charge"
            for k in _counts(url, "SELECT id, 1 FROM jobtrail_tasks WHERE state = 'succeeded'")
        }
    missing = [k for k in confirmed.values() if k not in applied]
    if missing:
        res.problems.append(f"{len(missing)} succeeded tasks have no applied charge: {missing[:5]}")
    if set(calls) != {k.replace("_", "/") for k in applied}:
        res.problems.append("the provider applied keys it was never called with, or vice versa")
    total = sum(res.states.values())
    if total != tasks:
        res.problems.append(f"{total} tasks in the store, {tasks} enqueued")
    open_left = {k: v for k, v in res.states.items() if k not in ("succeeded", "cancelled", "dead")}
    if open_left:
        res.problems.append(f"tasks not terminal: {open_left}")
    for log in logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        in_failed_attempt = False  # a failed attempt is logged with its traceback
        for line in text.splitlines():
            if _RECORD.match(line):
                in_failed_attempt = bool(_FAILED_ATTEMPT.match(line))
            stray = "Traceback" in line and not in_failed_attempt
            if stray or "database is locked" in line:
                res.log_errors.append(f"{log.name}: {line[:200]}")
    app.close()
    return res


#: The head of a worker's log record (the format its script sets) and of a failed attempt's.
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [\w.]+: ")
_FAILED_ATTEMPT = re.compile(r"^\S+ \S+ jobtrail\.worker: task .+ failed: ")


def report(res: Result) -> str:
    return json.dumps(res.summary(), indent=2, default=str)
