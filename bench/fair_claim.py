"""What does the fair claim (priority, then tenants in turn, then due time) cost
with many tenants? Loads N due tasks (default 50,000) spread over T tenants (1 and 1,000)
into a fresh PostgreSQL schema or SQLite file, then times claims of a batch (default 10) the
way a worker makes them (PostgreSQL: the one-statement claim; SQLite: the claim transaction)
and reports the median and p95 per claim, and how many tenants the first batches reached.

    python bench/fair_claim.py --backend postgres
    python bench/fair_claim.py --backend sqlite --tasks 100000 --batch 50
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

import jobtrail
from jobtrail.core import transition
from jobtrail.store.base import Claim

PG_URL = os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def store_url(backend: str, tmp: Path) -> tuple[str, Any]:
    if backend == "sqlite":
        return f"sqlite:///{tmp / f'fair_{secrets.token_hex(4)}.db'}", lambda: None
    schema = "bench_" + secrets.token_hex(6)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')

    def drop() -> None:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}", drop


def claim_once(app: jobtrail.App, batch: int) -> list[dict[str, Any]]:
    driver = app._driver
    request = Claim(owner="bench:1:x", queues=["default"], kinds=["job"], limit=batch, version=None)
    if driver.claims_in_one_statement:
        with driver.single_statement() as tx:
            return transition.claim_unlimited(driver, tx, request)
    with driver.transaction() as tx:
        return transition.claim(driver, tx, request)


def run(backend: str, tasks: int, tenants: int, batch: int, claims: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        url, drop = store_url(backend, Path(tmp))
        try:
            app = jobtrail.App(url)
            app.migrate()

            @app.task("job")
            def job(ctx: Any, payload: Any) -> None:
                return None

            chunk = 10_000
            for start in range(0, tasks, chunk):
                app.enqueue_many(
                    [
                        {"kind": "job", "payload": i, "tenant": f"t{i % tenants}"}
                        for i in range(start, min(tasks, start + chunk))
                    ]
                )
            if backend == "postgres":  # as autovacuum leaves a table: visibility map set
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE jobtrail_tasks")
            else:
                with app._driver.transaction() as tx:
                    tx.conn.execute("ANALYZE")  # type: ignore[attr-defined]
            for _ in range(5):  # warm the caches and the prepared plans
                claim_once(app, batch)
            times = []
            reached: set[str] = set()
            for i in range(claims):
                start = time.perf_counter()
                rows = claim_once(app, batch)
                times.append(time.perf_counter() - start)
                if i < 2:
                    reached |= {r["tenant"] for r in rows}
                assert len(rows) == batch, f"claim {i} took {len(rows)} of {batch}"
            app.close()
        finally:
            drop()
    times.sort()
    return {
        "median_ms": statistics.median(times) * 1000,
        "p95_ms": times[int(len(times) * 0.95) - 1] * 1000,
        "tenants_in_first_two": len(reached),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--claims", type=int, default=300)
    parser.add_argument("--tenants", type=int, nargs="+", default=[1, 1000])
    args = parser.parse_args()
    for tenants in args.tenants:
        r = run(args.backend, args.tasks, tenants, args.batch, args.claims)
        print(
            f"{args.backend:8} {args.tasks} due tasks, {tenants:5} tenants, batch {args.batch}: "
            f"claim median {r['median_ms']:.2f} ms, p95 {r['p95_ms']:.2f} ms "
            f"({r['tenants_in_first_two']} tenants in the first two batches)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
