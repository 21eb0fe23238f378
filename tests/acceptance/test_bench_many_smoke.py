"""`bench/many_workers.py` still runs (issue 21): a tiny run of two configurations on a
database of its own (a unique name per run, dropped at the end), through the same code the full
benchmark uses. The script exits non-zero when a store check fails (a task lost, claimed twice,
a log out of order); here its table and its per-configuration lines must also be there. Speed
is not asserted: it is measured in `bench/`."""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
from pathlib import Path

import psycopg
from conftest import PG_URL, require_pg

ROOT = Path(__file__).resolve().parents[2]


def test_many_workers_bench_runs_checks_the_store_and_prints_the_table() -> None:
    require_pg()
    db = f"bench_many_smoke_{secrets.token_hex(4)}"
    try:
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "many_workers.py"),
                *("--n", "300", "--configs", "1x3,3x2+0", "--idle", "0.5", "--settle", "0"),
                *("--probe", "2", "--probe-seconds", "0.3", "--db", db, "--drop", "--pg", PG_URL),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:  # the script drops it; a failed run may not have got there
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert re.search(r"commit probe, 2 connections: [\d,]+ commits/s", out), out
    checks = re.findall(r"store: 300/300 succeeded, lost 0, .* -> (\w+)", out)
    assert checks == ["ok", "ok"], out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[-2:]}
    assert set(rows) == {"1x3+auto", "3x2+0"}, out
    for name, cells in rows.items():
        rate = float(cells[0].replace(",", ""))
        conn_per_proc = float(cells[5])
        # every worker process holds at least its claim connection and its LISTEN one
        assert rate > 0 and conn_per_proc >= 2, (name, cells)
