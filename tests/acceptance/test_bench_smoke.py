"""`bench/run.py` still runs (issue 8): a small run of jobtrail on both backends through the
same harness the full benchmark uses, every phase verified by counting finished rows (the
harness exits non-zero when a count is short). Speed is not asserted here: it is measured in
`bench/`, on a quiet machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
from conftest import PG_URL, require_pg

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = 9  # durability, enqueue 1, bulk, 16 threads, 1 proc, 2 procs, p50, p99, CPU


def test_bench_runs_jobtrail_on_both_backends_and_prints_the_table() -> None:
    require_pg()
    prefix = f"smoke{os.getpid()}_"
    try:
        _run_and_check(prefix)
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for name in ("jobtrail_pg", "jobtrail_pg_tuned", "ceiling"):
                conn.execute(f'DROP DATABASE IF EXISTS "bench_{prefix}{name}" WITH (FORCE)')


def _run_and_check(prefix: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run.py"),
            "--only",
            "jobtrail-pg,jobtrail-pg-tuned,jobtrail-sqlite",
            "--n",
            "200",
            "--samples",
            "5",
            "--no-install",
            "--no-checkpoint",  # the tests beside it need the disk more than a fair round
            "--pg",
            PG_URL,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        # databases of its own: another run on the same server must not drop them
        env=dict(os.environ, BENCH_DB_PREFIX=prefix),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = {
        line.split()[0]: line.split()[1:]
        for line in done.stdout.splitlines()
        if line.startswith(("jobtrail-pg", "jobtrail-sqlite"))
    }
    assert set(rows) == {"jobtrail-pg", "jobtrail-pg-tuned", "jobtrail-sqlite"}, done.stdout
    for name, cells in rows.items():
        assert len(cells) == COLUMNS, (name, cells)
        assert cells[0] == "flushed", (name, cells)
        numbers = [float(c.replace(",", "")) for c in cells[1:]]
        # CPU is read in clock ticks (10 ms): a run this small may spend less than one
        assert all(n > 0 for n in numbers[:-1]) and numbers[-1] >= 0, (name, cells)
    # the moonshot row: jobtrail's 2 processes against the SQL design ceiling (bench/ceiling.py)
    assert "moonshot: jobtrail-pg 2 processes" in done.stdout, done.stdout[-2000:]
