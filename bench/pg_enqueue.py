"""Single enqueue on PostgreSQL, taken apart: wall time, the client's CPU (user and system) and
the server backend's CPU per ``app.enqueue`` call, with the library's defaults, on a database
of its own on a server on this machine (the backends' CPU is read from ``/proc``), and the
server's WAL fsyncs per call meanwhile (``pg_stat_wal``: the server's, whoever caused them).

    python bench/pg_enqueue.py                          # 3,000 enqueues, as migrated
    python bench/pg_enqueue.py --variants --rounds 5    # what the CHECK constraints cost
    python bench/pg_enqueue.py --nowait --rounds 5      # durable vs wait_for_disk=False

``--variants`` runs the same loop, in interleaved rounds, on four schemas of that database:
``as migrated``; ``state lists as regex`` (every ``x = ANY (ARRAY['queued', ...])`` in a CHECK
of the tasks and transitions tables rewritten as ``x ~ '^(queued|...)$'``: the same values
pass, the stored tree is a third of the size); ``state CHECKs as domains`` (the three state
columns' CHECKs moved to domains the columns take as their types: a domain's checks stay
planned in the backend's type cache); and ``no CHECKs`` (all of those tables' CHECKs dropped:
a measuring aid, never something to run a store without). ``--nowait`` adds ``no flush wait``:
the migrated schema, each enqueue with ``wait_for_disk=False``. PostgreSQL turns a table's CHECK
constraints from their stored text back into expression trees and plans them at every
statement that writes the table (``ExecConstraints``: ``stringToNode``, then the planner),
prepared or not; a single enqueue writes two tables. The table prints each variant's CHECK
text (``pg_constraint.conbin`` of the two tables) beside its times. The variants are scratch
schemas only (the domains would take a rewrite of both tables under an exclusive lock).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from typing import Any
from urllib.parse import quote

import psycopg
from run import TICK, cpu_ticks

import jobtrail

SERVER = os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
DATABASE = "bench_" + os.environ.get("BENCH_DB_PREFIX", "") + "pg_enqueue"
TABLES = ("jobtrail_tasks", "jobtrail_transition_log")
VARIANTS = ("as migrated", "state lists as regex", "state CHECKs as domains", "no CHECKs")
NOWAIT = "no flush wait"
_STATE_LIST = re.compile(r"\((\w+) = ANY \(ARRAY\[([^\]]+)\]\)\)")


def database_url(server: str) -> str:
    return server.rsplit("/", 1)[0] + "/" + DATABASE


#: (table, name, definition, its one column or None, size of its stored tree)
Check = tuple[str, str, str, str | None, int]


def checks(conn: psycopg.Connection[Any], schema: str) -> list[Check]:
    """The CHECK constraints of ``TABLES`` in ``schema``."""
    rows = conn.execute(
        "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid), "
        "CASE WHEN cardinality(k.conkey) = 1 THEN (SELECT attname FROM pg_attribute "
        "WHERE attrelid = c.oid AND attnum = k.conkey[1]) END, length(k.conbin::text) "
        "FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE k.contype = 'c' AND n.nspname = %s AND c.relname = ANY(%s) ORDER BY 1, 2",
        (schema, list(TABLES)),
    ).fetchall()
    return [(r[0], r[1], r[2], r[3], int(r[4])) for r in rows]


def as_regex(definition: str) -> str:
    """``definition`` with each ``x = ANY (ARRAY['a'::text, 'b'::text])`` as ``x ~ '^(a|b)$'``."""

    def regex(match: re.Match[str]) -> str:
        values = [v.strip().removesuffix("::text").strip("'") for v in match.group(2).split(",")]
        if not all(re.fullmatch(r"\w+", v) for v in values):
            raise SystemExit(f"not a list of plain words: {match.group(0)}")
        return f"({match.group(1)} ~ '^({'|'.join(values)})$')"

    return _STATE_LIST.sub(regex, definition)


def make_schema(conn: psycopg.Connection[Any], url: str, schema: str, variant: str) -> str:
    """A migrated store in ``schema`` changed as ``variant`` says; returns its URL."""
    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    conn.execute(f"CREATE SCHEMA {schema}")
    store = f"{url}?options={quote(f'-csearch_path={schema}')}"
    jobtrail.App(store).migrate()
    changed = 0
    for table, name, definition, column, _ in checks(conn, schema):
        if variant == "state CHECKs as domains":
            if column is not None and column.endswith("state"):
                as_domain(conn, schema, table, name, definition, column)
                changed += 1
            continue
        new = None if variant == "no CHECKs" else as_regex(definition)
        if variant == "as migrated" or new == definition:
            continue
        conn.execute(f"ALTER TABLE {schema}.{table} DROP CONSTRAINT {name}")
        if new is not None:
            conn.execute(f"ALTER TABLE {schema}.{table} ADD CONSTRAINT {name} {new}")
        changed += 1
    if variant != "as migrated" and not changed:
        raise SystemExit(f"variant {variant!r} changed no constraint: not the expected schema")
    return store


def as_domain(
    conn: psycopg.Connection[Any], schema: str, table: str, name: str, definition: str, column: str
) -> None:
    """The CHECK ``name`` on ``column`` alone moved to a domain the column takes as its type
    (PostgreSQL keeps a domain's checks planned in its type cache, not per statement)."""
    kind = conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attname = %s",
        (f"{schema}.{table}", column),
    ).fetchone()
    assert kind is not None
    body = re.sub(rf"\b{column}\b", "VALUE", definition)
    conn.execute(f"ALTER TABLE {schema}.{table} DROP CONSTRAINT {name}")
    conn.execute(f"CREATE DOMAIN {schema}.{name} AS {kind[0]} {body}")
    conn.execute(f"ALTER TABLE {schema}.{table} ALTER COLUMN {column} TYPE {schema}.{name}")


def backend_seconds(conn: psycopg.Connection[Any]) -> float:
    """utime + stime of every client backend of the database but ``conn``'s own."""
    pids = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend'",
        (DATABASE,),
    ).fetchall()
    return cpu_ticks([int(pid) for (pid,) in pids]) / TICK


def wal_syncs(conn: psycopg.Connection[Any]) -> int:
    """The server's WAL fsyncs so far (``pg_stat_wal``, PostgreSQL 14+: every session's, each
    reported within a second or so)."""
    row = conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
    return int(row[0]) if row else 0


def measure(
    app: jobtrail.App, monitor: psycopg.Connection[Any], n: int, wait: bool = True
) -> dict[str, float]:
    """``n`` single enqueues in a row: microseconds per call, and the server's WAL fsyncs per
    call meanwhile (one at least for each durable commit, one after another; an unflushed
    commit leaves its flush to the WAL writer or another session's)."""
    t0, s0, y0, w0 = os.times(), backend_seconds(monitor), wal_syncs(monitor), time.perf_counter()
    for _ in range(n):
        app.enqueue("noop", {}, wait_for_disk=wait)
    wall = time.perf_counter() - w0
    t1, s1, y1 = os.times(), backend_seconds(monitor), wal_syncs(monitor)
    return {
        "wall": wall / n * 1e6,
        "user": (t1.user - t0.user) / n * 1e6,
        "sys": (t1.system - t0.system) / n * 1e6,
        "server": (s1 - s0) / n * 1e6,
        "fsyncs": (y1 - y0) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--variants", action="store_true", help="the CHECK variants too")
    parser.add_argument("--nowait", action="store_true", help="wait_for_disk=False too")
    parser.add_argument("--pg", default=SERVER, help="a server on this machine")
    args = parser.parse_args()
    with psycopg.connect(args.pg, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {DATABASE}")
    url = database_url(args.pg)
    variants = (VARIANTS if args.variants else VARIANTS[:1]) + ((NOWAIT,) if args.nowait else ())
    apps: dict[str, jobtrail.App] = {}
    sizes: dict[str, int] = {}
    try:
        with psycopg.connect(url, autocommit=True) as monitor:
            for i, variant in enumerate(variants):
                schema = f"variant{i}"
                kept = VARIANTS[0] if variant == NOWAIT else variant
                app = jobtrail.App(make_schema(monitor, url, schema, kept))
                app.task("noop", max_attempts=1)(lambda ctx, payload: None)
                for _ in range(200):  # connections open, statements prepared
                    app.enqueue("noop", {}, wait_for_disk=variant != NOWAIT)
                apps[variant] = app
                sizes[variant] = sum(c[4] for c in checks(monitor, schema))
            got: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
            for _ in range(args.rounds):
                for variant, app in apps.items():
                    got[variant].append(measure(app, monitor, args.n, variant != NOWAIT))
    finally:
        for app in apps.values():
            app.close()
        with psycopg.connect(args.pg, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    print(f"single enqueue, n={args.n}, median of {args.rounds} interleaved rounds, us per call")
    head = ("variant", "wall", "client user", "client sys", "server", "CHECK text", "per second")
    head += ("fsyncs/call",)
    print(f"{head[0]:<22}" + "".join(f"{h:>12}" for h in head[1:]) + "   vs first")
    first = statistics.median(r["wall"] for r in got[variants[0]])
    for variant in variants:
        med = {k: statistics.median(r[k] for r in got[variant]) for k in got[variant][0]}
        cells = [med["wall"], med["user"], med["sys"], med["server"]]
        print(
            f"{variant:<22}"
            + "".join(f"{c:>12.1f}" for c in cells)
            + f"{sizes[variant]:>12,}{1e6 / med['wall']:>12,.0f}{med['fsyncs']:>12.2f}"
            + f"{first / med['wall']:>9.2f}x"
        )


if __name__ == "__main__":
    main()
