-- Operations: paused queues and concurrency limits, with an audit history.

CREATE TABLE jobtrail_queues (
    name             TEXT PRIMARY KEY,
    paused           BOOLEAN NOT NULL DEFAULT false,
    paused_by        TEXT,
    paused_note      TEXT,
    paused_at        TIMESTAMPTZ,
    limit_total      INTEGER CHECK (limit_total IS NULL OR limit_total >= 0),
    limit_per_tenant INTEGER CHECK (limit_per_tenant IS NULL OR limit_per_tenant >= 0),
    updated_at       TIMESTAMPTZ NOT NULL,
    CHECK (paused = (paused_at IS NOT NULL))
);

CREATE TABLE jobtrail_queue_history (
    id     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue  TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('pause', 'resume', 'limit')),
    actor  TEXT NOT NULL,
    note   TEXT NOT NULL,
    data   JSONB NOT NULL DEFAULT '{}',
    at     TIMESTAMPTZ NOT NULL
);
CREATE INDEX jobtrail_queue_history_queue ON jobtrail_queue_history (queue, id);

CREATE INDEX jobtrail_tasks_held ON jobtrail_tasks (queue, tenant)
    WHERE state IN ('leased', 'cancel_requested');
CREATE INDEX jobtrail_transitions_at ON jobtrail_transitions (at);
CREATE INDEX jobtrail_tasks_finished ON jobtrail_tasks (finished_at)
    WHERE state IN ('succeeded', 'cancelled');
