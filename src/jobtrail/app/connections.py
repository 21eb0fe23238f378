"""``connection=``: the caller's open transaction, given as a DBAPI connection (``sqlite3`` or
psycopg 3) or as a SQLAlchemy 2 ``Connection`` or ``Session`` on one (docs/sqlalchemy.md). Unwrapped
here to the DBAPI connection the drivers write on; SQLAlchemy is never imported (a SQLAlchemy
object is recognised by its type's module), so it stays an optional extra."""

from __future__ import annotations

from typing import Any


def dbapi_connection(connection: Any) -> Any:
    """The DBAPI connection under ``connection`` (``None`` stays ``None``; anything that is not
    a SQLAlchemy object is returned as it is, for the driver to accept or refuse)."""
    if connection is None:
        return None
    module = type(connection).__module__ or ""
    if not module.startswith("sqlalchemy."):
        return connection
    if module.startswith("sqlalchemy.ext.asyncio"):
        raise TypeError(
            f"connection= got a SQLAlchemy {type(connection).__name__}: an async connection "
            "or session needs app.aenqueue, not enqueue"
        )
    kind = type(connection)
    if hasattr(kind, "get_bind") and hasattr(kind, "connection"):  # a Session
        # Session.connection() begins the session's transaction (as its first query would)
        connection = connection.connection()
        kind = type(connection)
    # (the class is asked, not the object: a closed Connection's properties raise)
    if not hasattr(kind, "in_transaction") or not hasattr(kind, "invalidated"):
        raise TypeError(
            f"connection= must be a SQLAlchemy Connection or Session, got "
            f"{type(connection).__name__}"
        )
    if connection.closed or connection.invalidated:
        raise ValueError("connection= is a closed SQLAlchemy Connection")
    if not connection.in_transaction():
        # what SQLAlchemy's autobegin does at the first execute: the task is then part of the
        # transaction the caller ends with commit() / rollback()
        connection.begin()
    raw = connection.connection.dbapi_connection
    if raw is None:  # pragma: no cover - a detached pool proxy
        raise ValueError("connection= is a SQLAlchemy Connection with no DBAPI connection")
    return raw


async def adbapi_connection(connection: Any) -> Any:
    """``dbapi_connection`` for ``aenqueue``: a SQLAlchemy ``AsyncConnection`` or
    ``AsyncSession`` on psycopg 3 (``postgresql+psycopg://``) becomes its open
    ``psycopg.AsyncConnection``, its transaction begun; anything else is left to
    ``dbapi_connection``."""
    if connection is None:
        return None
    module = type(connection).__module__ or ""
    if not module.startswith("sqlalchemy.ext.asyncio"):
        return dbapi_connection(connection)
    kind = type(connection)
    if hasattr(kind, "get_bind") and hasattr(kind, "connection"):  # an AsyncSession
        connection = await connection.connection()
        kind = type(connection)
    if not hasattr(kind, "get_raw_connection") or not hasattr(kind, "in_transaction"):
        raise TypeError(
            "connection= must be a SQLAlchemy AsyncConnection or AsyncSession, got "
            f"{type(connection).__name__}"
        )
    if connection.closed:
        raise ValueError("connection= is a closed SQLAlchemy AsyncConnection")
    if not connection.in_transaction():
        await connection.begin()
    fairy = await connection.get_raw_connection()
    raw = fairy.driver_connection
    if type(raw).__module__.split(".")[0] != "psycopg":
        raise TypeError(
            "connection= is a SQLAlchemy AsyncConnection on "
            f"{type(raw).__module__}.{type(raw).__name__}: aenqueue joins async "
            "transactions on psycopg 3 (postgresql+psycopg://); on SQLite pass a sync "
            "Connection or Session to enqueue"
        )
    return raw
