"""Single enqueue on SQLite, taken apart: wall time, CPU (user and system) and WAL frames per
``app.enqueue`` call, on a fresh file, with the library's defaults (WAL, ``synchronous=FULL``).

    python bench/sqlite_enqueue.py                      # 3,000 enqueues, FULL
    python bench/sqlite_enqueue.py --n 5000 --sync OFF  # the cost without the fsync
    python bench/sqlite_enqueue.py --frames             # WAL frames per commit (no checkpoint)
    python bench/sqlite_enqueue.py --floor --rounds 3   # the statements alone, against huey's
    python bench/sqlite_enqueue.py --variants --rounds 5  # the same on schema variants
    python bench/sqlite_enqueue.py --floor --page-size 1024  # files with smaller pages

``--floor`` runs, in interleaved rounds on fresh files, the statements alone in a bare
``sqlite3`` loop (no jobtrail Python): huey's shape (one row in a four-column table with one
index, what ``SqliteHuey.enqueue`` writes), jobtrail's task insert alone, and jobtrail's single
enqueue (``task_insert`` and ``task_inserted``, read from the library's own SQL; before
migration 0027, also its transition's row in the log table: ``task + log``); then
``app.enqueue`` itself. Each is one ``BEGIN IMMEDIATE`` ... ``COMMIT`` with the library's
pragmas: what a single enqueue can cost with this schema before any Python. ``--variants`` runs
``task + log`` (a single enqueue before migration 0027, which moved the enqueued transition
onto the task row) also on scratch copies of the schema changed step by step (``VARIANTS``:
the transitions ``WITHOUT ROWID`` keyed by (task_id, seq), then no AUTOINCREMENT on the
tasks, then no index on the transitions' ``at``): what each would buy.
``--page-size N`` makes every file of ``--floor`` with pages of N bytes (fewer bytes written per
commit, deeper trees), without the ``app.enqueue`` row (the App makes its own file).

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
import sqlite3
import statistics
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


#: ``--variants``: the schema changes tried on top of each other for ``task + log``, as text
#: substitutions of the migrated schema (never applied to a real store)
VARIANTS: dict[str, list[tuple[str, str, str | None]]] = {
    "log WITHOUT ROWID": [
        ("TABLE jobtrail_transition_log",
         "id             INTEGER PRIMARY KEY AUTOINCREMENT,\n", ""),
        ("TABLE jobtrail_transition_log", "UNIQUE (task_id, seq)\n)",
         "PRIMARY KEY (task_id, seq)\n) WITHOUT ROWID"),
    ],
    "+ no AUTOINCREMENT": [
        ("TABLE jobtrail_tasks", "INTEGER PRIMARY KEY AUTOINCREMENT", "INTEGER PRIMARY KEY"),
    ],
    "+ no at index": [("INDEX jobtrail_transitions_at", "", None)],  # None: leave it out
}  # fmt: skip


def variant_schema(template: Path, upto: str) -> list[str]:
    """The migrated schema of ``template`` with the ``VARIANTS`` up to ``upto`` applied."""
    conn = sqlite3.connect(template)
    try:
        statements = [
            r[0]
            for r in conn.execute(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE "
                "'sqlite_%' ORDER BY rowid"
            )
        ]
    finally:
        conn.close()
    names = list(VARIANTS)
    for name in names[: names.index(upto) + 1]:
        for target, old, new in VARIANTS[name]:
            hit = [s for s in statements if f"CREATE {target}" in s]
            if not hit or (new is not None and old not in hit[0]):
                raise SystemExit(f"variant {name!r}: {target} is not as expected")
            i = statements.index(hit[0])
            if new is None:
                del statements[i]
            else:
                statements[i] = hit[0].replace(old, new)
    return statements


def floor(
    n: int, sync: str, rounds: int, folder: Path, variants: bool = False, page_size: int = 0
) -> None:
    """``--floor``: the statements alone against huey's shape, then ``app.enqueue``;
    ``--variants``: ``task + log`` on the schema variants too, instead of ``app.enqueue``;
    ``page_size``: every file made with that page size (0: SQLite's default)."""
    from jobtrail.store import queries

    sql = queries.load("sqlite")
    now = time.time()
    task = dict(
        kind="noop", queue="default", tenant="", state="queued", payload="{}",
        payload_hash="0" * 64, idempotency_key=None, priority=0, max_attempts=1,
        lease_seconds=30.0, reentrant=1, run_at=None, delay=None, parent_id=None,
        actor="caller", data="{}",
    )  # fmt: skip

    def huey(conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO task (queue, data, priority) VALUES (?, ?, ?)", ("huey", b"x" * 120, 0.0)
        )

    def task_only(conn: sqlite3.Connection) -> None:
        conn.execute(sql["task_insert"], task)

    def enqueue(conn: sqlite3.Connection) -> None:
        # a single enqueue since 0027: its enqueued transition is on the task row
        task_id = conn.execute(sql["task_insert"], task).lastrowid
        conn.execute(sql["task_inserted"], {"id": task_id}).fetchone()

    def with_log(conn: sqlite3.Connection) -> None:
        # what it was before 0027: the transition as a row of the log table too
        task_id = conn.execute(sql["task_insert"], task).lastrowid
        conn.execute(sql["task_inserted"], {"id": task_id}).fetchone()
        conn.execute(
            "INSERT INTO jobtrail_transition_log (task_id, seq, to_state, reason, actor, "
            "attempt, at, data) VALUES (?, 1, 'queued', 'enqueued', 'caller', 0, ?, '{}')",
            (task_id, now),
        )

    shapes: dict[str, Any] = {
        "huey's row": huey,
        "task row": task_only,
        "enqueue (0027)": enqueue,
        "task + log (<0027)": with_log,
    }
    if variants:
        template = folder / "template.db"
        jobtrail.App(f"sqlite:///{template}").migrate()
        shapes.update({name: with_log for name in VARIANTS})
    last = [] if variants or page_size else ["app.enqueue"]  # the App makes its own file
    results: dict[str, list[float]] = {name: [] for name in [*shapes, *last]}
    for r in range(rounds):
        for k, (name, statements) in enumerate(shapes.items()):
            path = folder / f"floor-{r}-{k}.db"
            if page_size:  # fixed when the file is first written
                made = sqlite3.connect(path)
                made.execute(f"PRAGMA page_size={int(page_size)}")
                made.execute("VACUUM")
                made.close()
            if name in VARIANTS:
                conn = sqlite3.connect(path, isolation_level=None)
                for statement in variant_schema(template, name):
                    conn.execute(statement)
            elif name == "huey's row":
                conn = sqlite3.connect(path, isolation_level=None)
                conn.execute(
                    "CREATE TABLE task (id INTEGER NOT NULL PRIMARY KEY, queue TEXT NOT NULL, "
                    "data BLOB NOT NULL, priority REAL NOT NULL DEFAULT 0.0)"
                )
                conn.execute("CREATE INDEX task_priority_id ON task (priority DESC, id ASC)")
            else:
                jobtrail.App(f"sqlite:///{path}").migrate()
                conn = sqlite3.connect(path, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={sync}")
            for i in range(n + 50):
                if i == 50:
                    t0 = time.perf_counter()
                conn.execute("BEGIN IMMEDIATE")
                statements(conn)
                conn.execute("COMMIT")
            results[name].append((time.perf_counter() - t0) / n * 1e6)
            conn.close()
        if last:
            results["app.enqueue"].append(run(n, sync, False, folder)["wall_us"])
    huey_us = statistics.median(results["huey's row"])
    print(f"single enqueue, one commit each, synchronous={sync}, n={n}, median of {rounds}")
    print(f"{'what':<20}{'us/enqueue':>12}{'per second':>12}{'vs huey':>9}")
    for name, values in results.items():
        us = statistics.median(values)
        print(f"{name:<20}{us:>12.1f}{1e6 / us:>12,.0f}{huey_us / us:>8.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--sync", default="FULL", choices=["FULL", "NORMAL", "OFF"])
    parser.add_argument("--frames", action="store_true")
    parser.add_argument("--dir", default=None, help="folder for the file (default: a temp dir)")
    parser.add_argument("--floor", action="store_true", help="the statements alone, vs huey's")
    parser.add_argument("--rounds", type=int, default=3, help="--floor: interleaved rounds")
    parser.add_argument("--variants", action="store_true", help="--floor on schema variants")
    parser.add_argument("--page-size", type=int, default=0, help="--floor: files' page size")
    args = parser.parse_args()
    if args.floor or args.variants:
        with tempfile.TemporaryDirectory(dir=args.dir or os.environ.get("TMPDIR")) as tmp:
            floor(args.n, args.sync, args.rounds, Path(tmp), args.variants, args.page_size)
        return
    if args.dir:
        folder = Path(args.dir)
        print(run(args.n, args.sync, args.frames, folder))
        return
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        print(run(args.n, args.sync, args.frames, Path(tmp)))


if __name__ == "__main__":
    main()
