"""The reads of a large store keep their indexes (issue 21, growth; migration 0013).

Loads 20,000 cancelled tasks and then 50,000 queued ones (the newest ids all queued, as in a
backlog), ANALYZEs, and asks the planner: a page of one state must read
``jobtrail_tasks_settled_kind`` kind by kind (never walk the primary key past the queued tasks,
in custom and generic plans), and the bounded queue health must read ``jobtrail_tasks_queued_kind``.
"""

from __future__ import annotations

from typing import Any

from _integration_helpers import analyze
from test_claim_plan import _generic_plan

import jobtrail

# cancelled before they started (two transitions) or queued (one), as the invariants want
PG_LOAD = """
WITH ins AS (
    INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
        attempts, max_attempts, lease_seconds, reentrant, run_at, last_reason, seq,
        budget_started_at, created_at, updated_at, finished_at)
    SELECT CASE WHEN g %% 3 = 0 THEN 'other' ELSE 'noop' END, 'default', '', %(state)s,
           '{}'::jsonb, 'h', 0, 0, 1, 30, true, now(),
           CASE WHEN %(state)s = 'queued' THEN 'enqueued' ELSE 'cancelled_before_start' END,
           CASE WHEN %(state)s = 'queued' THEN 1 ELSE 2 END, now(), now(), now(),
           CASE WHEN %(state)s = 'cancelled' THEN now() END
    FROM generate_series(1, %(n)s) AS g
    RETURNING id, seq, created_at
)
INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor, attempt, at)
SELECT id, s, CASE WHEN s = 1 THEN NULL ELSE 'queued' END,
       CASE WHEN s = 1 THEN 'queued' ELSE 'cancelled' END,
       CASE WHEN s = 1 THEN 'enqueued' ELSE 'cancelled_before_start' END, 'caller', 0, created_at
FROM ins, generate_series(1, ins.seq) AS s
"""

SQLITE_LOAD = """
WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < :n)
INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
    attempts, max_attempts, lease_seconds, reentrant, run_at, last_reason, seq,
    budget_started_at, created_at, updated_at, finished_at)
SELECT CASE WHEN i % 3 = 0 THEN 'other' ELSE 'noop' END, 'default', '', :state, '{}', 'h', 0,
       0, 1, 30, 1, 1000.0,
       CASE WHEN :state = 'queued' THEN 'enqueued' ELSE 'cancelled_before_start' END,
       CASE WHEN :state = 'queued' THEN 1 ELSE 2 END, 1000.0, 1000.0, 1000.0,
       CASE WHEN :state = 'cancelled' THEN 1000.0 END
FROM g
"""

SQLITE_LOG = """
INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor, attempt, at)
SELECT id, 1, NULL, 'queued', 'enqueued', 'caller', 0, created_at FROM jobtrail_tasks
UNION ALL
SELECT id, 2, 'queued', 'cancelled', 'cancelled_before_start', 'caller', 0, created_at
FROM jobtrail_tasks WHERE seq = 2
"""

PAGE = {"state": "cancelled", "kind": "noop", "queue": None, "tenant": None, "before_id": None}


def test_a_page_of_one_state_and_the_bounded_health_read_their_indexes(store: Any) -> None:
    app: jobtrail.App = store.app()
    driver = app._driver
    with driver.transaction() as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        for state, n in (("cancelled", 20_000), ("queued", 50_000)):
            conn.execute(
                PG_LOAD if store.backend == "postgres" else SQLITE_LOAD, {"state": state, "n": n}
            )
        if store.backend == "sqlite":
            conn.execute(SQLITE_LOG)
    page = driver.sql["view_task_list_state_kind"]
    health = driver.sql["stats_open_bounded"]
    with driver.transaction() as tx:
        conn = tx.conn  # type: ignore[attr-defined]
        analyze(conn, store.postgres)
        if store.backend == "postgres":
            for params in (PAGE, {**PAGE, "queue": "default"}, {**PAGE, "before_id": 10_000}):
                args = {**params, "limit": 51}
                plans = ["\n".join(r[0] for r in conn.execute("EXPLAIN " + page, args))]
                conn.execute("SET plan_cache_mode = force_generic_plan")
                plans.append(_generic_plan(conn, page, args))
                conn.execute("RESET plan_cache_mode")
                for plan in plans:
                    assert "jobtrail_tasks_settled_kind" in plan, (params, plan)
                    assert "jobtrail_tasks_pkey" not in plan, (params, plan)
            rows = conn.execute("EXPLAIN " + health, {"upto": 10_001}).fetchall()
            plan = "\n".join(r[0] for r in rows)
            assert "jobtrail_tasks_queued_kind" in plan, plan
            assert "Seq Scan on jobtrail_tasks" not in plan, plan
        else:
            rows = conn.execute("EXPLAIN QUERY PLAN " + page, {**PAGE, "limit": 51}).fetchall()
            plan = "\n".join(str(r[3]) for r in rows)
            assert "jobtrail_tasks_settled_kind" in plan, plan
            rows = conn.execute("EXPLAIN QUERY PLAN " + health, {"upto": 10_001}).fetchall()
            plan = "\n".join(str(r[3]) for r in rows)
            assert "jobtrail_tasks_queued_kind" in plan, plan
    kinds = driver.sql["view_state_kinds"]
    with driver.transaction() as tx:
        conn = tx.conn  # type: ignore[attr-defined]
        if store.backend == "postgres":
            rows = conn.execute("EXPLAIN " + kinds, {"state": "cancelled"}).fetchall()
            plan = "\n".join(r[0] for r in rows)
            assert "Seq Scan on jobtrail_tasks" not in plan, plan
        else:
            rows = conn.execute("EXPLAIN QUERY PLAN " + kinds, {"state": "cancelled"}).fetchall()
            plan = "\n".join(str(r[3]) for r in rows)
            assert "SCAN jobtrail_tasks\n" not in plan + "\n", plan
        found = [r["kind"] for r in tx.all("view_state_kinds", {"state": "cancelled"})]
        assert found == ["noop", "other"]
    # and the answers: the newest cancelled tasks, the queued counted up to the bound
    newest = app.list(state="cancelled", limit=3)
    assert [t.state for t in newest] == ["cancelled"] * 3
    assert int(newest[0].id) == 20_000
    report = {(q["queue"], q["kind"]): q for q in app.stats()["queues"]}
    assert report[("default", "noop")]["at_least"] == ["queued", "backlog", "drain_time"]
    assert report[("default", "noop")]["counts"]["queued"] == 10_000
