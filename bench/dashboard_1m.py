"""How fast are the dashboard's pages on a big store? Loads N tasks (default 1,000,000) with
the mix of ``stats_1m.py``, then times each page over HTTP (in-process client).

    python bench/dashboard_1m.py --backend sqlite
    python bench/dashboard_1m.py --backend postgres
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import psycopg
from stats_1m import PG_LOAD, PG_URL, load_sqlite

import jobtrail


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["postgres", "sqlite"], default="sqlite")
    parser.add_argument("--tasks", type=int, default=1_000_000)
    args = parser.parse_args()
    from fastapi.testclient import TestClient

    from jobtrail.web.dashboard import create_dashboard_app

    schema = "bench_" + secrets.token_hex(4)
    if args.backend == "postgres":
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        url = f"{PG_URL}?options={quote(f'-csearch_path={schema}')}"
    else:
        path = Path(tempfile.mkdtemp()) / "bench.db"
        url = f"sqlite:///{path}"
    app = jobtrail.App(url)
    for kind in ("publish", "email", "render"):
        app.task(kind)(lambda ctx, payload: None)
    app.migrate()
    start = time.perf_counter()
    if args.backend == "postgres":
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in PG_LOAD.split(";\n"):
                if statement.strip():
                    conn.execute(statement.replace("%(n)s", str(int(args.tasks))))
    else:
        load_sqlite(str(path), args.tasks)
    print(f"{args.backend}: loaded {args.tasks:,} tasks in {time.perf_counter() - start:.1f} s")
    client = TestClient(create_dashboard_app(app), base_url="http://127.0.0.1")
    last = app.list(limit=1)[0].id
    dead = app.list(state="dead", limit=1)[0].id
    pages = [
        "/",
        "/?state=dead",
        "/?state=queued",
        "/?state=leased&kind=publish",
        "/?queue=bulk&tenant=t7",
        f"/?before={int(last) - 500_000}",
        f"/?q={dead}",
        "/?q=some-key",
        f"/tasks/{dead}",
        "/queues",
        "/dead",
        "/dead/preview?reason=permanent_error&since=2h",
        "/cron",
    ]
    for page in pages:
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            response = client.get(page)
            best = min(best, time.perf_counter() - t0)
            assert response.status_code == 200, (page, response.status_code)
        print(f"  {page:<50} {best * 1000:8.1f} ms")
    app.close()
    if args.backend == "postgres":
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return 0


if __name__ == "__main__":
    sys.exit(main())
