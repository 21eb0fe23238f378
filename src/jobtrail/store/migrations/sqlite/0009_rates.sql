-- Flow control: a token bucket per queue and per (queue, tenant), a ramp that grows the
-- allowed rate from a tenth to the full rate, and the index the fair (tenant round-robin)
-- claim walks. Every time here is the database clock's (epoch seconds).

ALTER TABLE jobtrail_queues ADD COLUMN rate_per_second REAL
    CHECK (rate_per_second IS NULL OR rate_per_second > 0);
ALTER TABLE jobtrail_queues ADD COLUMN rate_burst INTEGER
    CHECK (rate_burst IS NULL OR rate_burst >= 0);
ALTER TABLE jobtrail_queues ADD COLUMN rate_per_tenant REAL
    CHECK (rate_per_tenant IS NULL OR rate_per_tenant > 0);
-- the ramp: from ramp_started_at the allowed rate grows over ramp_seconds
ALTER TABLE jobtrail_queues ADD COLUMN ramp_seconds REAL
    CHECK (ramp_seconds IS NULL OR ramp_seconds > 0);
ALTER TABLE jobtrail_queues ADD COLUMN ramp_started_at REAL;
-- a resume ramp without a rate sets a rate that ends with the ramp
ALTER TABLE jobtrail_queues ADD COLUMN rate_until REAL;
-- the queue's bucket: tokens left at tokens_at
ALTER TABLE jobtrail_queues ADD COLUMN tokens REAL;
ALTER TABLE jobtrail_queues ADD COLUMN tokens_at REAL;

CREATE TABLE jobtrail_tenant_rates (
    queue     TEXT NOT NULL,
    tenant    TEXT NOT NULL,
    tokens    REAL NOT NULL,
    tokens_at REAL NOT NULL,
    PRIMARY KEY (queue, tenant)
);

-- The history's action check gains 'rate' (SQLite cannot alter a check: the table is rebuilt).
CREATE TABLE jobtrail_queue_history_new (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    queue  TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('pause', 'resume', 'limit', 'rate')),
    actor  TEXT NOT NULL,
    note   TEXT NOT NULL,
    data   TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
    at     REAL NOT NULL
);
INSERT INTO jobtrail_queue_history_new (id, queue, action, actor, note, data, at)
    SELECT id, queue, action, actor, note, data, at FROM jobtrail_queue_history;
DROP TABLE jobtrail_queue_history;
ALTER TABLE jobtrail_queue_history_new RENAME TO jobtrail_queue_history;
CREATE INDEX jobtrail_queue_history_queue ON jobtrail_queue_history (queue, id);

-- Fair claims: the tenants with queued tasks of a queue (a skip scan), then each tenant's due
-- tasks in priority and due order.
CREATE INDEX jobtrail_tasks_due_tenant
    ON jobtrail_tasks (queue, tenant, priority DESC, run_at, id) WHERE state = 'queued';
