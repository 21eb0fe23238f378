-- Durable handlers: see PostgreSQL's 0022 for what each column means. Times are REAL seconds
-- since the epoch, as everywhere in the SQLite store.
ALTER TABLE jobtrail_tasks ADD COLUMN wait_kind TEXT
    CHECK (wait_kind IN ('sleep', 'event', 'children'));
ALTER TABLE jobtrail_tasks ADD COLUMN wait_name TEXT;
ALTER TABLE jobtrail_tasks ADD COLUMN wait_key TEXT;
ALTER TABLE jobtrail_tasks ADD COLUMN wait_until REAL;
ALTER TABLE jobtrail_tasks ADD COLUMN wait_ids TEXT CHECK (wait_ids IS NULL OR json_valid(wait_ids));
CREATE INDEX jobtrail_tasks_wait_deadline ON jobtrail_tasks (wait_until)
    WHERE state = 'waiting' AND wait_until IS NOT NULL;
CREATE INDEX jobtrail_tasks_wait_event ON jobtrail_tasks (tenant, wait_key)
    WHERE state = 'waiting' AND wait_kind = 'event';

CREATE TABLE jobtrail_events (
    tenant     TEXT NOT NULL,
    key        TEXT NOT NULL,
    payload    TEXT CHECK (payload IS NULL OR json_valid(payload)),
    created_at REAL NOT NULL,
    PRIMARY KEY (tenant, key)
);

ALTER TABLE jobtrail_steps ADD COLUMN record TEXT NOT NULL DEFAULT 'step'
    CHECK (record IN ('step', 'effect', 'sleep', 'event', 'join', 'spawn', 'now', 'uuid',
                      'patched'));
ALTER TABLE jobtrail_steps ADD COLUMN call_order INTEGER;
UPDATE jobtrail_steps SET record = 'effect' WHERE is_effect = 1;
