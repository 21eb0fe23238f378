"""Both stores keep each task's dead-letter evidence on its row (migration 17): the code
version of its last claim and the time of its first failure, so ``app.dead()`` and ``/dead``
read the dead tasks' rows and not their transitions. A task created before the migration
(``evidence_on_row`` false) has its transitions read as before."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from conftest import Store

import jobtrail
from jobtrail.store.postgres import PostgresDriver


def _sql(app: jobtrail.App, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Raw SQL on the App's store (``%s`` placeholders on both)."""
    driver = app._driver
    if not isinstance(driver, PostgresDriver):
        sql = sql.replace("%s", "?")
    with driver.transaction() as tx:
        cur = tx.conn.execute(sql, args)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []


def _dead_task(store: Store) -> tuple[jobtrail.App, str]:
    app = store.app(version="v9")

    @app.task("send", max_attempts=2, backoff_base=0.01, backoff_cap=0.01)
    def send(ctx: Any, payload: Any) -> None:
        raise jobtrail.TransientError("upstream down", category="unavailable")

    task = app.enqueue("send", {})
    deadline = time.monotonic() + 10
    while app.get(task.id).state != "dead":  # the retry is due 10 ms after the first failure
        assert time.monotonic() < deadline, "the task did not die"
        app.run_worker(burst=True, poll_interval=0.05, sweep_interval=0.05)
    return app, task.id


def _settled(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The groups without their age (which grows between two reads)."""
    return [{k: v for k, v in g.items() if k != "oldest_age"} for g in groups]


def test_the_row_keeps_the_last_claims_version_and_the_first_failure(store: Store) -> None:
    app, task_id = _dead_task(store)
    timeline = app.transitions(task_id)
    failures = [t.at for t in timeline if t.error_category is not None]
    assert len(failures) == 2  # the retry, then the death
    [(version, first, on_row)] = _sql(
        app,
        "SELECT claimed_version, first_failure_at, evidence_on_row FROM jobtrail_tasks"
        " WHERE id = %s",
        int(task_id),
    )
    if not store.postgres:  # epoch seconds, 0/1
        first = datetime.fromtimestamp(first, UTC)
        on_row = bool(on_row)
    assert (version, first, on_row) == ("v9", failures[0], True)
    assert app.check() == []


def test_dead_reads_the_row_and_an_older_task_its_transitions(store: Store) -> None:
    app, task_id = _dead_task(store)
    before = app.dead(tasks=5)
    [group] = before
    assert group["versions"] == ["v9"]
    # what the row says is what the view shows: it reads the row, not the log
    _sql(app, "UPDATE jobtrail_tasks SET claimed_version = 'v-row' WHERE id = %s", int(task_id))
    [changed] = app.dead(tasks=5)
    assert changed["versions"] == ["v-row"] and changed["tasks"][0]["version"] == "v-row"
    # the checker sees a row that disagrees with its log
    assert [(v["rule"], v["task_id"]) for v in app.check()] == [
        ("row_evidence_is_the_log", task_id)
    ]
    # a task from before migration 17: nothing on its row, the evidence from its transitions
    _sql(
        app,
        "UPDATE jobtrail_tasks SET evidence_on_row = false, claimed_version = NULL,"
        " first_failure_at = NULL WHERE id = %s",
        int(task_id),
    )
    assert _settled(app.dead(tasks=5)) == _settled(before)
    assert app.check() == []


def _log_loops(app: jobtrail.App) -> int:
    """How many times ``dead_groups`` scanned a task's transitions (EXPLAIN ANALYZE)."""
    sql = app._driver.sql["dead_groups"]
    [(plan,)] = _sql(app, "EXPLAIN (ANALYZE, FORMAT JSON) " + sql)

    def loops(node: dict[str, Any]) -> int:
        here = node["Actual Loops"] if node.get("Relation Name") == "jobtrail_transition_log" else 0
        return here + sum(loops(child) for child in node.get("Plans", []))

    return loops(plan[0]["Plan"])


def test_the_groups_scan_no_transitions_of_a_task_with_its_evidence_on_its_row(
    pg: Store,
) -> None:
    """(PostgreSQL: counted in the plan. SQLite evaluates only the CASE branch taken, and the
    test above shows that what the row says is what the view shows.)"""
    app, task_id = _dead_task(pg)
    assert _log_loops(app) == 0
    _sql(app, "UPDATE jobtrail_tasks SET evidence_on_row = false WHERE id = %s", int(task_id))
    assert _log_loops(app) == 1  # the older task's log, read as before
    app.close()


def test_our_sessions_run_without_jit(pg: Store) -> None:
    """On a grown store the dead-letter reads' estimates passed ``jit_above_cost``: each read
    compiled for about 230 ms to run for 30 (bench/growth.py). Our own sessions turn JIT off
    (``checkout.SESSION_SETTINGS``)."""
    app = pg.app()
    assert _sql(app, "SHOW jit") == [("off",)]
    app.close()
