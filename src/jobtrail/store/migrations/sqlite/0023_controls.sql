-- The controls of enqueue: debounce, uniqueness windows, expiry (see PostgreSQL's 0023).
ALTER TABLE jobtrail_tasks ADD COLUMN debounce_key TEXT;
ALTER TABLE jobtrail_tasks ADD COLUMN debounce_until REAL;
ALTER TABLE jobtrail_tasks ADD COLUMN unique_until REAL;
ALTER TABLE jobtrail_tasks ADD COLUMN unique_active INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobtrail_tasks ADD COLUMN expires_at REAL;
CREATE UNIQUE INDEX jobtrail_tasks_debounce_open
    ON jobtrail_tasks (tenant, kind, debounce_key) WHERE debounce_key IS NOT NULL;
CREATE INDEX jobtrail_tasks_expiry
    ON jobtrail_tasks (expires_at) WHERE state = 'queued' AND expires_at IS NOT NULL;
