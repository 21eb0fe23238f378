-- Serial per key and per-kind rates: see PostgreSQL's 0024.
ALTER TABLE jobtrail_tasks ADD COLUMN ckey TEXT;
ALTER TABLE jobtrail_tasks ADD COLUMN concurrency_limit INTEGER
    CHECK (concurrency_limit IS NULL OR concurrency_limit >= 1);
ALTER TABLE jobtrail_queues ADD COLUMN keyed INTEGER NOT NULL DEFAULT 0 CHECK (keyed IN (0, 1));
ALTER TABLE jobtrail_queues ADD COLUMN kind_rated INTEGER NOT NULL DEFAULT 0
    CHECK (kind_rated IN (0, 1));

DROP INDEX jobtrail_tasks_due_tenant;
CREATE INDEX jobtrail_tasks_due_tenant ON jobtrail_tasks (queue, tenant, priority DESC, run_at, id)
    WHERE state = 'queued' AND ckey IS NULL;

CREATE INDEX jobtrail_tasks_keyed_due ON jobtrail_tasks (queue, tenant, ckey, run_at, id)
    WHERE state = 'queued' AND ckey IS NOT NULL;
-- the keyed tasks in the claim's order (task_claim_keyed_due)
CREATE INDEX jobtrail_tasks_keyed_order ON jobtrail_tasks (queue, priority DESC, run_at, id)
    WHERE state = 'queued' AND ckey IS NOT NULL;
CREATE INDEX jobtrail_tasks_keyed_held ON jobtrail_tasks (queue, tenant, ckey)
    WHERE state IN ('leased', 'cancel_requested') AND ckey IS NOT NULL;

CREATE TABLE jobtrail_kind_rates (
    queue      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    per_second REAL NOT NULL CHECK (per_second > 0),
    burst      INTEGER CHECK (burst IS NULL OR burst >= 0),
    tokens     REAL,
    tokens_at  REAL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (queue, kind)
);
