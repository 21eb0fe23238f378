-- The controls of enqueue: debounce, uniqueness windows, expiry.
-- debounce_key: set while the task is queued and not yet claimed (the claim and every move out
-- of queued clear it), so the unique index below holds at most one open task per
-- (tenant, kind, key): a concurrent enqueue either updates that task or inserts the one new
-- task, never a second. debounce_until: the latest run time (the first enqueue + debounce_max).
-- unique_until / unique_active: how long the idempotency key stays the task's own (NULL and
-- false: for ever); a later enqueue takes the key over only by a guarded update of this row.
-- expires_at: a task still queued then is never claimed; the sweeper cancels it (expired).
ALTER TABLE jobtrail_tasks
    ADD COLUMN debounce_key text,
    ADD COLUMN debounce_until timestamptz,
    ADD COLUMN unique_until timestamptz,
    ADD COLUMN unique_active boolean NOT NULL DEFAULT false,
    ADD COLUMN expires_at timestamptz;
CREATE UNIQUE INDEX jobtrail_tasks_debounce_open
    ON jobtrail_tasks (tenant, kind, debounce_key) WHERE debounce_key IS NOT NULL;
CREATE INDEX jobtrail_tasks_expiry
    ON jobtrail_tasks (expires_at) WHERE state = 'queued' AND expires_at IS NOT NULL;
