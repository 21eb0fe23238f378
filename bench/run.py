# ruff: noqa: S603, S608
"""The benchmark of issue 8: jobtrail against its peers, one command, one table.

    python bench/run.py                 # N=10,000 no-op jobs (about 10 minutes)
    python bench/run.py --n 2000        # a quick run
    python bench/run.py --only jobtrail-pg,pgqueuer

Run it with the project's environment (jobtrail and psycopg importable). It creates
``bench/.venv-peers`` (gitignored) and pip installs the peers there; oban, which needs Python >=
3.12, goes to ``bench/.venv-peers-312`` (gitignored), made with the first such Python found
(``python3.12``, ``python3.13`` on PATH, then ``~/.pyenv/versions/3.1[2-9]*``). A peer that fails
to install, or finds no such Python, is skipped with the reason printed. Celery (on Redis and on
RabbitMQ), RQ (Redis) and Dramatiq (RabbitMQ) use the brokers of this machine
(``BENCH_REDIS_URL``, default ``redis://127.0.0.1:6379/0``; ``BENCH_AMQP``, default
``guest:guest@127.0.0.1:5672``), each on a queue of its own; one whose broker does not answer
is skipped with a line saying so. Every system gets a fresh
database on the same PostgreSQL (``CREATE DATABASE bench_<name>``; server from ``--pg``, default
``JOBTRAIL_TEST_PG_URL`` or ``postgresql://postgres@127.0.0.1:5432/test``) or a fresh SQLite file.
The peers are driven through their public APIs by the small scripts in ``bench/peers/``; nothing
of theirs is copied.

Columns: durability (what an enqueue has made durable when it returns: the legend under the
table), enqueue single / bulk (jobs/s from the enqueuing process), 16 threads (jobs/s of one
process whose 16 threads enqueue one job at a time each, at once), process with 1 and 2 worker
processes of concurrency 10 (jobs/s from the first to the last finished job, counted in the
store), idle latency p50/p99 (enqueue one job to an idle worker, time until the handler runs;
100 samples), CPU ms per 1,000 jobs during the 1-process run (workers with their child
processes + PostgreSQL backends of that database, or the broker's server processes, from
/proc/<pid>/stat). ``jobtrail-pg-nowait`` is jobtrail enqueueing with ``wait_for_disk=False``
(the commit does not wait for its flush). Every throughput is
verified by counting finished rows in the store (the brokers' peers keep none: their handlers
count, ``record_done``); the ratio rows are jobtrail ÷ the best peer on the same backend, per
column, and jobtrail on PostgreSQL ÷ the best of the brokers' peers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS_VENV = HERE / ".venv-peers"
PEERS_VENV_312 = HERE / ".venv-peers-312"  # for the peers that need Python >= 3.12
PEER_PACKAGES = {
    "pgqueuer": "pgqueuer[asyncpg]==1.6.0",
    "procrastinate": "procrastinate==3.10.0",
    "huey": "huey==3.5.4",
    "chancy": "chancy==0.26.0",
    # the systems users pick instead of a database queue, on the brokers of this machine
    "celery-redis": "celery[redis]==5.7.0",
    "celery-rabbitmq": "celery==5.7.0",
    "rq": "rq==2.12.0",
    "dramatiq": "dramatiq[rabbitmq]==2.2.1",
}
PEER_PACKAGES_312 = {"oban": "oban==0.7.0"}  # brings psycopg[binary] and psycopg-pool
#: the brokers' addresses (the peers that use one are skipped when it does not answer)
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
AMQP = os.environ.get("BENCH_AMQP", "guest:guest@127.0.0.1:5672")
TICK = os.sysconf("SC_CLK_TCK")
CONCURRENCY = int(os.environ.get("BENCH_CONCURRENCY", "10"))

#: name -> (backend, driver script, peers venv (None: the project's), SQL counting finished jobs)
SYSTEMS: dict[str, tuple[str, str, Path | None, str]] = {
    "jobtrail-pg": (
        "pg",
        "jobtrail_driver.py",
        None,
        "SELECT count(*) FROM jobtrail_tasks WHERE state = 'succeeded'",
    ),
    "pgqueuer": (
        "pg",
        "pgqueuer_driver.py",
        PEERS_VENV,
        # finished jobs are deleted from the queue and logged; the log is folded into the
        # statistics table every 30 s, but its rows stay (marked aggregated, pgqueuer 1.6.0's
        # qb.py): count the log alone (counting both counted a job twice once folded)
        "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'",
    ),
    "procrastinate": (
        "pg",
        "procrastinate_driver.py",
        PEERS_VENV,
        "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'",
    ),
    "chancy": (
        "pg",
        "chancy_driver.py",
        PEERS_VENV,
        # finished jobs stay in the jobs table (the default pruner removes them after 24 h)
        "SELECT count(*) FROM chancy_jobs WHERE state = 'succeeded'",
    ),
    "oban": (
        "pg",
        "oban_driver.py",
        PEERS_VENV_312,
        # finished jobs stay in oban_jobs as 'completed' (the default pruner deletes them
        # after 24 h)
        "SELECT count(*) FROM oban_jobs WHERE state = 'completed'",
    ),
    "jobtrail-sqlite": (
        "sqlite",
        "jobtrail_driver.py",
        None,
        "SELECT count(*) FROM jobtrail_tasks WHERE state = 'succeeded'",
    ),
    # the same, tuned: a fixed prefetch of 10 instead of the adaptive default
    "jobtrail-pg-tuned": (
        "pg",
        "jobtrail_driver.py",
        None,
        "SELECT count(*) FROM jobtrail_tasks WHERE state = 'succeeded'",
    ),
    "jobtrail-sqlite-tuned": (
        "sqlite",
        "jobtrail_driver.py",
        None,
        "SELECT count(*) FROM jobtrail_tasks WHERE state = 'succeeded'",
    ),
    "huey": ("sqlite", "huey_driver.py", PEERS_VENV, "SELECT count(*) FROM kv"),
    # brokers: a queue of the run's own on the broker; jobs counted by their handlers
    # (record_done in peers/_common.py): none of these keeps a finished job at its defaults
    "celery-redis": ("redis", "celery_driver.py", PEERS_VENV, ""),
    "celery-rabbitmq": ("amqp", "celery_driver.py", PEERS_VENV, ""),
    "rq": ("redis", "rq_driver.py", PEERS_VENV, ""),
    "dramatiq": ("amqp", "dramatiq_driver.py", PEERS_VENV, ""),
    # jobtrail with every enqueue committed without waiting for its flush (wait_for_disk=False)
    "jobtrail-pg-nowait": (
        "pg",
        "jobtrail_driver.py",
        None,
        "SELECT count(*) FROM jobtrail_tasks WHERE state = 'succeeded'",
    ),
}
#: what an enqueue has made durable when it returns, at each system's defaults (the column
#: "durability"; LEGEND says what each word means)
DURABILITY = {
    "jobtrail-pg": "flushed",
    "jobtrail-pg-tuned": "flushed",
    "jobtrail-pg-nowait": "async-commit",
    "pgqueuer": "flushed",
    "procrastinate": "flushed",
    "chancy": "flushed",
    "oban": "flushed",
    "jobtrail-sqlite": "flushed",
    "jobtrail-sqlite-tuned": "flushed",
    "huey": "flushed",
    "celery-redis": "memory,<=1",
    "celery-rabbitmq": "unconfirmed,<=1",
    "rq": "memory,<=1",
    "dramatiq": "unconfirmed,>=1",
}
LEGEND = """durability: what an enqueue has made durable when it returns (each at its defaults)
  flushed          committed and flushed to disk (PostgreSQL synchronous_commit=on, SQLite
                   synchronous=FULL)
  async-commit     committed, its flush not waited for (jobtrail wait_for_disk=False): a server
                   crash may lose the last moments' enqueues, whole; never torn, never run twice
  memory           in Redis's memory (this Redis: no snapshots, no append-only file): a Redis
                   restart loses every queued job
  unconfirmed      written to RabbitMQ's socket, no publisher confirm (the message is persistent
                   and its queue durable, once the broker has stored it)
  <=1 / >=1        a job whose worker dies mid-run is lost (at most once) / run again (at least
                   once); jobtrail runs it again after its lease"""
NO_DRIVER: dict[str, str] = {}  # peer -> why it has no driver yet
#: what the "-tuned" systems set (every other system runs with its library's defaults)
TUNED = {"BENCH_PREFETCH": "10"}
#: what "jobtrail-pg-nowait" sets: every enqueue with wait_for_disk=False
NOWAIT = {"BENCH_WAIT_FOR_DISK": "0"}
#: the table's groups: (the backends of its rows, the jobtrail rows each given a ratio row
#: against the best of the group's other rows)
GROUPS = [
    (("pg",), ("jobtrail-pg", "jobtrail-pg-tuned", "jobtrail-pg-nowait")),
    (("sqlite",), ("jobtrail-sqlite", "jobtrail-sqlite-tuned")),
    # the brokers' systems against jobtrail on PostgreSQL (rows of the group above)
    (("redis", "amqp"), ("jobtrail-pg", "jobtrail-pg-nowait")),
]
#: broker backend -> (its name, host, port, the URL its drivers take: kombu's for Celery,
#: pika's for Dramatiq)
BROKERS = {
    "redis": ("Redis", REDIS_URL),
    "amqp": ("RabbitMQ", f"amqp://{AMQP}//"),
}
#: Dramatiq's client (pika) spells the default virtual host %2F where kombu writes //
PIKA_URL = f"amqp://{AMQP}/%2F"


class NotAnswering(Exception):
    """A peer's broker does not answer: the peer is skipped (bench/ is not CI)."""


def broker_answers(backend: str) -> None:
    """Raise ``NotAnswering`` unless the broker of ``backend`` accepts a TCP connection."""
    name, url = BROKERS[backend]
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (6379 if backend == "redis" else 5672)
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError as exc:
        raise NotAnswering(f"{name} at {host}:{port} is not answering ({exc})") from exc


def broker_pids(backend: str) -> list[int]:
    """The broker's server processes on this machine (their CPU joins the CPU column, as the
    PostgreSQL backends do for the database systems): redis-server, or RabbitMQ's beam.smp."""
    comm = "redis-server" if backend == "redis" else "beam.smp"
    pids = []
    for stat in Path("/proc").glob("[0-9]*/comm"):
        try:
            if stat.read_text().strip() == comm:
                pids.append(int(stat.parent.name))
        except (OSError, ValueError):
            pass
    return pids


def find_python312() -> str | None:
    """The first Python >= 3.12: ``python3.12``, ``python3.13`` on PATH, then pyenv's. Each is
    run, since a pyenv shim is on PATH even when its version is not selected (and then fails)."""
    found = [shutil.which(x) for x in ("python3.12", "python3.13")]
    found += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.1[2-9]*/bin/python"))
    for exe in filter(None, found):
        probe = [exe, "-c", "import sys; assert sys.version_info >= (3, 12)"]
        if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
            return exe
    return None


def install_into(venv: Path, python: str, packages: dict[str, str]) -> dict[str, str]:
    """Create ``venv`` with ``python`` if missing and install ``packages``; returns {peer:
    reason} for the peers that do not install."""
    skipped: dict[str, str] = {}
    pip = venv / "bin" / "pip"
    if not pip.exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(pip), "install", "-q", "psycopg[binary]"], check=False)
    for peer, spec in packages.items():
        res = subprocess.run(
            [str(pip), "install", "-q", spec], capture_output=True, text=True, check=False
        )
        if res.returncode != 0:
            lines = [x for x in res.stderr.splitlines() if x.startswith("ERROR")]
            skipped[peer] = (lines[-1] if lines else res.stderr.strip()[-200:]) or "failed"
            print(f"skip {peer}: it does not install ({skipped[peer]})", flush=True)
    return skipped


def install_peers() -> dict[str, str]:
    """Create the peers' virtualenvs and install each peer; returns {peer: reason} for skips."""
    skipped = install_into(PEERS_VENV, sys.executable, PEER_PACKAGES)
    python312 = find_python312()
    if python312 is None:
        for peer in PEER_PACKAGES_312:
            skipped[peer] = "needs Python >= 3.12, none found"
            print(f"skip {peer}: {skipped[peer]}", flush=True)
    else:
        skipped |= install_into(PEERS_VENV_312, python312, PEER_PACKAGES_312)
    return skipped


def cpu_ticks(pids: list[int], tree: bool = False) -> int:
    """utime + stime of ``pids``; with ``tree``, also of their descendants, live (from
    /proc/<pid>/task/*/children) or exited and reaped (cutime + cstime), so a worker that runs
    its jobs in child processes (chancy's default process pool) is charged for them."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
            if tree:
                total += int(fields[13]) + int(fields[14])  # cutime, cstime
                kids = [
                    int(k)
                    for f in Path(f"/proc/{pid}/task").glob("*/children")
                    for k in f.read_text().split()
                ]
                total += cpu_ticks(kids, tree=True)
        except (OSError, IndexError, ValueError):
            pass
    return total


class Target:
    def __init__(self, name: str, pg: str, tmp: Path, dbname: str | None = None) -> None:
        """A fresh store for ``name``: the database ``dbname`` (default
        ``bench_<$BENCH_DB_PREFIX><name>``), dropped and created, or a new SQLite file in
        ``tmp``."""
        self.name = name
        self.backend, script, venv, self.count_sql = SYSTEMS[name]
        self.python = str(venv / "bin" / "python") if venv else sys.executable
        self.script = str(HERE / "peers" / script)
        self.queue = "bench_" + os.environ.get("BENCH_DB_PREFIX", "") + name.replace("-", "_")
        self.done_dir = tmp / (name + "-done")
        if self.backend in BROKERS:
            broker_answers(self.backend)
            self.dbname = ""
            self.url = PIKA_URL if name == "dramatiq" else BROKERS[self.backend][1]
            shutil.rmtree(self.done_dir, ignore_errors=True)
            self.done_dir.mkdir()
        elif self.backend == "pg":
            # BENCH_DB_PREFIX: several runs on one server at once (the smoke test sets one)
            prefixed = "bench_" + os.environ.get("BENCH_DB_PREFIX", "") + name.replace("-", "_")
            dbname = dbname or prefixed
            with psycopg.connect(pg, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{dbname}"')
            self.dbname = dbname
            self.url = psycopg.conninfo.make_conninfo(pg, dbname=dbname)
            if pg.startswith("postgres"):
                base = pg.rsplit("/", 1)[0]
                self.url = f"{base}/{dbname}"
        else:
            self.dbname = ""
            path = tmp / (name + ".db")
            for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):  # a fresh file
                stale.unlink(missing_ok=True)
            self.url = f"sqlite:///{path}"
        self.pg = pg
        self.cpu_split = (0.0, 0.0)

    def env(self) -> dict[str, str]:
        env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}:{HERE / 'peers'}")
        env.update(BENCH_QUEUE=self.queue, BENCH_DONE_DIR=str(self.done_dir))
        if self.name.endswith("-tuned"):
            env.update(TUNED)
        else:
            env.pop("BENCH_PREFETCH", None)  # defaults: the library's own
        if self.name.endswith("-nowait"):
            env.update(NOWAIT)
        else:
            env.pop("BENCH_WAIT_FOR_DISK", None)
        return env

    def phase(self, phase: str, n: int) -> dict[str, Any]:
        res = subprocess.run(
            [self.python, self.script, self.url, phase, str(n)],
            capture_output=True,
            text=True,
            env=self.env(),
            check=False,
        )
        if res.returncode != 0:
            raise RuntimeError(f"{self.name} {phase} failed:\n{res.stderr[-2000:]}")
        lines = [x for x in res.stdout.splitlines() if x.startswith("{")]
        return json.loads(lines[-1]) if lines else {}

    def finished(self) -> int:
        if self.backend in BROKERS:  # one byte per handler run (record_done)
            return sum(f.stat().st_size for f in self.done_dir.iterdir())
        if self.backend == "pg":
            with psycopg.connect(self.url, autocommit=True) as conn:
                row = conn.execute(self.count_sql).fetchone()
        else:
            path = self.url[len("sqlite:///") :]
            with sqlite3.connect(path, timeout=30) as conn:
                row = conn.execute(self.count_sql).fetchone()
        return int(row[0]) if row else 0

    def backend_pids(self) -> list[int]:
        if self.backend in BROKERS:
            return broker_pids(self.backend)
        if self.backend != "pg":
            return []
        with psycopg.connect(self.pg, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.dbname,)
            ).fetchall()
        return [int(r[0]) for r in rows]

    def process(
        self, procs: int, target: int, timeout: float, phase: str = "work"
    ) -> tuple[float, float]:
        """Start ``procs`` workers (driver phase ``phase``), wait until ``target`` finished
        rows; returns (jobs/s, CPU ms per 1,000 jobs for workers + backends)."""
        start_count = self.finished()
        workers = [
            subprocess.Popen(
                [self.python, self.script, self.url, phase, "0"],
                env=self.env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(procs)
        ]
        try:
            t_first = c_first = None
            t_before = time.perf_counter()  # the last look that saw none finished yet
            backend_cpu0: dict[int, int] = {}
            worker_cpu0 = 0
            deadline = time.monotonic() + timeout
            while True:
                count = self.finished()
                now = time.perf_counter()
                if t_first is None and count <= start_count:
                    t_before = now
                if t_first is None and count > start_count:
                    t_first, c_first = now, count
                    worker_cpu0 = cpu_ticks([w.pid for w in workers], tree=True)
                    backend_cpu0 = {p: cpu_ticks([p]) for p in self.backend_pids()}
                if count >= target:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name}: only {count}/{target} finished")
                time.sleep(0.02)
            assert t_first is not None and c_first is not None
            worker_cpu = cpu_ticks([w.pid for w in workers], tree=True) - worker_cpu0
            backend_cpu = sum(cpu_ticks([p]) - backend_cpu0.get(p, 0) for p in self.backend_pids())
            jobs = count - c_first
            if jobs == 0:  # all finished between two looks (a tiny run): time them from the one
                jobs, t_first = count - start_count, t_before  # before (a lower bound)
            rate = jobs / max(now - t_first, 1e-9)
            per_1k = 1000 / TICK / max(jobs, 1) * 1000
            self.cpu_split = (worker_cpu * per_1k, backend_cpu * per_1k)
            return rate, (worker_cpu + backend_cpu) * per_1k
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                try:
                    w.wait(15)
                except subprocess.TimeoutExpired:
                    w.kill()


def checkpoint(pg: str) -> None:
    """Write out the server's dirty buffers before a system starts, so that none pays for the
    one before it (or a test run before the benchmark): rounds started right after a CI run
    here read 8,088 / 8,753 / 14,504 jobs/s for the same code as the server caught up."""
    try:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
    except psycopg.Error as exc:  # not allowed (pg_checkpoint) or no server: run without
        print(f"  (no CHECKPOINT before the run: {type(exc).__name__})", flush=True)


def bench(name: str, n: int, samples: int, pg: str, tmp: Path) -> dict[str, Any]:
    t = Target(name, pg, tmp)
    t.phase("setup", 0)
    out: dict[str, Any] = {}
    out["single"] = t.phase("enqueue_single", n)["rate"]
    out["proc1"], out["cpu"] = t.process(1, n, timeout=max(120.0, n / 20))
    out["cpu_workers"], out["cpu_backends"] = t.cpu_split
    bulk = t.phase("enqueue_bulk", n)
    if "skip" in bulk:
        t.phase("enqueue_single", n)  # the 2-process run still needs N queued jobs
        out["bulk"] = None
    else:
        out["bulk"] = bulk["rate"]
    out["proc2"], _ = t.process(2, 2 * n, timeout=max(120.0, n / 20))
    lat = t.phase("latency", samples)
    out["p50"], out["p99"] = lat["p50_ms"], lat["p99_ms"]
    total = t.finished()
    assert total >= 2 * n, f"{name}: {total} finished, expected {2 * n}"
    out["verified"] = total
    if name == "jobtrail-pg":  # what the append-only log costs per job
        with psycopg.connect(t.url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT pg_total_relation_size('jobtrail_transitions'),"
                " pg_total_relation_size('jobtrail_tasks'), count(*) FROM jobtrail_tasks"
            ).fetchone()
        assert row is not None
        out["log_bytes_per_job"] = row[0] / row[2]
        out["task_bytes_per_job"] = row[1] / row[2]
    # last (after the sizes above): the jobs it enqueues are not run; the next setup empties
    # the queue or store.
    threads = t.phase("enqueue_threads", n)
    out["threads"] = threads.get("rate")
    if t.backend in BROKERS:
        t.phase("setup", 0)  # a shared broker: its queue emptied again
    return out


COLS = [
    ("single", "enqueue 1/s", True),
    ("bulk", "enqueue bulk/s", True),
    ("threads", "enq 16 thr/s", True),
    ("proc1", "1 proc jobs/s", True),
    ("proc2", "2 procs jobs/s", True),
    ("p50", "idle p50 ms", False),
    ("p99", "idle p99 ms", False),
    ("cpu", "CPU ms/1k jobs", False),
]


def fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if v >= 100 else f"{v:.2f}"


def table(results: dict[str, dict[str, Any]]) -> str:
    head = f"{'system':<22}{'durability':>16}" + "".join(f"{c[1]:>16}" for c in COLS)
    lines = [head, "-" * len(head)]
    for backends, mine in GROUPS:
        names = [x for x in results if SYSTEMS[x][0] in backends]
        if not names:
            continue
        for name in names:
            r = results[name]
            durability = DURABILITY.get(name, "?")
            cells = "".join(f"{fmt(r.get(c[0])):>16}" for c in COLS)
            lines.append(f"{name:<22}{durability:>16}" + cells)
        peers = [x for x in names if x not in mine]
        for ours in mine:
            if ours not in results or not peers:
                continue
            cells = []
            for key, _label, higher in COLS:
                vals = [results[p][key] for p in peers if results[p].get(key) is not None]
                ours_value = results[ours].get(key)
                if not vals or ours_value is None:
                    cells.append("n/a")
                    continue
                best = max(vals) if higher else min(vals)
                cells.append(f"{ours_value / best:.2f}x")
            label = "ratio " + ours.replace("jobtrail-", "")
            lines.append(f"{label:<22}{'':>16}" + "".join(f"{c:>16}" for c in cells))
        lines.append("")
    return "\n".join(lines) + "\n" + LEGEND


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument(
        "--pg",
        default=os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--only", default="", help="comma-separated systems")
    parser.add_argument("--no-install", action="store_true")
    parser.add_argument(
        "--no-checkpoint",
        action="store_true",
        help="no CHECKPOINT of the server before each system (a smoke run beside tests)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every system this many times, in turn (round 1: all systems, then round 2, "
        "...), and report each column's median: a slow spell of a shared machine then hits "
        "every system alike instead of the one running at the time",
    )
    args = parser.parse_args()
    skipped = {} if args.no_install else install_peers()
    for peer, why in NO_DRIVER.items():
        if peer not in skipped:
            print(f"skip {peer}: {why}", flush=True)
    names = [x for x in SYSTEMS if not args.only or x in args.only.split(",")]
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(1, args.rounds + 1):
            for name in names:
                if name in skipped:
                    continue
                print(f"running {name} (N={args.n}, round {round_}) ...", flush=True)
                t0 = time.monotonic()
                try:
                    if not args.no_checkpoint:
                        checkpoint(args.pg)
                    result = bench(name, args.n, args.samples, args.pg, Path(tmp))
                except NotAnswering as exc:
                    print(f"skip {name}: {exc}", flush=True)
                    skipped[name] = str(exc)
                    runs.pop(name, None)
                    continue
                except Exception as exc:  # one broken peer must not hide the others
                    print(f"skip {name}: {exc}", flush=True)
                    skipped[name] = str(exc)
                    runs.pop(name, None)
                    continue
                runs.setdefault(name, []).append(result)
                print(f"  {result} ({time.monotonic() - t0:.0f}s)", flush=True)
    results = {name: medians(r) for name, r in runs.items()}
    print()
    print(
        f"N={args.n}, concurrency {CONCURRENCY} per worker process, every library at its"
        f" defaults except the -tuned rows ({TUNED}) and -nowait ({NOWAIT}),"
        f" {os.cpu_count()} CPUs"
        + (f", median of {args.rounds} interleaved rounds" if args.rounds > 1 else "")
    )
    print(table(results))
    if "jobtrail-pg" in results and results["jobtrail-pg"].get("proc2"):
        moonshot(args.pg, args.n, results["jobtrail-pg"]["proc2"])


def moonshot(server: str, n: int, proc2: float) -> None:
    """jobtrail's 2-process processing against the SQL design ceiling (bench/ceiling.py) of
    the same machine, measured now: the moonshot row of issue 45."""
    import ceiling

    checkpoint(server)
    got = ceiling.measure(server, max(2 * n, 1000), processes=2, batch=100)
    if got["violations"] or got["jobs"] != max(2 * n, 1000):
        raise SystemExit(f"the ceiling's run broke the log or lost jobs: {got}")
    print(
        f"\nmoonshot: jobtrail-pg 2 processes {proc2:,.0f} jobs/s = {proc2 / got['rate']:.2f}x"
        f" the SQL design ceiling of this machine, {got['rate']:,.0f} jobs/s (bench/ceiling.py:"
        " 2 processes, batches of 100, every transition logged, no Python between statements)"
    )


def medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each value's median over the rounds (a column with no value in some round: n/a)."""
    out: dict[str, Any] = {}
    for key in rounds[0]:
        values = [r.get(key) for r in rounds]
        out[key] = None if None in values else statistics.median(values)
    return out


if __name__ == "__main__":
    main()
