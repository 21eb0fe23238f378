"""SQLite keeps a task's enqueued transition on its row (migration 0027): the log readers see it
as the log's first entry, exactly as the log row it replaces, and it is as fixed as a log row.
A store made before 0027 keeps its old tasks' enqueued rows in the log table, each read once."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import jobtrail
from jobtrail.store import queries


def _app(path: Path) -> jobtrail.App:
    app = jobtrail.App(f"sqlite:///{path}")
    app.task("k")(lambda ctx, payload: None)
    return app


def _rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def test_an_enqueue_writes_no_log_row_and_reads_as_the_first_entry(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    app = _app(path)
    app.migrate()
    one = app.enqueue("k", {"a": 1})
    many = app.enqueue_many([{"kind": "k", "payload": {"i": i}} for i in range(3)])
    keyed = app.enqueue("k", {"b": 2}, debounce=30, debounce_key="x")
    app.run_worker(burst=True)
    for task in [one, *many, keyed]:
        log = app.transitions(task.id)
        first = log[0]
        assert (first.seq, first.from_state, first.to_state, first.reason, first.attempt) == (
            1,
            None,
            "queued",
            "enqueued",
            0,
        )
        assert first.at == app.get(task.id).created_at
        assert [t.seq for t in log] == list(range(1, len(log) + 1))
        assert log[-1].to_state == app.get(task.id).state
        assert log[-1].to_state == ("queued" if task.id == keyed.id else "succeeded")
        # the log table holds the rest of the log only
        in_table = _rows(
            path, "SELECT seq FROM jobtrail_transition_log WHERE task_id = ?", (int(task.id),)
        )
        assert sorted(s for (s,) in in_table) == list(range(2, len(log) + 1))
    assert app.check() == []
    app.close()


def test_the_entry_on_the_row_cannot_change(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    app = _app(path)
    app.migrate()
    task = app.enqueue("k")
    before = app.transitions(task.id)
    conn = sqlite3.connect(path)
    try:
        for sql in (
            "UPDATE jobtrail_tasks SET enq_actor = 'mallory' WHERE id = ?",
            "UPDATE jobtrail_tasks SET enq_state = 'dead' WHERE id = ?",
            "UPDATE jobtrail_tasks SET enq_data = '{\"x\": 1}' WHERE id = ?",
            "UPDATE jobtrail_tasks SET created_at = created_at - 60 WHERE id = ?",
            "UPDATE jobtrail_transitions SET actor = 'mallory' WHERE task_id = ? AND seq = 1",
            "DELETE FROM jobtrail_transitions WHERE task_id = ?",
        ):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                conn.execute(sql, (int(task.id),))
        # an update that leaves those columns alone is no concern of the trigger
        conn.execute("UPDATE jobtrail_tasks SET priority = priority WHERE id = ?", (int(task.id),))
        conn.commit()
    finally:
        conn.close()
    assert app.transitions(task.id) == before
    app.close()


def test_a_row_written_to_the_view_is_appended_to_the_log_table(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    app = _app(path)
    app.migrate()
    task = app.enqueue("k")
    conn = sqlite3.connect(path)
    try:
        conn.execute(
            "INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor,"
            " attempt, at) SELECT id, 2, 'queued', 'queued', 'manual_fix', 'ops', 0, created_at"
            " FROM jobtrail_tasks WHERE id = ?",
            (int(task.id),),
        )
        conn.commit()
    finally:
        conn.close()
    assert [t.reason for t in app.transitions(task.id)] == ["enqueued", "manual_fix"]
    assert _rows(path, "SELECT seq FROM jobtrail_transition_log") == [(2,)]
    app.close()


def test_a_store_from_before_0027_reads_each_old_entry_once(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE jobtrail_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at REAL NOT NULL)"
    )
    from jobtrail.store.sqlite.driver import _statements

    for version, name, text in queries.migrations("sqlite"):
        if version >= 27:
            break
        for statement in _statements(text):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO jobtrail_migrations VALUES (?, ?, 0)",
            (version, name),
        )
    conn.commit()
    conn.close()
    old_app = _app(path)
    # written as a store before 0027 wrote it: the task row, its enqueued row in the log
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,"
        " max_attempts, lease_seconds, reentrant, run_at, last_reason, seq, budget_started_at,"
        " created_at, updated_at) VALUES ('k', 'default', '', 'queued', '{}', 'h', 0, 3, 30, 1,"
        " 100, 'enqueued', 1, 100, 100, 100)"
    )
    conn.execute(
        "INSERT INTO jobtrail_transitions (task_id, seq, to_state, reason, actor, attempt, at,"
        " data) VALUES (1, 1, 'queued', 'enqueued', 'caller', 0, 100, '{}')"
    )
    conn.commit()
    conn.close()
    assert old_app.migrate() == [v for v, _, _ in queries.migrations("sqlite") if v >= 27]
    new = old_app.enqueue("k")
    assert [t.reason for t in old_app.transitions(1)] == ["enqueued"]
    assert [t.reason for t in old_app.transitions(new.id)] == ["enqueued"]
    old_app.run_worker(burst=True)
    for task_id in (1, int(new.id)):
        log = old_app.transitions(task_id)
        assert [t.seq for t in log] == [1, 2, 3]
        assert [t.reason for t in log] == ["enqueued", "claimed", "completed"]
    assert old_app.check() == []
    assert old_app.prune(0) == {"tasks": 2, "transitions": 6}
    assert _rows(path, "SELECT COUNT(*) FROM jobtrail_transitions") == [(0,)]
    old_app.close()
