"""A task's enqueued transition is kept on its row (migration 0027), on both backends: the log
readers see it as the log's first entry, exactly as the log row it replaces; it is as fixed as
a log row; the readers of a time window count it exactly (PostgreSQL through the id marks)."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

import psycopg
import pytest

import jobtrail

from .support import db_now, raw, run

DB_ERRORS = (sqlite3.DatabaseError, psycopg.Error)


def _one(app: jobtrail.App, sql: str, params: tuple[Any, ...] = ()) -> Any:
    with app._driver.transaction() as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        if app._driver.dialect == "postgres":
            sql = sql.replace("?", "%s")
        row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def _kind(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, payload: None)


def test_an_enqueue_writes_the_task_row_alone(app: jobtrail.App) -> None:
    _kind(app)
    tasks = [
        app.enqueue("k", {"a": 1}),
        *app.enqueue_many([{"kind": "k", "payload": {"i": i}} for i in range(3)]),
        app.enqueue("k", {"b": 2}, expires_in=600),  # the controls' insert
    ]
    for task in tasks:
        assert _one(app, "SELECT COUNT(*) FROM jobtrail_transition_log WHERE task_id = ?",
                    (int(task.id),)) == 0  # fmt: skip
        [first] = app.transitions(task.id)
        assert (first.seq, first.from_state, first.to_state, first.reason, first.attempt) == (
            1,
            None,
            "queued",
            "enqueued",
            0,
        )
        assert first.at == app.get(task.id).created_at
    run(app)
    for task in tasks:
        log = app.transitions(task.id)
        assert [t.reason for t in log] == ["enqueued", "claimed", "completed"]
        assert log[-1].to_state == app.get(task.id).state
        assert _one(app, "SELECT COUNT(*) FROM jobtrail_transition_log WHERE task_id = ?",
                    (int(task.id),)) == 2  # fmt: skip
    assert app.check() == []
    assert app.prune(0) == {"tasks": 5, "transitions": 15}


def test_the_entry_on_the_row_is_as_fixed_as_a_log_row(app: jobtrail.App) -> None:
    _kind(app)
    task = app.enqueue("k")
    before = app.transitions(task.id)
    for sql in (
        "UPDATE jobtrail_tasks SET enq_actor = 'mallory' WHERE id = ?",
        "UPDATE jobtrail_tasks SET enq_state = 'dead' WHERE id = ?",
        "UPDATE jobtrail_tasks SET enq_data = '{\"x\": 1}' WHERE id = ?",
        "UPDATE jobtrail_tasks SET created_at = updated_at + (updated_at - created_at) + 1"
        " WHERE id = ?"
        if app._driver.dialect == "sqlite"
        else "UPDATE jobtrail_tasks SET created_at = created_at - interval '1 minute' WHERE id = ?",
        "UPDATE jobtrail_transitions SET actor = 'mallory' WHERE task_id = ? AND seq = 1",
        "DELETE FROM jobtrail_transitions WHERE task_id = ?",
    ):
        with pytest.raises(DB_ERRORS, match="append-only"):
            raw(app, sql, (int(task.id),))
    raw(app, "UPDATE jobtrail_tasks SET priority = priority WHERE id = ?", (int(task.id),))
    assert app.transitions(task.id) == before
    # a row written to the view is appended to the log table
    raw(
        app,
        "INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor,"
        " attempt, at) SELECT id, 2, 'queued', 'queued', 'manual_fix', 'ops', 0, created_at"
        " FROM jobtrail_tasks WHERE id = ?",
        (int(task.id),),
    )
    raw(app, "UPDATE jobtrail_tasks SET seq = 2 WHERE id = ?", (int(task.id),))
    assert [t.reason for t in app.transitions(task.id)] == ["enqueued", "manual_fix"]
    assert _one(app, "SELECT COUNT(*) FROM jobtrail_transition_log WHERE task_id = ?",
                (int(task.id),)) == 1  # fmt: skip


def _enqueued_since(app: jobtrail.App, since: datetime) -> tuple[int, bool]:
    """The enqueued entries stats counts since ``since``, and whether its window bound found
    any transition there."""
    d = app._driver
    with d.transaction() as tx:
        rows = d.stats_reasons(tx, since=d.encode_time(since))
        window = d.stats_window_start(tx, since=d.encode_time(since), skip=0)
    return sum(int(r["n"]) for r in rows if r["reason"] == "enqueued"), window is not None


def test_a_time_window_counts_the_enqueued_entries_exactly(app: jobtrail.App) -> None:
    _kind(app)
    early = app.enqueue_many([{"kind": "k"}] * 3)
    since = db_now(app)
    late = app.enqueue_many([{"kind": "k"}] * 2)
    assert app.get(late[0].id).created_at >= since
    assert _enqueued_since(app, since) == (2, True)
    if app._driver.dialect == "postgres":
        # the readers start from the last id mark at or before the window: a mark that says
        # the early tasks' ids were handed out before `since` keeps them off the scan ...
        raw(
            app,
            "INSERT INTO jobtrail_id_marks (at, last_id) VALUES (?, ?)",
            (since, int(early[-1].id)),
        )
        assert _enqueued_since(app, since) == (2, True)
        # ... and it is what they go by: a mark past the late tasks' ids hides them
        raw(
            app,
            "UPDATE jobtrail_id_marks SET last_id = ? WHERE at = ?",
            (int(late[-1].id), since),
        )
        assert _enqueued_since(app, since) == (0, False)
        # the sweep's mark: the highest id handed out so far, no sooner than a minute apart
        raw(app, "DELETE FROM jobtrail_id_marks")
        d = app._driver
        with d.transaction() as tx:
            d.id_mark(tx)
            d.id_mark(tx)
        assert _one(app, "SELECT COUNT(*) FROM jobtrail_id_marks") == 1
        assert _one(app, "SELECT last_id FROM jobtrail_id_marks") == int(late[-1].id)
