-- Tracing and retention.
--
-- The trace context of a task (W3C traceparent/tracestate) needs no column: it is stored in the
-- data of the task's creating transition (key "trace"), written by the insert itself.
--
-- Retention needs no new index: the sweeper selects the oldest finished tasks of one state
-- through jobtrail_tasks_finished (finished_at, succeeded and cancelled; 0003) and
-- jobtrail_tasks_dead (finished_at, id; 0001), so a bounded batch reads only what it deletes.

-- What retention and `jobtrail prune` deleted, per state: counters kept in the store, so the
-- stats and /metrics (jobtrail_pruned_tasks_total{state}) survive restarts and add up over
-- every worker. One row per state, updated in the transaction of each batch.
CREATE TABLE jobtrail_pruned (
    state       TEXT        PRIMARY KEY CHECK (state IN ('succeeded', 'cancelled', 'dead')),
    tasks       BIGINT      NOT NULL DEFAULT 0 CHECK (tasks >= 0),
    transitions BIGINT      NOT NULL DEFAULT 0 CHECK (transitions >= 0),
    last_at     TIMESTAMPTZ NOT NULL
);
