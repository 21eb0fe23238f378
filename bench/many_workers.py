# ruff: noqa: S603, S608
"""Issue 21, item 4: many worker processes against one PostgreSQL.

    python bench/many_workers.py                          # N=20,000; 2x10, 16x4, 8x8
    python bench/many_workers.py --rounds 3 --configs 2x10,16x4,16x4+16,16x4+0
    BENCH_PREFETCH=10 python bench/many_workers.py        # a fixed prefetch for all

A configuration ``PxC`` or ``PxC+F`` is P worker processes of concurrency C and a fixed
prefetch F (``bench/peers/jobtrail_driver.py``); without ``+F``, ``BENCH_PREFETCH`` if set,
else the library's default (the adaptive prefetch, shown as ``+auto``). On a fresh database
``--db`` (default ``bench_many``, dropped and created at start; ``--drop`` drops it at the
end), first a commit probe (``pg_activity.commit_probe``: commits/s of ``--probe``
connections with and without a pg_notify), then for each configuration:

1. the tables are emptied, the queue paused and N no-op tasks enqueued in batches of 1,000;
2. the P workers start, each with its own ``application_name`` (``many_w<i>``); once every one
   has its LISTEN connection open the queue is resumed;
3. while they run, ``pg_activity.Sampler`` reads ``pg_stat_activity`` and ``pg_locks`` every
   ``--sample`` seconds: connections per worker process and by state, the wait events of the
   active backends, what they run, the locks they wait for (with the blocker's statement), and
   who holds or waits for the cluster's NOTIFY lock (this database or others);
4. when all N have succeeded: jobs/s from the first to the last completion (the ``at`` of the
   ``completed`` transitions, by the database clock) and from the resume, CPU per 1,000 jobs
   (workers + their PostgreSQL backends, /proc), claim statements per second and tasks per
   claim (a claim: one actor, one transaction time), and the store's checks: every task
   succeeded (none lost), each has exactly one ``claimed`` transition and one attempt (none
   claimed twice), its log is enqueued, claimed, completed by the claimer, and no (task, seq)
   repeats;
5. after ``--settle`` seconds (statistics reach ``pg_stat_*`` up to 10 s late) the idle P
   workers are watched for ``--idle`` seconds: transactions/s, index scans/s (the lease sweep
   reads ``jobtrail_tasks_held``, the receipt sweep ``jobtrail_tasks_receipt_id``, the
   retention selects ``jobtrail_tasks_settled_kind``, the claim ``jobtrail_tasks_due_tenant``,
   the read of limited queues ``jobtrail_queues_pkey``) and CPU ms/s of workers and backends.

The last table gives each configuration's medians over ``--rounds`` (run in turn, round by
round) and its ratio to the first one (the issue's goal: 16x4 >= 0.8 x 2x10). The script exits
non-zero when a store check fails. ``--driver`` runs another worker script of the same form
(an experiment with a changed statement, say).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "src"), str(HERE)]

from pg_activity import Sampler, backend_pids, commit_probe, idle_cost  # noqa: E402
from run import TICK, cpu_ticks  # noqa: E402

import jobtrail  # noqa: E402

DRIVER = HERE / "peers" / "jobtrail_driver.py"


def db_url(pg: str, dbname: str, **params: str) -> str:
    """``pg`` (a postgresql:// URL) with another database and query parameters."""
    parts = urlsplit(pg)
    query = urlencode([*parse_qsl(parts.query), *params.items()])
    return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, query, ""))


def make_app(url: str) -> jobtrail.App:
    """An App that knows the driver's kind (enqueues here; the driver's workers run it)."""
    app = jobtrail.App(url)

    @app.task("noop", max_attempts=1)
    def noop(ctx: Any, payload: Any) -> None:
        pass

    return app


def fresh_database(pg: str, dbname: str) -> str:
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{dbname}"')
    url = db_url(pg, dbname)
    app = jobtrail.App(url)
    app.migrate()
    app.close()
    return url


def drop_database(pg: str, dbname: str) -> None:
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def prepare(url: str, n: int) -> None:
    """Empty tables, a paused queue, N queued no-op tasks."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE jobtrail_transition_log, jobtrail_tasks CASCADE")
    app = make_app(url)
    app.pause("default", by="bench", note="many_workers: enqueue before the workers start")
    for i in range(0, n, 1000):
        app.enqueue_many([{"kind": "noop", "payload": {}}] * min(1000, n - i))
    app.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE jobtrail_tasks")
        conn.execute("VACUUM ANALYZE jobtrail_transition_log")


def parse_config(text: str) -> tuple[int, int, int | None]:
    """``PxC`` or ``PxC+F``: processes, concurrency, prefetch (default: ``BENCH_PREFETCH``,
    else ``None``, the library's adaptive default)."""
    procs, rest = text.split("x")
    conc, _, prefetch = rest.partition("+")
    chosen = prefetch or os.environ.get("BENCH_PREFETCH")
    return int(procs), int(conc), int(chosen) if chosen else None


def worker_env(concurrency: int, prefetch: int | None) -> dict[str, str]:
    env = dict(
        os.environ,
        PYTHONPATH=f"{ROOT / 'src'}:{HERE / 'peers'}",
        BENCH_CONCURRENCY=str(concurrency),
    )
    env.pop("BENCH_PREFETCH", None)
    if prefetch is not None:
        env["BENCH_PREFETCH"] = str(prefetch)
    return env


def run_config(pg: str, dbname: str, n: int, config: str, args: Any) -> dict[str, Any]:
    procs, conc, prefetch = parse_config(config)
    url = db_url(pg, dbname)
    prepare(url, n)
    watch = psycopg.connect(url, autocommit=True, application_name="many_bench")
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                args.driver,
                db_url(pg, dbname, application_name=f"many_w{i}"),
                "work",
                "0",
            ],
            env=worker_env(conc, prefetch),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(procs)
    ]
    sampler = Sampler(pg, dbname, args.sample, "many_w")
    try:
        deadline = time.monotonic() + 60 + 3 * procs
        while True:  # every worker listens (started, connected, claimed nothing: paused)
            row = watch.execute(
                "SELECT count(DISTINCT application_name) FROM pg_stat_activity"
                " WHERE datname = %s AND application_name LIKE 'many_w%%'"
                " AND query ILIKE 'LISTEN%%'",
                (dbname,),
            ).fetchone()
            if row and row[0] >= procs:
                break
            dead = [w for w in workers if w.poll() is not None]
            if dead or time.monotonic() > deadline:
                err = dead[0].stderr.read() if dead and dead[0].stderr else ""
                raise RuntimeError(f"{procs}x{conc}: workers did not start\n{err[-2000:]}")
            time.sleep(0.1)
        pids = backend_pids(watch, dbname, "many_w")
        backend0 = {p: cpu_ticks([p]) for p in pids}
        worker0 = cpu_ticks([w.pid for w in workers], tree=True)
        sampler.start()
        t0 = time.perf_counter()
        app = jobtrail.App(url)
        app.resume("default", by="bench", note="many_workers: go")
        app.close()
        deadline = time.monotonic() + max(120.0, n / 50)
        while True:
            row = watch.execute(
                "SELECT count(*) FROM jobtrail_tasks WHERE state = 'succeeded'"
            ).fetchone()
            if row and row[0] >= n:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{procs}x{conc}: only {row and row[0]}/{n} succeeded")
            time.sleep(0.05)
        from_resume = n / (time.perf_counter() - t0)
        sampler.halt.set()
        sampler.join()
        worker_cpu = cpu_ticks([w.pid for w in workers], tree=True) - worker0
        pids = backend_pids(watch, dbname, "many_w")
        backend_cpu = sum(cpu_ticks([p]) - backend0.get(p, 0) for p in pids)
        shown = "auto" if prefetch is None else prefetch
        out: dict[str, Any] = {"config": f"{procs}x{conc}+{shown}", "procs": procs, "conc": conc}
        span = watch.execute(
            "SELECT EXTRACT(EPOCH FROM max(at) - min(at))::float8 FROM jobtrail_transitions"
            " WHERE reason = 'completed'"
        ).fetchone()
        seconds = max(span[0] if span and span[0] else 0.0, 1e-6)
        out["rate"] = (n - 1) / seconds
        out["rate_from_resume"] = from_resume
        per_1k = 1000 / TICK / n * 1000
        out["cpu_workers"], out["cpu_backends"] = worker_cpu * per_1k, backend_cpu * per_1k
        out.update(check_store(watch, n))
        out["claims_per_s"] = out["claims"] / seconds
        out["activity"] = sampler.report()
        out["idle"] = {}
        if args.idle > 0:
            time.sleep(args.settle)  # the run's statistics reach pg_stat_* (up to 10 s late)
            out["idle"] = idle_cost(watch, dbname, "many_w", [w.pid for w in workers], args.idle)
        return out
    finally:
        sampler.halt.set()
        for w in workers:
            w.terminate()
        for w in workers:
            try:
                w.wait(15)
            except subprocess.TimeoutExpired:
                w.kill()
            if w.stderr:
                w.stderr.close()
        watch.close()


def check_store(conn: psycopg.Connection[Any], n: int) -> dict[str, Any]:
    """What the store says about the run: none lost, none claimed twice, one log per task."""
    q = conn.execute
    out: dict[str, Any] = {}
    out["tasks"], out["succeeded"], out["not_one_attempt"] = q(
        "SELECT count(*), count(*) FILTER (WHERE state = 'succeeded'),"
        " count(*) FILTER (WHERE attempts <> 1) FROM jobtrail_tasks"
    ).fetchone() or (0, 0, 0)
    out["lost"] = n - out["succeeded"]
    row = q(
        "SELECT count(*) FILTER (WHERE claims <> 1), count(*) FILTER (WHERE bad_log)"
        " FROM (SELECT task_id, count(*) FILTER (WHERE reason = 'claimed') AS claims,"
        "  (array_agg(reason ORDER BY seq) <> ARRAY['enqueued', 'claimed', 'completed']"
        "   OR count(DISTINCT actor) FILTER (WHERE reason <> 'enqueued') <> 1) AS bad_log"
        "  FROM jobtrail_transitions GROUP BY task_id) x"
    ).fetchone() or (0, 0)
    out["claimed_not_once"], out["bad_log"] = row
    dup = q(
        "SELECT count(*) FROM (SELECT 1 FROM jobtrail_transitions"
        " GROUP BY task_id, seq HAVING count(*) > 1) d"
    ).fetchone()
    out["dup_seq"] = dup[0] if dup else 0
    # one claim statement: one worker (actor), one transaction time (at)
    sizes = [
        int(r[0])
        for r in q(
            "SELECT count(*) FROM jobtrail_transitions WHERE reason = 'claimed' GROUP BY actor, at"
        ).fetchall()
    ]
    out["claims"] = len(sizes)
    out["per_claim_mean"] = statistics.mean(sizes) if sizes else 0.0
    out["per_claim_p50"] = statistics.median(sizes) if sizes else 0
    out["ok"] = (
        out["tasks"] == n
        and out["lost"] == 0
        and out["not_one_attempt"] == 0
        and out["claimed_not_once"] == 0
        and out["bad_log"] == 0
        and out["dup_seq"] == 0
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--configs", default="2x10,16x4,8x8", help="PxC,... (first: baseline)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sample", type=float, default=0.05, help="pg_stat_activity, seconds")
    parser.add_argument("--idle", type=float, default=10.0, help="idle cost window, seconds")
    parser.add_argument("--settle", type=float, default=11.0, help="before the idle window")
    parser.add_argument(
        "--probe",
        default="2,16",
        help="commits/s of this many connections with and without pg_notify ('' for none)",
    )
    parser.add_argument("--probe-seconds", type=float, default=3.0)
    parser.add_argument("--db", default="bench_many")
    parser.add_argument("--driver", default=str(DRIVER), help="a worker script like the default")
    parser.add_argument("--drop", action="store_true", help="drop --db at the end")
    parser.add_argument(
        "--pg",
        default=os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--json", action="store_true", help="print each result as JSON too")
    args = parser.parse_args()
    configs = args.configs.split(",")
    for config in configs:
        parse_config(config)  # a typo fails before anything runs
    fresh_database(args.pg, args.db)
    runs: dict[str, list[dict[str, Any]]] = {}
    failed = False
    probes = [int(x) for x in args.probe.split(",") if x]
    try:
        for clients in probes:
            rates = [
                commit_probe(db_url(args.pg, args.db), clients, args.probe_seconds, mode)
                for mode in ("plain", "in", "after")
            ]
            print(
                f"commit probe, {clients} connections: {rates[0]:,.0f} commits/s;"
                f" {rates[1]:,.0f} with a pg_notify in each; {rates[2]:,.0f} with the"
                " pg_notify as a statement of its own after each",
                flush=True,
            )
        for round_ in range(1, args.rounds + 1):
            for config in configs:
                print(f"running {config} (N={args.n}, round {round_}) ...", flush=True)
                res = run_config(args.pg, args.db, args.n, config, args)
                runs.setdefault(res["config"], []).append(res)
                failed |= not res["ok"]
                print("  " + describe(res), flush=True)
                if args.json:
                    print(json.dumps(res), flush=True)
    finally:
        if args.drop:
            drop_database(args.pg, args.db)
    print()
    print(summary(runs, args))
    if failed:
        raise SystemExit("a store check failed (see above)")


def describe(r: dict[str, Any]) -> str:
    a, i = r["activity"], r["idle"]
    lines = [
        f"{r['rate']:,.0f} jobs/s first-to-last completion ({r['rate_from_resume']:,.0f} from"
        f" the resume); CPU ms/1k jobs workers {r['cpu_workers']:.0f} + backends"
        f" {r['cpu_backends']:.0f}",
        f"store: {r['succeeded']}/{r['tasks']} succeeded, lost {r['lost']}, claimed not once"
        f" {r['claimed_not_once']}, attempts<>1 {r['not_one_attempt']}, bad logs {r['bad_log']},"
        f" repeated seq {r['dup_seq']} -> {'ok' if r['ok'] else 'FAILED'}",
        f"claims: {r['claims']} statements ({r['claims_per_s']:,.0f}/s),"
        f" {r['per_claim_mean']:.1f} tasks each (median {r['per_claim_p50']})",
        f"connections per worker process: mean {a['conn_per_worker_mean']:.2f}, max"
        f" {a['conn_per_worker_max']}; all workers: mean {a['conn_total_mean']:.1f}, max"
        f" {a['conn_total_max']} ({a['samples']} samples)",
        f"states per sample: {a['states_per_sample']}; active per sample {a['active_per_sample']}",
        f"active backends' wait events (samples): {a['waits']}",
        f"active backends run: {a['running']}",
        f"locks waited for (samples): {a['lock_waits']}",
        f"the cluster's NOTIFY lock (samples x backends): {a['notify_lock']}",
    ]
    if i:
        lines.append(
            f"idle {i['seconds']:.0f}s: {i['xacts_per_s']:.1f} transactions/s, CPU ms/s workers"
            f" {i['cpu_ms_per_s_workers']:.0f} + backends {i['cpu_ms_per_s_backends']:.0f},"
            f" {i['connections']} connections; index scans/s {i['scans_per_s']}"
        )
    return "\n  ".join(lines)


def summary(runs: dict[str, list[dict[str, Any]]], args: Any) -> str:
    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    def med_act(name: str, key: str) -> float:
        return statistics.median(r["activity"][key] for r in runs[name])

    names = list(runs)
    base = med(names[0], "rate")
    head = (
        f"N={args.n}, config PxC+prefetch, {os.cpu_count()} CPUs"
        + (f", median of {args.rounds} interleaved rounds" if args.rounds > 1 else "")
        + "\n"
        + f"{'config':<10}{'jobs/s':>10}{'vs ' + names[0]:>12}{'claims/s':>10}{'tasks/claim':>12}"
        + f"{'CPU w+pg ms/1k':>16}"
        + f"{'conn/proc':>11}{'conn max':>10}{'others@notify':>15}"
        + f"{'idle xact/s':>13}{'idle pg ms/s':>14}"
    )
    lines = [head, "-" * len(head.splitlines()[-1])]
    for name in names:
        idle = [r["idle"] for r in runs[name] if r["idle"]]
        lines.append(
            f"{name:<10}{med(name, 'rate'):>10,.0f}{med(name, 'rate') / base:>11.2f}x"
            f"{med(name, 'claims_per_s'):>10,.0f}{med(name, 'per_claim_mean'):>12.1f}"
            f"{med(name, 'cpu_workers'):>9.0f}+{med(name, 'cpu_backends'):<6.0f}"
            f"{med_act(name, 'conn_per_worker_mean'):>11.2f}"
            f"{max(r['activity']['conn_total_max'] for r in runs[name]):>10}"
            f"{med_act(name, 'notify_others'):>15.2f}"
            + (
                f"{statistics.median(x['xacts_per_s'] for x in idle):>13.1f}"
                f"{statistics.median(x['cpu_ms_per_s_backends'] for x in idle):>14.1f}"
                if idle
                else ""
            )
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
