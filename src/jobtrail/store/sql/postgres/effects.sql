-- Steps, effects, outbox, receipts and workflow children (PostgreSQL).
-- Every write a handler makes is holder-conditional: it happens only while this attempt still
-- holds the task (same guard as every worker edge).

-- name: step_list
SELECT * FROM jobtrail_steps WHERE task_id = %(id)s ORDER BY created_at, name;

-- name: step_confirm
INSERT INTO jobtrail_steps (task_id, name, is_effect, status, effect_key, result, attempt,
                            created_at, confirmed_at, record, call_order)
SELECT %(id)s, %(name)s, %(is_effect)s, 'confirmed', %(effect_key)s::text,
       %(result)s::jsonb, %(attempt)s, now(), now(),
       CASE WHEN %(is_effect)s THEN 'effect' ELSE 'step' END, %(call_order)s::int
WHERE EXISTS (SELECT 1 FROM jobtrail_tasks
              WHERE id = %(id)s AND state IN ('leased', 'cancel_requested')
                AND lease_owner = %(owner)s AND attempts = %(attempt)s
                AND lease_expires_at > now())
ON CONFLICT (task_id, name) DO UPDATE
SET status = 'confirmed', result = excluded.result, attempt = excluded.attempt,
    confirmed_at = excluded.confirmed_at, error = NULL,
    call_order = COALESCE(jobtrail_steps.call_order, excluded.call_order)
WHERE jobtrail_steps.status = 'intent'
RETURNING name;

-- name: effect_intent
INSERT INTO jobtrail_steps (task_id, name, is_effect, status, effect_key, attempt, created_at,
                            record, call_order)
SELECT %(id)s, %(name)s, true, 'intent', %(effect_key)s, %(attempt)s, now(), 'effect',
       %(call_order)s::int
WHERE EXISTS (SELECT 1 FROM jobtrail_tasks
              WHERE id = %(id)s AND state IN ('leased', 'cancel_requested')
                AND lease_owner = %(owner)s AND attempts = %(attempt)s
                AND lease_expires_at > now())
ON CONFLICT (task_id, name) DO UPDATE
SET status = 'intent', attempt = excluded.attempt, error = NULL,
    call_order = COALESCE(jobtrail_steps.call_order, excluded.call_order)
WHERE jobtrail_steps.status IN ('intent', 'refused')
RETURNING name;

-- name: effect_note_error
UPDATE jobtrail_steps SET error = %(error)s
WHERE task_id = %(id)s AND name = %(name)s AND status = 'intent';

-- name: effect_refuse
-- The call raised with evidence that the provider refused (context._refused): nothing
-- happened, the next attempt calls again; the row stays for explain and the dashboard.
UPDATE jobtrail_steps SET status = 'refused', error = %(error)s
WHERE task_id = %(id)s AND name = %(name)s AND status = 'intent';

-- name: effect_forget
DELETE FROM jobtrail_steps WHERE task_id = %(id)s AND name = %(name)s AND status = 'intent';

-- name: effect_confirmed_count
SELECT COUNT(*) AS n FROM jobtrail_steps
WHERE task_id = %(id)s AND is_effect AND status = 'confirmed';

-- name: outbox_insert
INSERT INTO jobtrail_outbox (task_id, topic, payload, next_at, created_at)
VALUES (%(task_id)s, %(topic)s, %(payload)s::jsonb, now(), now());

-- name: outbox_claim
UPDATE jobtrail_outbox
SET locked_until = now() + make_interval(secs => %(lock_seconds)s::float8),
    attempts = attempts + 1
WHERE id = ANY(ARRAY(
    SELECT id FROM jobtrail_outbox
    WHERE state = 'pending' AND next_at <= now()
      AND (%(any_topic)s OR topic = ANY(%(topics)s::text[]))
      AND (locked_until IS NULL OR locked_until <= now())
    ORDER BY next_at, id LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED))
RETURNING id, task_id, topic, payload, attempts;

-- name: outbox_delivered
UPDATE jobtrail_outbox SET state = 'delivered', delivered_at = now(), locked_until = NULL
WHERE id = %(id)s AND state = 'pending';

-- name: outbox_failed
UPDATE jobtrail_outbox
SET next_at = now() + make_interval(secs => %(delay)s::float8), locked_until = NULL,
    last_error = %(error)s
WHERE id = %(id)s AND state = 'pending';

-- name: outbox_list
SELECT * FROM jobtrail_outbox WHERE task_id = %(id)s ORDER BY id;

-- name: outbox_pending_count
SELECT COUNT(*) AS n FROM jobtrail_outbox WHERE task_id = %(id)s AND state = 'pending';

-- name: task_lock
-- Two children finishing at once must see each other: the parent's row lock serialises them,
-- and the re-read after it (a new statement in READ COMMITTED) sees the other's commit.
SELECT id, state FROM jobtrail_tasks WHERE id = %(id)s FOR UPDATE;

-- name: children_list
SELECT id, kind, state, after_id, last_reason FROM jobtrail_tasks
WHERE parent_id = %(id)s ORDER BY id;

-- name: task_release_next
UPDATE jobtrail_tasks SET run_at = now()
WHERE after_id = %(id)s AND state = 'queued'
RETURNING id, queue;

-- name: task_set_after
UPDATE jobtrail_tasks SET after_id = %(after_id)s WHERE id = %(id)s;

-- name: task_by_receipt
-- :tenant NULL is any tenant; a tenant's confirmation finds only its own tasks
SELECT id, state FROM jobtrail_tasks
WHERE receipt_id = %(receipt_id)s AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
ORDER BY (state = 'awaiting_receipt') DESC, id DESC LIMIT 2;

-- name: task_receipt_expired
SELECT id, kind, receipt_id, attempts, max_attempts FROM jobtrail_tasks
WHERE state = 'awaiting_receipt' AND receipt_deadline <= now()
ORDER BY receipt_deadline LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;
