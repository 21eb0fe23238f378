-- Replay from a step: see PostgreSQL's 0025 for what each column means. Times are REAL seconds
-- since the epoch, as everywhere in the SQLite store.
CREATE TABLE jobtrail_steps_superseded (
    id            INTEGER PRIMARY KEY,
    task_id       INTEGER NOT NULL REFERENCES jobtrail_tasks (id),
    name          TEXT    NOT NULL,
    is_effect     INTEGER NOT NULL CHECK (is_effect IN (0, 1)),
    status        TEXT    NOT NULL,
    effect_key    TEXT,
    result        TEXT CHECK (result IS NULL OR json_valid(result)),
    attempt       INTEGER NOT NULL,
    error         TEXT,
    created_at    REAL    NOT NULL,
    confirmed_at  REAL,
    record        TEXT    NOT NULL,
    call_order    INTEGER,
    replay_seq    INTEGER NOT NULL,
    position      INTEGER NOT NULL,
    superseded_at REAL    NOT NULL
);
CREATE INDEX jobtrail_steps_superseded_task ON jobtrail_steps_superseded (task_id, id);

-- The suspended durable handlers per queue and kind (stats, /metrics): a task whose handler
-- sleeps (queued, sleeping) or waits for an event or its children (waiting). Only suspended
-- tasks are in it, so counting them reads no other task, however many are queued.
CREATE INDEX jobtrail_tasks_suspended ON jobtrail_tasks (queue, kind, wait_kind)
    WHERE (state = 'queued' AND last_reason = 'sleeping')
       OR (state = 'waiting' AND last_reason IN ('waiting_for_event', 'waiting_for_children'));
