"""The store's health as ``jobtrail doctor`` reports it: reachability with the
server's own answer, the schema version against the one this code expects, the wake-up path
(a LISTEN/NOTIFY round trip on PostgreSQL), the clock difference between this machine and the
database, a pooler in between; on SQLite the file, its directory, the journal mode and the
``synchronous`` setting; and the live workers: due tasks that wait in a queue no
live worker serves, or of a kind no live worker registers, are a warning.

Read-only: no probe creates a database file, a table or a row (the NOTIFY goes to a channel of
its own, so no worker wakes up). Works without an ``App``: a store too broken to open one is
what the doctor is for.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote

from ..model import live
from ..model.urls import describe_url, redact_url
from . import queries

OK, WARN, FAIL, NA = "ok", "warn", "fail", "n/a"
#: The clock difference (seconds, beyond the round trip's uncertainty) reported as a warning:
#: decisions use the database clock, but a ``run_at`` computed on this machine is off by it.
CLOCK_WARN = 1.0
#: How long the LISTEN side waits for its own notification (seconds).
NOTIFY_WAIT = 2.0


@dataclass
class Check:
    """One line of the report: ``status`` is ``ok``, ``warn``, ``fail`` or ``n/a``."""

    name: str
    status: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def healthy(checks: list[Check]) -> bool:
    """All is well: every check passed or does not apply (``doctor`` exits 0)."""
    return all(c.status in (OK, NA) for c in checks)


def diagnose(
    url: str,
    *,
    timeout: float = 5.0,
    synchronous: str | None = None,
    listen_url: str | None = None,
) -> list[Check]:
    """The checks of the store at ``url`` (``ValueError`` for a URL of no known scheme). With
    ``listen_url`` (PostgreSQL) the LISTEN side of the round trip connects there, as the
    workers' does, and the NOTIFY goes through ``url``."""
    if url.startswith("sqlite:"):
        return _sqlite(url, synchronous)
    if url.startswith(("postgresql:", "postgres:")):
        return _postgres(url, timeout, listen_url)
    scheme = url.split(":", 1)[0] if ":" in url else url
    raise ValueError(
        f"unsupported database URL scheme {scheme!r}: use sqlite:///path.db or "
        "postgresql://user:pass@host:port/db"
    )


def _schema(url: str, have: set[int] | None, dialect: str) -> Check:
    expected = {version for version, _, _ in queries.migrations(dialect)}
    latest = max(expected)
    command = f"jobtrail migrate --db {describe_url(url)}"
    if not have:
        return Check(
            "schema",
            FAIL,
            f"no jobtrail schema (expected version {latest}); run `{command}`",
            {"current": None, "expected": latest, "missing": sorted(expected)},
        )
    missing, unknown = sorted(expected - have), sorted(have - expected)
    data = {"current": max(have), "expected": latest, "missing": missing, "unknown": unknown}
    if missing:
        return Check(
            "schema",
            FAIL,
            f"version {max(have)}, expected {latest}: migrations {missing} not applied; "
            f"run `{command}`",
            data,
        )
    if unknown:
        return Check(
            "schema",
            WARN,
            f"version {max(have)}, expected {latest}: the database has migrations {unknown} "
            "this jobtrail does not know (a newer jobtrail migrated it?)",
            data,
        )
    return Check("schema", OK, f"version {latest} (expected {latest})", data)


#: Queue and kind pairs named in the workers check's line; the rest are counted.
UNSERVED_SHOWN = 5


def _workers(conn: Any, dialect: str) -> Check:
    """Due work that no live worker takes, with the store's own named reads."""
    sql = queries.load(dialect)
    try:
        workers = [_decoded(r) for r in _dicts(conn.execute(sql["worker_list"]))]
        groups = _dicts(conn.execute(sql["worker_due_groups"]))
    except Exception as exc:  # the doctor reports what it cannot read; it never crashes
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Check("workers", FAIL, f"cannot read the workers: {first}")
    unserved = []
    for g in groups:
        why = live.missing(g["queue"], g["kind"], workers)
        if why is not None:
            unserved.append({"queue": g["queue"], "kind": g["kind"], "due": g["n"], "why": why})
    data: dict[str, Any] = {"live": [w["id"] for w in workers], "unserved": unserved}
    alive = f"{len(workers)} live worker{'' if len(workers) == 1 else 's'}"
    if not unserved:
        due = "every due task has one that takes it" if groups else "no task is due"
        return Check("workers", OK, f"{alive}; {due}", data)
    parts = []
    for u in unserved[:UNSERVED_SHOWN]:
        parts.append(
            f"{u['due']} in queue {u['queue']} (kind {u['kind']}): no live worker serves queue "
            f"{u['queue']}"
            if u["why"] == live.NO_QUEUE
            else f"{u['due']} of kind {u['kind']} (queue {u['queue']}): no live worker "
            f"registers kind {u['kind']}"
        )
    if len(unserved) > UNSERVED_SHOWN:
        parts.append(f"and {len(unserved) - UNSERVED_SHOWN} more queue/kind pairs")
    waiting = sum(u["due"] for u in unserved)
    return Check(
        "workers",
        WARN,
        f"{waiting} due task{'' if waiting == 1 else 's'} wait for a worker that is not "
        f"there: {'; '.join(parts)} ({alive}: `jobtrail workers` lists them)",
        data,
    )


def _dicts(cur: Any) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _decoded(row: dict[str, Any]) -> dict[str, Any]:
    """A worker row's ``queues`` and ``kinds`` as lists (JSON text on SQLite)."""
    for key in ("queues", "kinds"):
        if isinstance(row[key], str):
            row[key] = json.loads(row[key])
    return row


# -- SQLite ----------------------------------------------------------------------------------
def _sqlite(url: str, synchronous: str | None) -> list[Check]:
    from .sqlite import path_from_url

    path = os.path.abspath(path_from_url(url))
    folder = os.path.dirname(path)
    checks: list[Check] = []
    exists = os.path.isfile(path)
    if exists:
        checks.append(Check("file", OK, f"{path} ({os.path.getsize(path)} bytes)", {"path": path}))
    else:
        checks.append(
            Check(
                "file",
                FAIL,
                f"no database file at {path}; run `jobtrail migrate --db {describe_url(url)}`",
                {"path": path},
            )
        )
    if not os.path.isdir(folder):
        checks.append(Check("directory", FAIL, f"{folder} does not exist", {"path": folder}))
    elif not os.access(folder, os.W_OK | os.X_OK):
        checks.append(
            Check(
                "directory",
                FAIL,
                f"{folder} is not writable: SQLite's WAL needs to create {path}-wal and -shm",
                {"path": folder},
            )
        )
    else:
        checks.append(Check("directory", OK, f"{folder} is writable", {"path": folder}))
    sync = (synchronous or os.environ.get("JOBTRAIL_SQLITE_SYNCHRONOUS") or "FULL").upper()
    if sync in ("FULL", "EXTRA"):
        checks.append(Check("synchronous", OK, f"{sync} (durable)", {"value": sync}))
    elif sync == "NORMAL":
        checks.append(
            Check(
                "synchronous",
                WARN,
                "NORMAL (JOBTRAIL_SQLITE_SYNCHRONOUS): the last commits can be lost on a power "
                "loss",
                {"value": sync},
            )
        )
    else:
        checks.append(
            Check(
                "synchronous",
                FAIL,
                f"JOBTRAIL_SQLITE_SYNCHRONOUS={sync!r}: must be FULL, EXTRA or NORMAL",
                {"value": sync},
            )
        )
    if exists:
        checks += _sqlite_file(url, path)
    else:
        checks.append(Check("journal", NA, "no database file", {}))
        checks.append(_schema(url, None, "sqlite"))
        checks.append(Check("workers", NA, "no database file", {}))
    checks.append(
        Check(
            "wake-up",
            NA,
            "SQLite has no LISTEN/NOTIFY: idle workers watch PRAGMA data_version every 2 ms "
            "(and are woken at once by an enqueue in their own process)",
        )
    )
    checks.append(Check("clock", NA, "the database clock is this machine's"))
    return checks


def _sqlite_file(url: str, path: str) -> list[Check]:
    try:
        # read-only: the doctor never creates or converts anything
        conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        return [
            Check("journal", FAIL, f"cannot open {path}: {exc}", {}),
            Check("schema", NA, "the file cannot be opened", {}),
        ]
    try:
        checks: list[Check] = []
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if mode == "wal":
            checks.append(Check("journal", OK, "WAL", {"mode": mode}))
        else:
            checks.append(
                Check(
                    "journal",
                    WARN,
                    f"{mode}, not WAL: jobtrail switches the file to WAL when it opens it to "
                    "write (run `jobtrail migrate`)",
                    {"mode": mode},
                )
            )
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobtrail_migrations'"
        ).fetchone()
        have = (
            {int(r[0]) for r in conn.execute("SELECT version FROM jobtrail_migrations")}
            if found
            else None
        )
        schema = _schema(url, have, "sqlite")
        checks.append(schema)
        checks.append(
            _workers(conn, "sqlite")
            if schema.status in (OK, WARN)
            else Check("workers", NA, "no current schema to read")
        )
        return checks
    except sqlite3.Error as exc:
        return [Check("schema", FAIL, f"cannot read {path}: {exc}", {})]
    finally:
        conn.close()


# -- PostgreSQL ------------------------------------------------------------------------------
def _postgres(url: str, timeout: float, listen_url: str | None = None) -> list[Check]:
    import psycopg

    from .postgres.connection import connect_error_text

    options = {"autocommit": True, "connect_timeout": max(1, int(timeout))}
    started = time.monotonic()
    try:
        conn = psycopg.connect(url, **options)  # type: ignore[arg-type]
    except psycopg.Error as exc:
        checks = [Check("reachable", FAIL, connect_error_text(exc), {"url": redact_url(url)})]
        for name in ("schema", "listen/notify", "clock", "pooler", "workers"):
            checks.append(Check(name, NA, "the database cannot be reached"))
        return checks
    try:
        other = psycopg.connect(url, **options)  # type: ignore[arg-type]
    except psycopg.Error:
        other = None
    try:
        took = time.monotonic() - started
        info = conn.info
        version = conn.execute("SHOW server_version").fetchone()
        checks = [
            Check(
                "reachable",
                OK,
                f"PostgreSQL {version[0] if version else '?'} at {info.host}:{info.port}, "
                f"database {info.dbname}, user {info.user} (connected in {took * 1000:.0f} ms)",
                {"url": redact_url(url), "server_version": version[0] if version else None},
            )
        ]
        schema = _pg_schema(url, conn)
        checks.append(schema)
        if listen_url:
            try:
                listener = psycopg.connect(listen_url, **options)  # type: ignore[arg-type]
            except psycopg.Error as exc:
                checks.append(
                    Check("listen/notify", FAIL, f"listen URL: {connect_error_text(exc)}")
                )
            else:
                with listener:
                    checks.append(_pg_notify(listener, conn))
        else:
            checks.append(_pg_notify(conn, other))
        checks.append(_pg_clock(conn))
        checks.append(_pg_pooler(conn, other))
        checks.append(
            _workers(conn, "postgres")
            if schema.status in (OK, WARN)
            else Check("workers", NA, "no current schema to read")
        )
        return checks
    finally:
        conn.close()
        if other is not None:
            other.close()


def _pg_schema(url: str, conn: Any) -> Check:
    row = conn.execute("SELECT to_regclass('jobtrail_migrations') IS NOT NULL").fetchone()
    have = (
        {int(r[0]) for r in conn.execute("SELECT version FROM jobtrail_migrations")}
        if row and row[0]
        else None
    )
    return _schema(url, have, "postgres")


def _pg_notify(listener: Any, sender: Any) -> Check:
    """A NOTIFY sent on one connection must reach a LISTEN on another, as a worker's would."""
    from psycopg import sql

    if sender is None:
        return Check("listen/notify", FAIL, "a second connection could not be opened")
    channel = f"jobtrail_doctor_{secrets.token_hex(4)}"  # its own: no worker wakes up
    listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
    started = time.monotonic()
    sender.execute("SELECT pg_notify(%s, 'doctor')", (channel,))
    got = list(listener.notifies(timeout=NOTIFY_WAIT, stop_after=1))
    listener.execute("UNLISTEN *")
    if got:
        took = (time.monotonic() - started) * 1000
        return Check("listen/notify", OK, f"a notification arrived in {took:.1f} ms", {"ms": took})
    return Check(
        "listen/notify",
        WARN,
        f"no notification arrived within {NOTIFY_WAIT:.0f} s (a pooler in transaction mode "
        "drops LISTEN): idle workers will only poll; give them a direct listen URL",
        {"ms": None},
    )


def _pg_clock(conn: Any) -> Check:
    before = time.time()
    row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    after = time.time()
    offset = float(row[0]) - (before + after) / 2
    uncertainty = (after - before) / 2
    data = {"offset_s": round(offset, 4), "uncertainty_s": round(uncertainty, 4)}
    side = "ahead of" if offset > 0 else "behind"
    text = f"the database clock is {abs(offset):.3f} s {side} this machine's (±{uncertainty:.3f})"
    if abs(offset) - uncertainty > CLOCK_WARN:
        return Check(
            "clock",
            WARN,
            f"{text}: jobtrail decides by the database clock, but a run_at computed here is off "
            "by that much; synchronise this machine (NTP)",
            data,
        )
    return Check("clock", OK, text, data)


def _pg_pooler(conn: Any, other: Any) -> Check:
    """A pooler shows in two ways. Any pooler or proxy: ``postgres/pooler.py``'s signs (the
    backend key or the port), the look the App itself makes at start. A transaction-mode
    pooler: the server backend behind one connection changes between transactions, or two
    connections share one backend (a direct connection has one backend of its own for its
    whole life)."""
    from .postgres.pooler import signs

    found = signs(conn)
    pids = [conn.execute("SELECT pg_backend_pid()").fetchone()[0] for _ in range(3)]
    other_pid = other.execute("SELECT pg_backend_pid()").fetchone()[0] if other else None
    data: dict[str, Any] = {
        "backend_pids": pids,
        "other_backend_pid": other_pid,
        "port": found.port,
        "server_port": found.server_port,
    }
    if len(set(pids)) > 1 or other_pid in pids:
        data["mode"] = "transaction"
        return Check(
            "pooler",
            WARN,
            "a pooler in transaction mode (the server backend changed between transactions): "
            'run jobtrail with pooler="transaction" (--pooler transaction) and LISTEN through a '
            "direct or session-pooled listen URL",
            data,
        )
    if found.proxied:
        data["mode"] = "session or proxy"
        app = (
            "without pooler= the App takes it for a transaction pooler and warns; set "
            'pooler="session" if it keeps each client\'s session'
            if found.pooler
            else "the App keeps its sessions"
        )
        return Check(
            "pooler",
            OK,
            f"a pooler or proxy ({found.why()}); the backend stays the same (session mode or a "
            f"plain proxy: {app})",
            data,
        )
    data["mode"] = None
    return Check("pooler", OK, "none detected: connected to PostgreSQL itself", data)
