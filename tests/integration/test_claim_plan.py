"""The claim query stays an index read at scale (issue 8): a plan regression fails CI.

Loads ~50,000 queued tasks (with their ``enqueued`` transitions, so the store stays consistent)
in one statement, ANALYZEs, and asks the planner how it would claim: PostgreSQL must not scan
``jobtrail_tasks`` sequentially, and both must read the due index ``jobtrail_tasks_due_tenant``
(the only one since migration 12 on SQLite and migration 16 on PostgreSQL).
"""

from __future__ import annotations

import json
from typing import Any

from _integration_helpers import analyze
from conftest import Store

import jobtrail
from jobtrail.store.postgres.direct import positional

ROWS = 50_000

PG_LOAD = """
WITH ins AS (
    INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
        max_attempts, lease_seconds, reentrant, run_at, last_reason, seq, budget_started_at,
        created_at, updated_at)
    SELECT CASE WHEN g %% 3 = 0 THEN 'other' ELSE 'noop' END,
           CASE WHEN g %% 5 = 0 THEN 'slow' ELSE 'default' END,
           '', 'queued', '{}'::jsonb, 'h', g %% 3, 1, 30, true,
           now() - make_interval(secs => g %% 100), 'enqueued', 1, now(), now(), now()
    FROM generate_series(1, %(n)s) AS g
    RETURNING id, created_at
)
INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor, attempt,
                                  at)
SELECT id, 1, NULL, 'queued', 'enqueued', 'caller', 0, created_at FROM ins
"""

SQLITE_LOAD = """
WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < :n)
INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
    max_attempts, lease_seconds, reentrant, run_at, last_reason, seq, budget_started_at,
    created_at, updated_at)
SELECT CASE WHEN i % 3 = 0 THEN 'other' ELSE 'noop' END,
       CASE WHEN i % 5 = 0 THEN 'slow' ELSE 'default' END,
       '', 'queued', '{}', 'h', i % 3, 1, 30, 1, 1000.0 + i % 100, 'enqueued', 1, 0, 0, 0
FROM g
"""

SQLITE_LOG = """
INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor, attempt, at)
SELECT id, 1, NULL, 'queued', 'enqueued', 'caller', 0, created_at FROM jobtrail_tasks
"""


def claim_params(dialect: str) -> dict[str, Any]:
    kinds: Any = ["noop"] if dialect == "postgres" else json.dumps(["noop"])
    return {
        "owner": "plan",
        "actor": "plan",
        "kinds": kinds,
        "data": "{}",
        "version": None,
        "queue": "default",
        "mode": "unlimited",
        "limit": 10,
    }


def test_claim_reads_the_due_index(store: Any) -> None:
    app: jobtrail.App = store.app()
    driver = app._driver
    sql = driver.sql["task_claim"]
    with driver.transaction() as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        if store.backend == "postgres":
            conn.execute(PG_LOAD, {"n": ROWS})
        else:
            conn.execute(SQLITE_LOAD, {"n": ROWS})
            conn.execute(SQLITE_LOG)
    with driver.transaction() as tx:
        conn = tx.conn  # type: ignore[attr-defined]
        analyze(conn, store.postgres)
        if store.backend == "postgres":
            # the worker's round trip too: its completions must stay on the primary key
            done = {
                "ids": "{1,2,3,4,5,6,7,8,9,10}",
                "attempts": "{1,1,1,1,1,1,1,1,1,1}",
                "results": "[]",
            }
            for name in (
                "task_claim",
                "task_claim_unlimited",
                "task_claim_unlimited_fair",
                "task_complete_and_claim",
                "task_complete_and_claim_fair",
            ):
                query = driver.sql[name]
                params = {**claim_params("postgres"), **done}
                rows = conn.execute("EXPLAIN " + query, params).fetchall()
                plan = "\n".join(r[0] for r in rows)
                assert "Seq Scan on jobtrail_tasks" not in plan, (name, plan)
                assert "jobtrail_tasks_due_tenant" in plan, (name, plan)
                # the fair claim's estimates stay small: a plan costed above jit_above_cost
                # is JIT-compiled on every run (~100 ms a claim)
                cost = float(plan.split("cost=", 1)[1].split("..", 1)[1].split(" ", 1)[0])
                assert cost < 100_000, (name, plan)
            # the one other reader of a queue's due tasks has the same index to count them
            # from (jobtrail_tasks_due, read by nothing else, is gone since migration 16);
            # here four tasks in five are due, for which a sequential read is cheaper
            conn.execute("SET LOCAL enable_seqscan = off")
            rows = conn.execute(
                "EXPLAIN " + driver.sql["queue_due_count"], {"queue": "default"}
            ).fetchall()
            plan = "\n".join(r[0] for r in rows)
            assert "jobtrail_tasks_due_tenant" in plan, plan
            conn.execute("SET LOCAL enable_seqscan = on")
            # completions find their rows by id, never through the lease or state indexes
            # (whose statistics rarely see leased rows: they would read every leased task)
            for name in (
                "task_complete_many",
                "task_complete_and_claim",
                "task_complete_and_claim_fair",
            ):
                params = {**claim_params("postgres"), **done, "actor": "plan"}
                rows = conn.execute("EXPLAIN " + driver.sql[name], params).fetchall()
                plan = "\n".join(r[0] for r in rows)
                assert "jobtrail_tasks_pkey" in plan, (name, plan)
                assert "jobtrail_tasks_lease" not in plan, (name, plan)
                assert "jobtrail_tasks_settled_kind" not in plan, (name, plan)
            # the pump and express connections run these with generic plans (re-planning
            # each time costs a third of a round trip at scale): those must read the same
            # indexes, whatever the parameters
            done_args = {**claim_params("postgres"), **done}
            conn.execute("SET plan_cache_mode = force_generic_plan")
            for name in (
                "task_claim_unlimited",
                "task_claim_unlimited_fair",
                "task_complete_and_claim",
                "task_complete_and_claim_fair",
            ):
                plan = _generic_plan(conn, driver.sql[name], done_args)
                assert "Seq Scan on jobtrail_tasks" not in plan, (name, plan)
                assert "jobtrail_tasks_due_tenant" in plan, (name, plan)
                if name.startswith("task_complete_and_claim"):
                    assert "jobtrail_tasks_pkey" in plan, (name, plan)
                    assert "jobtrail_tasks_lease" not in plan, (name, plan)
            conn.execute("RESET plan_cache_mode")
        else:
            rows = conn.execute("EXPLAIN QUERY PLAN " + sql, claim_params("sqlite")).fetchall()
            plan = "\n".join(str(r[3]) for r in rows)
            assert "jobtrail_tasks_due_tenant" in plan, plan
            assert "SCAN jobtrail_tasks\n" not in plan + "\n", plan


def _generic_plan(conn: Any, sql: str, params: dict[str, Any]) -> str:
    """The plan PostgreSQL keeps for ``sql`` as a prepared statement under
    ``plan_cache_mode = force_generic_plan`` (planned without the parameters' values)."""
    numbered, names = positional(sql)
    conn.execute(f"PREPARE jobtrail_plan AS {numbered}")
    try:
        args = ", ".join(_literal(params[n]) for n in names)
        rows = conn.execute(f"EXPLAIN EXECUTE jobtrail_plan({args})").fetchall()
        return "\n".join(r[0] for r in rows)
    finally:
        conn.execute("DEALLOCATE jobtrail_plan")


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, list):  # an array literal
        value = "{" + ",".join(f'"{v}"' for v in value) + "}"
    return "'" + str(value).replace("'", "''") + "'"


def test_retention_batches_read_their_partial_index_whatever_the_plan(store: Any) -> None:
    """A prune pass runs at every sweep interval in every worker: its select must read the
    finished_at index of its state (a batch, oldest first) even in a plan made without the
    state's value (generic, or SQLite's prepared statement), not every task of that state.
    The store is filled and rolled back (the tasks have no transitions of their states)."""
    app: jobtrail.App = store.app()
    driver = app._driver
    finish = """UPDATE jobtrail_tasks SET finished_at = created_at, state = CASE id % 3
                WHEN 0 THEN 'dead' WHEN 1 THEN 'succeeded' ELSE 'cancelled' END"""
    try:
        with driver.transaction() as tx:
            conn: Any = tx.conn  # type: ignore[attr-defined]
            pg = store.backend == "postgres"
            conn.execute(PG_LOAD if pg else SQLITE_LOAD, {"n": 20_000})
            conn.execute(finish)
            analyze(conn, store.postgres)
            for state, index in (
                ("succeeded", "jobtrail_tasks_finished"),
                ("cancelled", "jobtrail_tasks_finished"),
                ("dead", "jobtrail_tasks_dead"),
            ):
                name = "retention_select_dead" if state == "dead" else "retention_select"
                params = {"state": state, "older_than": 60.0, "limit": 100}
                if pg:
                    conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
                    plan = _generic_plan(conn, driver.sql[name], params)
                else:
                    rows = conn.execute("EXPLAIN QUERY PLAN " + driver.sql[name], params)
                    plan = "\n".join(str(r[3]) for r in rows.fetchall())
                assert index in plan, (state, plan)
            raise _RollBack
    except _RollBack:
        pass


class _RollBack(Exception):
    """Leaves the test's transaction without committing it."""


def test_a_new_store_without_statistics_claims_through_the_due_indexes(pg: Store) -> None:
    """Before the first ANALYZE (a new store filling up) the planner knows no row counts: the
    worker's claim must still read the due indexes in order, never another index of queued
    tasks followed by a sort of the whole queue (that cost 58 ms a claim at 65,000 queued)."""
    app: jobtrail.App = pg.app()
    driver = app._driver
    try:
        with driver.transaction() as tx:
            conn: Any = tx.conn  # type: ignore[attr-defined]
            conn.execute(PG_LOAD, {"n": ROWS})  # uncommitted: no autovacuum can analyze it
            done = {"ids": "{}", "attempts": "{}", "results": "[]"}
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            for name in ("task_claim_unlimited", "task_complete_and_claim"):
                plan = _generic_plan(conn, driver.sql[name], {**claim_params("postgres"), **done})
                assert "jobtrail_tasks_queued_kind" not in plan, (name, plan)
                assert "jobtrail_tasks_due_tenant" in plan, (name, plan)
            raise _RollBack
    except _RollBack:
        pass


def test_the_worker_connections_keep_index_plans_made_on_an_empty_store(pg: Store) -> None:
    """The pump's and the express connection's statements are prepared with generic plans at
    their first use, which on a new store is an empty table, and PostgreSQL keeps such a plan
    until an ANALYZE invalidates it. A plan chosen for an empty table reads it sequentially;
    kept while the table fills, every claim and completion read the whole table (steady
    arrival at 750 jobs/s: 2,000 pages a claim at 36,000 tasks, the worker fell behind after
    35 s). Planned empty, the plans must still read by index once the table is full."""
    from jobtrail.store.postgres.connection import _Holder

    app: jobtrail.App = pg.app()
    driver = app._driver
    holder = _Holder()
    conn: Any = driver._own_open(holder)  # a connection configured as the pump's
    driver._own_close(holder, conn, None)
    names = (
        "task_claim_unlimited",
        "task_claim_unlimited_fair",
        "task_complete_and_claim",
        "task_complete_and_claim_fair",
        "task_complete_many",
    )
    done = {"ids": "{1,2,3,4,5,6,7,8,9,10}", "attempts": "{1,1,1,1,1,1,1,1,1,1}"}
    params = {**claim_params("postgres"), **done, "results": "[]"}
    args: dict[str, str] = {}
    try:
        for i, name in enumerate(names):
            numbered, order = positional(driver.sql[name])
            conn.execute(f"PREPARE jobtrail_plan{i} AS {numbered}")
            args[name] = ", ".join(_literal(params[n]) for n in order)
            conn.execute(f"EXPLAIN EXECUTE jobtrail_plan{i}({args[name]})")  # planned: empty
        with driver.transaction() as tx:
            tx.conn.execute(PG_LOAD, {"n": ROWS})  # type: ignore[attr-defined]
        for i, name in enumerate(names):
            rows = conn.execute(f"EXPLAIN EXECUTE jobtrail_plan{i}({args[name]})").fetchall()
            plan = "\n".join(r[0] for r in rows)
            assert "Seq Scan on jobtrail_tasks" not in plan, (name, plan)
            if "complete" in name:  # the completed rows by id, not every leased one
                assert "jobtrail_tasks_pkey" in plan, (name, plan)
                assert "jobtrail_tasks_lease" not in plan, (name, plan)
            if "claim" in name:
                assert "jobtrail_tasks_due_tenant" in plan, (name, plan)
    finally:
        driver._drop_own(holder, conn)
