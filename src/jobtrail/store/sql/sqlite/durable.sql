-- Durable handlers (migration 0022): see the PostgreSQL file. Writers are serialised by
-- BEGIN IMMEDIATE, so a send and a suspension on the same key never interleave.

-- name: durable_record_put
INSERT INTO jobtrail_steps (task_id, name, is_effect, status, result, attempt, created_at,
                            confirmed_at, record, call_order)
SELECT :id, :name, 0, :status, :result, :attempt, round((julianday('now') - 2440587.5) * 86400.0, 3),
       CASE WHEN :status = 'confirmed' THEN round((julianday('now') - 2440587.5) * 86400.0, 3) END, :record, :call_order
WHERE EXISTS (SELECT 1 FROM jobtrail_tasks
              WHERE id = :id AND state IN ('leased', 'cancel_requested')
                AND lease_owner = :owner AND attempts = :attempt
                AND lease_expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3))
ON CONFLICT (task_id, name) DO UPDATE
SET status = excluded.status, result = excluded.result, attempt = excluded.attempt,
    confirmed_at = excluded.confirmed_at
WHERE jobtrail_steps.status = 'intent'
RETURNING name;

-- name: durable_records
-- The records of several tasks (step_list's rows): those of the resumed handlers of a claim.
SELECT * FROM jobtrail_steps WHERE task_id IN (SELECT value FROM json_each(:ids))
ORDER BY task_id, created_at, name;

-- name: durable_wait_set
UPDATE jobtrail_tasks
SET wait_kind = :kind, wait_name = :name, wait_key = :key, wait_until = :until,
    wait_ids = :ids,
    run_at = CASE WHEN :kind = 'sleep' THEN :until ELSE run_at END
WHERE id = :id
RETURNING id;

-- name: durable_wait_get
SELECT id, state, last_reason, queue, tenant, wait_kind, wait_name, wait_key, wait_until,
       wait_ids
FROM jobtrail_tasks WHERE id = :id;

-- name: durable_event_lock
SELECT 1 AS locked;

-- name: durable_event_put
INSERT INTO jobtrail_events (tenant, key, payload, created_at)
VALUES (:tenant, :key, :payload, round((julianday('now') - 2440587.5) * 86400.0, 3))
ON CONFLICT (tenant, key) DO NOTHING
RETURNING key;

-- name: durable_event_get
SELECT payload, created_at FROM jobtrail_events WHERE tenant = :tenant AND key = :key;

-- name: durable_event_waiters
SELECT id, queue FROM jobtrail_tasks
WHERE state = 'waiting' AND wait_kind = 'event' AND tenant = :tenant AND wait_key = :key
ORDER BY id;

-- name: durable_wait_expired
SELECT id, queue, wait_kind, wait_name FROM jobtrail_tasks
WHERE state = 'waiting' AND wait_until IS NOT NULL AND wait_until <= round((julianday('now') - 2440587.5) * 86400.0, 3)
ORDER BY wait_until LIMIT :limit;

-- name: durable_record_time_out
UPDATE jobtrail_steps
SET status = 'confirmed', result = '{"timed_out": true}', confirmed_at = round((julianday('now') - 2440587.5) * 86400.0, 3)
WHERE task_id = :id AND name = :name AND status = 'intent';

-- name: durable_children
SELECT id, kind, state, last_reason, result FROM jobtrail_tasks
WHERE parent_id = :id ORDER BY id;

-- name: durable_record_event
-- A woken wait's record takes the event's payload in the wake's transaction: the resumed call
-- returns it without reading the event again (which retention may have pruned meanwhile).
UPDATE jobtrail_steps
SET status = 'confirmed', confirmed_at = round((julianday('now') - 2440587.5) * 86400.0, 3),
    result = (SELECT json_object('payload', json(e.payload)) FROM jobtrail_events e
              WHERE e.tenant = :tenant AND e.key = :key)
WHERE task_id = :id AND name = :name AND status = 'intent';
