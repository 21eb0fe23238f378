-- Steps, effects, outbox, receipts and workflow children (SQLite).
-- Every write a handler makes is holder-conditional: it happens only while this attempt still
-- holds the task (same guard as every worker edge).

-- name: step_list
SELECT * FROM jobtrail_steps WHERE task_id = :id ORDER BY created_at, name;

-- name: step_confirm
INSERT INTO jobtrail_steps (task_id, name, is_effect, status, effect_key, result, attempt,
                            created_at, confirmed_at, record, call_order)
SELECT :id, :name, :is_effect, 'confirmed', :effect_key, :result, :attempt, round((julianday('now') - 2440587.5) * 86400.0, 3), round((julianday('now') - 2440587.5) * 86400.0, 3),
       CASE WHEN :is_effect THEN 'effect' ELSE 'step' END, :call_order
WHERE EXISTS (SELECT 1 FROM jobtrail_tasks
              WHERE id = :id AND state IN ('leased', 'cancel_requested')
                AND lease_owner = :owner AND attempts = :attempt
                AND lease_expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3))
ON CONFLICT (task_id, name) DO UPDATE
SET status = 'confirmed', result = excluded.result, attempt = excluded.attempt,
    confirmed_at = excluded.confirmed_at, error = NULL,
    call_order = COALESCE(jobtrail_steps.call_order, excluded.call_order)
WHERE jobtrail_steps.status = 'intent'
RETURNING name;

-- name: effect_intent
INSERT INTO jobtrail_steps (task_id, name, is_effect, status, effect_key, attempt, created_at,
                            record, call_order)
SELECT :id, :name, 1, 'intent', :effect_key, :attempt, round((julianday('now') - 2440587.5) * 86400.0, 3),
       'effect', :call_order
WHERE EXISTS (SELECT 1 FROM jobtrail_tasks
              WHERE id = :id AND state IN ('leased', 'cancel_requested')
                AND lease_owner = :owner AND attempts = :attempt
                AND lease_expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3))
ON CONFLICT (task_id, name) DO UPDATE
SET status = 'intent', attempt = excluded.attempt, error = NULL,
    call_order = COALESCE(jobtrail_steps.call_order, excluded.call_order)
WHERE jobtrail_steps.status IN ('intent', 'refused')
RETURNING name;

-- name: effect_note_error
UPDATE jobtrail_steps SET error = :error
WHERE task_id = :id AND name = :name AND status = 'intent';

-- name: effect_refuse
-- The call raised with evidence that the provider refused (context._refused): nothing
-- happened, the next attempt calls again; the row stays for explain and the dashboard.
UPDATE jobtrail_steps SET status = 'refused', error = :error
WHERE task_id = :id AND name = :name AND status = 'intent';

-- name: effect_forget
-- The effect function returned an awaitable it never ran: nothing happened.
DELETE FROM jobtrail_steps WHERE task_id = :id AND name = :name AND status = 'intent';

-- name: effect_confirmed_count
SELECT COUNT(*) AS n FROM jobtrail_steps
WHERE task_id = :id AND is_effect = 1 AND status = 'confirmed';

-- name: outbox_insert
INSERT INTO jobtrail_outbox (task_id, topic, payload, next_at, created_at)
VALUES (:task_id, :topic, :payload, round((julianday('now') - 2440587.5) * 86400.0, 3), round((julianday('now') - 2440587.5) * 86400.0, 3));

-- name: outbox_claim
UPDATE jobtrail_outbox
SET locked_until = round((julianday('now') - 2440587.5) * 86400.0, 3) + :lock_seconds, attempts = attempts + 1
WHERE id IN (SELECT id FROM jobtrail_outbox
             WHERE state = 'pending' AND next_at <= round((julianday('now') - 2440587.5) * 86400.0, 3)
               AND (:any_topic OR topic IN (SELECT value FROM json_each(:topics)))
               AND (locked_until IS NULL OR locked_until <= round((julianday('now') - 2440587.5) * 86400.0, 3))
             ORDER BY next_at, id LIMIT :limit)
RETURNING id, task_id, topic, payload, attempts;

-- name: outbox_delivered
UPDATE jobtrail_outbox SET state = 'delivered', delivered_at = round((julianday('now') - 2440587.5) * 86400.0, 3), locked_until = NULL
WHERE id = :id AND state = 'pending';

-- name: outbox_failed
UPDATE jobtrail_outbox
SET next_at = round((julianday('now') - 2440587.5) * 86400.0, 3) + :delay, locked_until = NULL, last_error = :error
WHERE id = :id AND state = 'pending';

-- name: outbox_list
SELECT * FROM jobtrail_outbox WHERE task_id = :id ORDER BY id;

-- name: outbox_pending_count
SELECT COUNT(*) AS n FROM jobtrail_outbox WHERE task_id = :id AND state = 'pending';

-- name: task_lock
-- Writers are already serialised by BEGIN IMMEDIATE; PostgreSQL takes a row lock here.
SELECT id, state FROM jobtrail_tasks WHERE id = :id;

-- name: children_list
SELECT id, kind, state, after_id, last_reason FROM jobtrail_tasks
WHERE parent_id = :id ORDER BY id;

-- name: task_release_next
-- Not a state change: the next sequential sibling becomes due (run_at = now).
UPDATE jobtrail_tasks SET run_at = round((julianday('now') - 2440587.5) * 86400.0, 3)
WHERE after_id = :id AND state = 'queued'
RETURNING id, queue;

-- name: task_set_after
UPDATE jobtrail_tasks SET after_id = :after_id WHERE id = :id;

-- name: task_by_receipt
-- :tenant NULL is any tenant; a tenant's confirmation finds only its own tasks
SELECT id, state FROM jobtrail_tasks
WHERE receipt_id = :receipt_id AND (:kind IS NULL OR kind = :kind)
  AND (:tenant IS NULL OR tenant = :tenant)
ORDER BY (state = 'awaiting_receipt') DESC, id DESC LIMIT 2;

-- name: task_receipt_expired
SELECT id, kind, receipt_id, attempts, max_attempts FROM jobtrail_tasks
WHERE state = 'awaiting_receipt' AND receipt_deadline <= round((julianday('now') - 2440587.5) * 86400.0, 3)
ORDER BY receipt_deadline LIMIT :limit;
