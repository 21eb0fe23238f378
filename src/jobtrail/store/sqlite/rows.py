"""Rows in and out of SQLite: the decoding of what a statement returns (times, JSON, booleans),
and the JSON rows of the bulk insert (``task_insert_many``), in which each value travels exactly
(floats as power-of-two ratios, times as integer microseconds) or the batch takes the
one-by-one path."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..types import TIME_COLUMNS, NewTask, Row, dumps

_JSON_COLUMNS = frozenset({"payload", "data", "result", "queues", "kinds", "wait_ids"})
_BOOL_COLUMNS = frozenset({"reentrant", "is_effect", "paused", "detached", "evidence_on_row"})


def _decode(row: sqlite3.Row) -> Row:
    out: Row = {}
    for key in row.keys():
        value = row[key]
        if value is not None:
            if key in TIME_COLUMNS:
                value = datetime.fromtimestamp(value, UTC)
            elif key in _JSON_COLUMNS:
                value = json.loads(value)
            elif key in _BOOL_COLUMNS:
                value = bool(value)
        out[key] = value
    return out


def decode_all(cur: sqlite3.Cursor, rows: list[sqlite3.Row]) -> list[Row]:
    """``_decode`` of every row of one statement: which columns to convert is worked out once
    from the column names, then values are read by position (``sqlite3.Row`` finds a value by
    name by comparing the name with each column in turn)."""
    if not rows:
        return []
    names = [d[0] for d in cur.description]
    if len(set(names)) != len(names):  # a repeated name: keep _decode's first-match reading
        return [_decode(r) for r in rows]
    times = [(i, n) for i, n in enumerate(names) if n in TIME_COLUMNS]
    jsons = [(i, n) for i, n in enumerate(names) if n in _JSON_COLUMNS]
    bools = [(i, n) for i, n in enumerate(names) if n in _BOOL_COLUMNS]
    out: list[Row] = []
    for r in rows:
        row = dict(zip(names, r, strict=True))
        for i, n in times:
            if (value := r[i]) is not None:
                row[n] = datetime.fromtimestamp(value, UTC)
        for i, n in jsons:
            if (value := r[i]) is not None:
                row[n] = json.loads(value)
        for i, n in bools:
            if (value := r[i]) is not None:
                row[n] = bool(value)
        out.append(row)
    return out


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Doubles that travel through JSON exactly as integers (SQLite 3.40 parses JSON integers
#: exactly; the double it computes from them is then exact too, see ``_ratio``).
_EXACT_INT = 1 << 53
_MAX_DENOMINATOR = 1 << 62


def _ratio(value: float) -> tuple[int, int] | None:
    """``value`` as ``(numerator, power-of-two denominator)`` that SQLite turns back into the
    same double (``CAST(n AS REAL) / d`` is exact: ``n`` fits a double, ``d`` is a power of
    two); ``None`` when either would not fit a 64-bit integer."""
    n, d = float(value).as_integer_ratio()
    if d > _MAX_DENOMINATOR or not -(1 << 63) < n < (1 << 63):
        return None
    return n, d


def _micros(value: datetime) -> int | None:
    """``value`` in integer microseconds since the epoch; ``CAST(us AS REAL) / 1000000.0`` in
    SQLite is then the very double ``value.timestamp()`` (one correctly rounded division)."""
    if value.tzinfo is None:
        raise ValueError("times must be timezone-aware (UTC)")
    delta = value - _EPOCH
    us = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    return us if -_EXACT_INT < us < _EXACT_INT else None


def insert_rows(news: Sequence[NewTask]) -> str | None:
    """The JSON ``:rows`` of ``task_insert_many`` — or ``None`` when these tasks take the
    one-by-one path: idempotency keys or parents (a conflict or a parent check per task), more
    than one actor or transition data, a value that would not travel exactly (a NUL character,
    which SQLite's JSON functions cut text at; a float or time outside ``_ratio``/``_micros``)."""
    first = news[0]
    rows: list[list[Any]] = []
    for n in news:
        if (
            n.idempotency_key is not None
            or n.parent_id is not None
            or n.actor != first.actor
            or n.data != first.data
        ):
            return None
        lease = _ratio(n.lease_seconds)
        run_us = None
        if n.run_at is not None:
            run_us = _micros(n.run_at)
            if run_us is None:
                return None
        delay: tuple[int, int] | tuple[None, None] | None = (None, None)
        if n.delay is not None:
            delay = _ratio(n.delay)
        if lease is None or delay is None:
            return None
        rows.append(
            [
                n.kind,
                n.queue,
                n.tenant,
                n.state.value,
                n.payload_json,
                n.payload_hash,
                n.priority,
                n.max_attempts,
                lease[0],
                lease[1],
                1 if n.reentrant else 0,
                run_us,
                delay[0],
                delay[1],
            ]
        )
    text = dumps(rows)
    # \u0000 is how a NUL character appears (a false alarm only costs the one-by-one path)
    return None if "\\u0000" in text else text
