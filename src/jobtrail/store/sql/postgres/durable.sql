-- Durable handlers (migration 0022): the records of a suspending handler, the task's current
-- wait, events and their wake-ups, and the sweeper's wait deadlines (PostgreSQL).

-- name: durable_record_put
-- A sleep, wait, join, spawn, now, uuid or patched record, only while the caller holds the
-- task; an 'intent' record (a wait not yet satisfied) may be completed later.
INSERT INTO jobtrail_steps (task_id, name, is_effect, status, result, attempt, created_at,
                            confirmed_at, record, call_order)
SELECT %(id)s, %(name)s, false, %(status)s, %(result)s::jsonb, %(attempt)s, now(),
       CASE WHEN %(status)s = 'confirmed' THEN now() END, %(record)s, %(call_order)s::int
WHERE EXISTS (SELECT 1 FROM jobtrail_tasks
              WHERE id = %(id)s AND state IN ('leased', 'cancel_requested')
                AND lease_owner = %(owner)s AND attempts = %(attempt)s
                AND lease_expires_at > now())
ON CONFLICT (task_id, name) DO UPDATE
SET status = excluded.status, result = excluded.result, attempt = excluded.attempt,
    confirmed_at = excluded.confirmed_at
WHERE jobtrail_steps.status = 'intent'
RETURNING name;

-- name: durable_look
-- ctx's cancel check at a durable call, the clock and (with steps) the task's records in one
-- autocommit statement: one round trip. One row without steps, or with none recorded; no
-- holder columns when the task is gone.
SELECT t.state AS holder_state, t.lease_owner AS holder_owner, t.attempts AS holder_attempts,
       t.lease_expires_at > n.now AS holder_valid, n.now AS holder_now, s.*
FROM (SELECT now() AS now) n
LEFT JOIN jobtrail_tasks t ON t.id = %(id)s
LEFT JOIN jobtrail_steps s ON %(steps)s AND s.task_id = t.id
ORDER BY s.created_at, s.name;

-- name: durable_records
-- The records of several tasks (step_list's rows): those of the resumed handlers of a claim.
SELECT * FROM jobtrail_steps WHERE task_id = ANY(%(ids)s::bigint[])
ORDER BY task_id, created_at, name;

-- name: durable_wait_set
-- What the task's handler now waits for, in the transaction of its suspending move; a sleep
-- is due at its wake time.
UPDATE jobtrail_tasks
SET wait_kind = %(kind)s, wait_name = %(name)s, wait_key = %(key)s::text,
    wait_until = %(until)s::timestamptz, wait_ids = %(ids)s::jsonb,
    run_at = CASE WHEN %(kind)s = 'sleep' THEN %(until)s::timestamptz ELSE run_at END
WHERE id = %(id)s
RETURNING id;

-- name: durable_wait_get
SELECT id, state, last_reason, queue, tenant, wait_kind, wait_name, wait_key, wait_until,
       wait_ids
FROM jobtrail_tasks WHERE id = %(id)s;

-- name: durable_event_lock
-- Serialises a send of (tenant, key) with a handler suspending on it: whichever commits second
-- sees the other (the suspension finds the event, or the send finds the waiting task).
SELECT pg_advisory_xact_lock(
    hashtextextended('jobtrail_event:' || %(tenant)s || chr(1) || %(key)s, 0)) IS NULL AS locked;

-- name: durable_event_put
-- The first payload for a key wins: a repeat inserts nothing and returns no row.
INSERT INTO jobtrail_events (tenant, key, payload, created_at)
VALUES (%(tenant)s, %(key)s, %(payload)s::jsonb, now())
ON CONFLICT (tenant, key) DO NOTHING
RETURNING key;

-- name: durable_event_get
SELECT payload, created_at FROM jobtrail_events WHERE tenant = %(tenant)s AND key = %(key)s;

-- name: durable_event_waiters
SELECT id, queue FROM jobtrail_tasks
WHERE state = 'waiting' AND wait_kind = 'event' AND tenant = %(tenant)s AND wait_key = %(key)s
ORDER BY id
FOR UPDATE;

-- name: durable_wait_expired
SELECT id, queue, wait_kind, wait_name FROM jobtrail_tasks
WHERE state = 'waiting' AND wait_until IS NOT NULL AND wait_until <= now()
ORDER BY wait_until LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: durable_record_time_out
UPDATE jobtrail_steps
SET status = 'confirmed', result = '{"timed_out": true}'::jsonb, confirmed_at = now()
WHERE task_id = %(id)s AND name = %(name)s AND status = 'intent';

-- name: durable_children
SELECT id, kind, state, last_reason, result FROM jobtrail_tasks
WHERE parent_id = %(id)s ORDER BY id;

-- name: durable_record_event
-- A woken wait's record takes the event's payload in the wake's transaction: the resumed call
-- returns it without reading the event again (which retention may have pruned meanwhile).
UPDATE jobtrail_steps
SET status = 'confirmed', confirmed_at = now(),
    result = (SELECT jsonb_build_object('payload', e.payload) FROM jobtrail_events e
              WHERE e.tenant = %(tenant)s AND e.key = %(key)s)
WHERE task_id = %(id)s AND name = %(name)s AND status = 'intent';
