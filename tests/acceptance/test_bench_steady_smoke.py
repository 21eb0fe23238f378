"""`bench/steady.py` still runs (issue 21): jobtrail on both backends through the steady-arrival
harness with tiny settings — a measured capacity, then one short open-loop run — and the table
prints. The harness itself fails the run when a sent job did not run exactly once or has no
recorded finish. Its databases get a name of this run's own (`--db-prefix`), so two runs on one
server do not collide. Speed is not asserted here: it is measured in `bench/`."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import psycopg
from conftest import PG_URL, require_pg

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = 12  # offered, achieved, done, send lag, pickup x3, pickup-s, completion x3, commits


def test_steady_bench_runs_jobtrail_on_both_backends_and_prints_the_table() -> None:
    require_pg()
    prefix = f"bench_steady_smoke_{secrets.token_hex(4)}"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "steady.py"),
            "--only",
            "jobtrail-pg,jobtrail-sqlite",
            "--capacity-n",
            "200",
            "--rates",
            "0.1",
            "--seconds",
            "1",
            "--senders",
            "2",
            "--db-prefix",
            prefix,
            "--no-install",
            "--pg",
            PG_URL,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = {
        line.split()[0]: line.split()[2:]
        for line in done.stdout.splitlines()
        if line.startswith(("jobtrail-pg ", "jobtrail-sqlite "))
    }
    assert set(rows) == {"jobtrail-pg", "jobtrail-sqlite"}, done.stdout
    for name, cells in rows.items():
        assert len(cells) == COLUMNS, (name, cells)
        numbers = [float(c.replace(",", "")) for c in cells[:-1]]
        offered, achieved, done_rate, _lag, p50, p99, top = numbers[:7]
        assert offered > 0 and achieved > 0 and done_rate > 0, (name, cells)
        assert 0 < p50 <= p99 <= top, (name, cells)  # a handler starts after its due time
        c50, c99, ctop = numbers[8:]
        # and finishes after it starts; SQLite stores finished_at in milliseconds, so a no-op
        # job's recorded finish may read up to a millisecond before its start
        slack = 1.0 if name == "jobtrail-sqlite" else 0.0
        assert p50 <= c50 + slack and c50 <= c99 <= ctop, (name, cells)
    assert float(rows["jobtrail-pg"][-1]) >= 1, rows  # at least the enqueue's own commit
    assert rows["jobtrail-sqlite"][-1] == "n/a", rows
    with psycopg.connect(PG_URL, autocommit=True) as conn:  # the harness drops its databases
        left = conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname LIKE %s", (prefix + "%",)
        ).fetchone()
    assert left == (0,)
