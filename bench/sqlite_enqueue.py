"""Single enqueue on SQLite, taken apart: wall time, CPU (user and system) and WAL frames per
``app.enqueue`` call, on a fresh file, with the library's defaults (WAL, ``synchronous=FULL``).

    python bench/sqlite_enqueue.py                      # 3,000 enqueues, FULL
    python bench/sqlite_enqueue.py --n 5000 --sync OFF  # the cost without the fsync
    python bench/sqlite_enqueue.py --frames             # WAL frames per commit (no checkpoint)

``--sync OFF`` is a measuring aid only (``JOBTRAIL_SQLITE_SYNCHRONOUS`` accepts FULL, EXTRA and
NORMAL; the script sets the pragma on the App's connection after it opens): the difference
between FULL and OFF is what the fsyncs cost. ``--frames`` turns the automatic checkpoint off
on that connection, so the WAL file only grows: its growth divided by the frame size is the
number of pages each commit writes. Timings on a shared machine are noisy: compare runs taken
back to back.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import jobtrail

FRAME_HEADER = 24


def run(n: int, sync: str, frames: bool, folder: Path) -> dict[str, Any]:
    path = folder / f"enqueue-{sync}-{frames}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    app = jobtrail.App(f"sqlite:///{path}")
    app.migrate()

    @app.task("noop", max_attempts=1)
    def noop(ctx: Any, payload: Any) -> None:  # pragma: no cover - never run
        return None

    app.list(limit=1)  # this thread's connection exists before the clock starts
    conn = app._driver._connect()  # type: ignore[attr-defined]  # a measuring aid
    conn.execute(f"PRAGMA synchronous={sync}")
    if frames:
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    wal = Path(f"{path}-wal")
    size0 = wal.stat().st_size if wal.exists() else 0
    for _ in range(50):  # warm up (statement cache, pages in memory)
        app.enqueue("noop", {})
    size1 = wal.stat().st_size if wal.exists() else 0
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    for _ in range(n):
        app.enqueue("noop", {})
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    size2 = wal.stat().st_size if wal.exists() else 0
    app.close()
    out: dict[str, Any] = {
        "sync": sync,
        "n": n,
        "per_s": round(n / wall),
        "wall_us": round(wall / n * 1e6, 1),
        "user_us": round((r1.ru_utime - r0.ru_utime) / n * 1e6, 1),
        "sys_us": round((r1.ru_stime - r0.ru_stime) / n * 1e6, 1),
    }
    if frames:
        out["frames_per_commit"] = round((size2 - size1) / (page + FRAME_HEADER) / n, 2)
        out["warmup_frames"] = round((size1 - size0) / (page + FRAME_HEADER) / 50, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--sync", default="FULL", choices=["FULL", "NORMAL", "OFF"])
    parser.add_argument("--frames", action="store_true")
    parser.add_argument("--dir", default=None, help="folder for the file (default: a temp dir)")
    args = parser.parse_args()
    if args.dir:
        folder = Path(args.dir)
        print(run(args.n, args.sync, args.frames, folder))
        return
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        print(run(args.n, args.sync, args.frames, Path(tmp)))


if __name__ == "__main__":
    main()
