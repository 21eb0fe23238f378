"""The dead-letter view on the grown PostgreSQL store, cold and warm (issue 21, growth).

    python bench/growth.py --backend postgres --only grown   # leaves the database bench_growth_pg
    sudo python bench/dead_reads.py                          # restarts PostgreSQL: root

Before each read PostgreSQL is restarted (``pg_ctlcluster <version> main restart``) and the OS
page cache dropped (``/proc/sys/vm/drop_caches``), so the first ``app.dead(tasks=5)`` (what
``/dead`` shows) reads from disk; the second read, right after, is the warm figure. Prints
milliseconds for ``--rounds`` rounds. Only for a machine of your own: it restarts the server
every other process uses.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

import jobtrail

URL = "postgresql://postgres@127.0.0.1:5432/bench_growth_pg"


def cold_server(version: str) -> None:
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"], check=True
    )
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    for _ in range(100):
        if subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1"], check=False).returncode == 0:
            return
        time.sleep(0.1)
    raise SystemExit("PostgreSQL did not come back")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=URL)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--version", default="15", help="the PostgreSQL cluster's version")
    args = parser.parse_args()
    cold, warm = [], []
    for _ in range(args.rounds):
        cold_server(args.version)
        app = jobtrail.App(args.url)
        app.list(limit=1)  # connected, as a running server is
        start = time.perf_counter()
        groups = app.dead(tasks=5)
        cold.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        app.dead(tasks=5)
        warm.append((time.perf_counter() - start) * 1000)
        app.close()
    dead = sum(g["count"] for g in groups)
    print(f"app.dead(tasks=5), {dead:,} dead tasks in {len(groups)} groups")
    print("cold ms", " / ".join(f"{v:,.0f}" for v in cold))
    print("warm ms", " / ".join(f"{v:,.0f}" for v in warm))


if __name__ == "__main__":
    main()
