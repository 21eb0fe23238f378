"""Helpers of the reliability tests: raw SQL on a test store (to corrupt it on purpose, or to
move a lease into the past), and running the CLI in-process."""

from __future__ import annotations

import contextlib
import io
import sqlite3
from typing import Any

import psycopg

import jobtrail.cli


def raw(url: str, sqlite_sql: str, pg_sql: str, params: tuple[Any, ...] = ()) -> None:
    """Run one statement directly on the store at ``url`` (``?`` / ``%s`` placeholders)."""
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url[len("sqlite:///") :], timeout=30)
        try:
            with conn:
                conn.execute(sqlite_sql, params)
        finally:
            conn.close()
    else:
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute(pg_sql, params)  # type: ignore[arg-type]


def expire_lease(url: str, task_id: str | int) -> None:
    """Simulate time passing: the task's lease (not its log) now lies in the past."""
    raw(
        url,
        "UPDATE jobtrail_tasks SET lease_expires_at = lease_expires_at - 3600 WHERE id = ?",
        "UPDATE jobtrail_tasks SET lease_expires_at = lease_expires_at - interval '1 hour' "
        "WHERE id = %s",
        (int(task_id),),
    )


def make_due(url: str, task_id: str | int) -> None:
    """Simulate time passing: a queued task's run_at (retry or snooze time) is now."""
    raw(
        url,
        "UPDATE jobtrail_tasks SET run_at = run_at - 86400 * 365 WHERE id = ? AND "
        "run_at < 253402300799 - 86400 * 366",
        "UPDATE jobtrail_tasks SET run_at = run_at - interval '365 days' WHERE id = %s AND "
        "run_at < '9999-01-01'",
        (int(task_id),),
    )


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``jobtrail.cli.main(argv)`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code: Any = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            jobtrail.cli.main(argv)
        except SystemExit as exc:
            code = exc.code
    return int(code or 0), out.getvalue(), err.getvalue()
