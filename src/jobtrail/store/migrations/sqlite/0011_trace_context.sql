-- Tracing and retention.
--
-- The trace context of a task (W3C traceparent/tracestate) needs no column: it is stored in the
-- data of the task's creating transition (key "trace"), written by the insert itself.
--
-- Retention needs no new index: the sweeper selects the oldest finished tasks of one state
-- through jobtrail_tasks_finished (finished_at, succeeded and cancelled; 0003) and
-- jobtrail_tasks_dead (finished_at, id; 0001), so a bounded batch reads only what it deletes.

-- What retention and `jobtrail prune` deleted, per state (jobtrail_pruned_tasks_total{state}):
-- kept in the store so the counts survive restarts and add up over every worker.
CREATE TABLE jobtrail_pruned (
    state       TEXT    PRIMARY KEY CHECK (state IN ('succeeded', 'cancelled', 'dead')),
    tasks       INTEGER NOT NULL DEFAULT 0 CHECK (tasks >= 0),
    transitions INTEGER NOT NULL DEFAULT 0 CHECK (transitions >= 0),
    last_at     REAL    NOT NULL
);
