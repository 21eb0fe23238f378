"""A fixed statement run through libpq's extended protocol directly (``PQexecPrepared``).

For the single enqueue on a connection the PostgreSQL driver owns. psycopg's execute path
(query conversion, a dumper per parameter, its prepared-statement bookkeeping, a generator
waited on from Python, a row maker) costs ~30 µs of client CPU per statement; the one-row
insert costs the server ~250 µs with its commit, and the caller waits for both. Here the
statement is prepared once per connection, its parameters are written as text by type, and
its result comes back in binary. The libpq call releases the GIL while it waits.

Errors are psycopg's own: the server's error as the class of its SQLSTATE, a connection that
broke as ``OperationalError`` (as psycopg's execute reports them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import psycopg
from psycopg import pq

_PARAMETER = re.compile(r"%\((\w+)\)s")
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)

# binary result decoders by type OID
_DECODERS: dict[int, Callable[[bytes], Any]] = {
    20: lambda b: int.from_bytes(b, "big", signed=True),  # int8
    23: lambda b: int.from_bytes(b, "big", signed=True),  # int4
    16: lambda b: b == b"\x01",  # bool
    25: lambda b: b.decode("utf-8"),  # text
    1184: lambda b: _PG_EPOCH + timedelta(microseconds=int.from_bytes(b, "big", signed=True)),
}


def positional(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` (psycopg's named placeholders only) with its ``%(name)s`` placeholders numbered
    ``$1, $2, ...`` (a name used twice keeps its number) and ``%%`` as ``%``, and the names in
    number order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PARAMETER.sub(number, sql).replace("%%", "%"), tuple(names)


def text_value(value: Any) -> bytes | None:
    """A parameter in PostgreSQL's text input format (the server casts it to the parameter's
    type), ``None`` for NULL. ``ValueError`` for text holding a NUL character, which libpq's
    text parameters cannot carry (psycopg's own path reports it as a ``DataError``)."""
    if value is None:
        return None
    if value is True:
        return b"t"
    if value is False:
        return b"f"
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("text with a NUL character")
        return value.encode("utf-8")
    if isinstance(value, int):
        return b"%d" % value
    if isinstance(value, float):
        return repr(value).encode("ascii")
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("times must be timezone-aware")
        return value.isoformat().encode("ascii")
    raise TypeError(f"no text form for a {type(value).__name__} parameter")


class DirectStatement:
    """One statement, prepared on each connection it runs on under ``name``."""

    def __init__(self, name: str, sql: str) -> None:
        text, self.names = positional(sql)
        self.name = name.encode("ascii")
        self.text = text.encode("utf-8")

    def values(self, params: Mapping[str, Any]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for name in self.names:
            value = params[name]
            if value is None:
                out.append(None)
            elif type(value) is str and "\x00" not in value:  # most of them
                out.append(value.encode("utf-8"))
            else:
                out.append(text_value(value))
        return out

    def first(
        self,
        conn: psycopg.Connection[Any],
        prepared: set[bytes] | None,
        values: list[bytes | None],
    ) -> tuple[Any, ...] | None:
        """Run on ``conn`` (an autocommit connection nobody else uses meanwhile; ``prepared``
        holds the names prepared on it so far) and return the first row, or ``None``. With
        ``prepared=None`` (behind a transaction pooler, where the next statement may reach
        another server session) nothing is prepared: an unnamed statement, parsed each time."""
        pgconn = conn.pgconn
        # None is SQL NULL (libpq's NULL pointer; psycopg's annotation leaves it out)
        params = cast("list[bytes]", values)
        if prepared is None:
            result = pgconn.exec_params(self.text, params, result_format=pq.Format.BINARY)
            _check(conn, result, pq.ExecStatus.TUPLES_OK)
            return _first_row(result)
        if self.name not in prepared:
            _check(conn, pgconn.prepare(self.name, self.text), pq.ExecStatus.COMMAND_OK)
            prepared.add(self.name)
        result = pgconn.exec_prepared(self.name, params, result_format=pq.Format.BINARY)
        _check(conn, result, pq.ExecStatus.TUPLES_OK)
        return _first_row(result)


def _first_row(result: pq.abc.PGresult) -> tuple[Any, ...] | None:
    if result.ntuples == 0:
        return None
    row = []
    for i in range(result.nfields):
        raw = result.get_value(0, i)
        row.append(None if raw is None else _decode(result.ftype(i), raw))
    return tuple(row)


def _decode(oid: int, raw: bytes) -> Any:
    decoder = _DECODERS.get(oid)
    if decoder is None:
        raise TypeError(f"no binary decoder for a column of type OID {oid}")
    return decoder(raw)


def _check(conn: psycopg.Connection[Any], result: pq.abc.PGresult, ok: pq.ExecStatus) -> None:
    if result.status == ok:
        return
    if conn.pgconn.status == pq.ConnStatus.BAD:
        message = result.get_error_message(conn.info.encoding) or "the connection was lost"
        raise psycopg.OperationalError(message)
    raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
