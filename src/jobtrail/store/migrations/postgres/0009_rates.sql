-- Flow control: a token bucket per queue and per (queue, tenant), a ramp that grows the
-- allowed rate from a tenth to the full rate, and the index the fair (tenant round-robin)
-- claim walks. Every time here is the database clock's.

ALTER TABLE jobtrail_queues
    ADD COLUMN rate_per_second DOUBLE PRECISION
        CHECK (rate_per_second IS NULL OR rate_per_second > 0),
    ADD COLUMN rate_burst      INTEGER CHECK (rate_burst IS NULL OR rate_burst >= 0),
    ADD COLUMN rate_per_tenant DOUBLE PRECISION
        CHECK (rate_per_tenant IS NULL OR rate_per_tenant > 0),
    -- the ramp: from ramp_started_at the allowed rate grows over ramp_seconds
    ADD COLUMN ramp_seconds    DOUBLE PRECISION CHECK (ramp_seconds IS NULL OR ramp_seconds > 0),
    ADD COLUMN ramp_started_at TIMESTAMPTZ,
    -- a resume ramp without a rate sets a rate that ends with the ramp
    ADD COLUMN rate_until      TIMESTAMPTZ,
    -- the queue's bucket: tokens left at tokens_at
    ADD COLUMN tokens          DOUBLE PRECISION,
    ADD COLUMN tokens_at       TIMESTAMPTZ;

CREATE TABLE jobtrail_tenant_rates (
    queue     TEXT NOT NULL,
    tenant    TEXT NOT NULL,
    tokens    DOUBLE PRECISION NOT NULL,
    tokens_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (queue, tenant)
);

ALTER TABLE jobtrail_queue_history
    DROP CONSTRAINT jobtrail_queue_history_action_check,
    ADD CONSTRAINT jobtrail_queue_history_action_check
        CHECK (action IN ('pause', 'resume', 'limit', 'rate'));

-- Fair claims: the tenants with queued tasks of a queue (a skip scan), then each tenant's due
-- tasks in priority and due order.
CREATE INDEX jobtrail_tasks_due_tenant
    ON jobtrail_tasks (queue, tenant, priority DESC, run_at, id) WHERE state = 'queued';
