"""What a store error means for the person who asked: the store cannot be reached (try again
soon) or it cannot write (disk full, read-only) — both are "nothing was stored", never a
server fault. Read by the HTTP server (503 + ``Retry-After``) and the CLI (one line, exit 1).

A driver may wrap the database's error (the PostgreSQL driver raises ``StoreUnavailable``
from every ``OperationalError``, ``DiskFull`` included), so the cause chain is read too.
psycopg is imported only to classify one of its own errors: the CLI on SQLite never loads it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from ..model.errors import StoreUnavailable

#: SQLite's result codes for a write the medium refuses (``sqlite3.Error.sqlite_errorname``):
#: a full disk or database file, the WAL index that cannot grow on a full disk (a new
#: connection's first transaction meets this one rather than SQLITE_FULL), and every
#: SQLITE_READONLY_* case
_SQLITE_CANNOT_WRITE = frozenset({"SQLITE_FULL", "SQLITE_IOERR_SHMSIZE"})
_SQLITE_CANNOT_WRITE_TEXT = ("database or disk is full", "readonly database")
#: PostgreSQL's SQLSTATEs: 53100 disk_full, 25006 read_only_sql_transaction (a standby, or
#: default_transaction_read_only), 53400 configuration_limit_exceeded (temp_file_limit)
_PG_CANNOT_WRITE = frozenset({"53100", "25006", "53400"})

CANNOT_WRITE = "the store cannot write (disk full or read-only); nothing was stored"
UNREACHABLE = "the task store cannot be reached; nothing was stored, try again"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )


def cannot_write(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is the store refusing every write: a full disk or
    database, or a read-only database."""
    for e in _chain(exc):
        if _from_psycopg(e) and getattr(e, "sqlstate", None) in _PG_CANNOT_WRITE:
            return True
        if isinstance(e, sqlite3.Error):
            name = getattr(e, "sqlite_errorname", None)
            if name in _SQLITE_CANNOT_WRITE or str(name).startswith("SQLITE_READONLY"):
                return True
            text = str(e).lower()
            if any(t in text for t in _SQLITE_CANNOT_WRITE_TEXT):
                return True
    return False


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` means the store could not be reached or was too busy to answer."""
    if isinstance(exc, StoreUnavailable):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return "locked" in text or "busy" in text or "unable to open" in text or "i/o" in text
    if not _from_psycopg(exc):
        return False
    import psycopg
    from psycopg_pool import PoolTimeout

    return isinstance(exc, psycopg.OperationalError | PoolTimeout)


def _from_psycopg(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("psycopg")
