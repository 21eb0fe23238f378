-- Replay from a step (app.replay(..., from_step=NAME)): the recorded outcomes a replay forgot
-- so that the handler runs them again — the named step and everything recorded after it — are
-- moved here, as they were, beside the replay that superseded them. jobtrail_steps keeps one row
-- per (task, name) for the handler to read; this table keeps the history of what was forgotten
-- (the columns of jobtrail_steps, record and call_order of migration 0022 included), and:
--   replay_seq     the task's seq after the replayed transition that superseded the row
--   superseded_at  when, by the database clock
--   position       its place in the order the task had recorded it (1, 2, ...)
CREATE TABLE jobtrail_steps_superseded (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id       BIGINT      NOT NULL REFERENCES jobtrail_tasks (id),
    name          TEXT        NOT NULL,
    is_effect     BOOLEAN     NOT NULL,
    status        TEXT        NOT NULL,
    effect_key    TEXT,
    result        JSONB,
    attempt       INTEGER     NOT NULL,
    error         TEXT,
    created_at    TIMESTAMPTZ NOT NULL,
    confirmed_at  TIMESTAMPTZ,
    record        TEXT        NOT NULL,
    call_order    INTEGER,
    replay_seq    BIGINT      NOT NULL,
    position      INTEGER     NOT NULL,
    superseded_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX jobtrail_steps_superseded_task ON jobtrail_steps_superseded (task_id, id);

-- The suspended durable handlers per queue and kind (stats, /metrics): a task whose handler
-- sleeps (queued, sleeping) or waits for an event or its children (waiting). Only suspended
-- tasks are in it, so counting them reads no other task, however many are queued.
CREATE INDEX jobtrail_tasks_suspended ON jobtrail_tasks (queue, kind, wait_kind)
    WHERE (state = 'queued' AND last_reason = 'sleeping')
       OR (state = 'waiting' AND last_reason IN ('waiting_for_event', 'waiting_for_children'));
