-- Durable handlers: a handler suspends partway (ctx.sleep, ctx.wait_for_event, ctx.join) and
-- resumes later from the top without holding a worker slot or a lease.
--
-- jobtrail_tasks, the task's latest suspension (NULL for a task whose handler never suspended;
-- the row's state and last_reason say whether it is still suspended):
--   wait_kind   'sleep' (queued, reason sleeping, run_at = the wake time), 'event' (waiting,
--               waiting_for_event) or 'children' (waiting, waiting_for_children)
--   wait_name   the sleep's name, the event key, or the join's record name
--   wait_key    the event key a waiting task waits for (send_event looks it up by tenant, key)
--   wait_until  the wake time of a sleep, or the deadline of a wait (NULL: no timeout); the
--               sweeper moves a waiting task past it waiting -> queued (wait_timed_out)
--   wait_ids    the ids of the children a join waits for (a JSON array of integers)
ALTER TABLE jobtrail_tasks
    ADD COLUMN wait_kind text CHECK (wait_kind IN ('sleep', 'event', 'children')),
    ADD COLUMN wait_name text,
    ADD COLUMN wait_key text,
    ADD COLUMN wait_until timestamptz,
    ADD COLUMN wait_ids jsonb;
-- the sweeper's timeouts, and send_event's lookup of the tasks waiting for a key
CREATE INDEX jobtrail_tasks_wait_deadline ON jobtrail_tasks (wait_until)
    WHERE state = 'waiting' AND wait_until IS NOT NULL;
CREATE INDEX jobtrail_tasks_wait_event ON jobtrail_tasks (tenant, wait_key)
    WHERE state = 'waiting' AND wait_kind = 'event';

-- Events sent with app.send_event, per tenant and key; the first payload for a key wins (a
-- repeat changes nothing). An event sent before the wait began is found by the wait.
CREATE TABLE jobtrail_events (
    tenant     text        NOT NULL,
    key        text        NOT NULL,
    payload    jsonb,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, key)
);

-- jobtrail_steps records, besides steps and effects, what a durable handler must see the same
-- on every resume, under names unique within the task:
--   record      'step', 'effect', 'sleep' (result: the wake time), 'event' (a wait's outcome),
--               'join', 'spawn' (result: the child's id), 'now', 'uuid', 'patched'
--   call_order  the order of the call within the handler (1, 2, ...): a resumed handler whose
--               calls come in another order fails (the determinism guard). NULL on rows written
--               before this migration, which the guard does not compare.
ALTER TABLE jobtrail_steps
    ADD COLUMN record text NOT NULL DEFAULT 'step'
        CHECK (record IN ('step', 'effect', 'sleep', 'event', 'join', 'spawn', 'now', 'uuid',
                          'patched')),
    ADD COLUMN call_order integer;
UPDATE jobtrail_steps SET record = 'effect' WHERE is_effect;
