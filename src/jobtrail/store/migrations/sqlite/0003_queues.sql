-- Operations: paused queues and concurrency limits, with an audit history.

CREATE TABLE jobtrail_queues (
    name             TEXT PRIMARY KEY,
    paused           INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    paused_by        TEXT,
    paused_note      TEXT,
    paused_at        REAL,
    limit_total      INTEGER CHECK (limit_total IS NULL OR limit_total >= 0),
    limit_per_tenant INTEGER CHECK (limit_per_tenant IS NULL OR limit_per_tenant >= 0),
    updated_at       REAL NOT NULL,
    CHECK ((paused = 1) = (paused_at IS NOT NULL))
);

CREATE TABLE jobtrail_queue_history (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    queue  TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('pause', 'resume', 'limit')),
    actor  TEXT NOT NULL,
    note   TEXT NOT NULL,
    data   TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
    at     REAL NOT NULL
);
CREATE INDEX jobtrail_queue_history_queue ON jobtrail_queue_history (queue, id);

-- Who holds what right now, for limits: leased tasks by queue and tenant.
CREATE INDEX jobtrail_tasks_held ON jobtrail_tasks (queue, tenant)
    WHERE state IN ('leased', 'cancel_requested');
-- Stats windows: recent transitions by time.
CREATE INDEX jobtrail_transitions_at ON jobtrail_transitions (at);
-- Finished tasks by finish time: stats windows and pruning.
CREATE INDEX jobtrail_tasks_finished ON jobtrail_tasks (finished_at)
    WHERE state IN ('succeeded', 'cancelled');
