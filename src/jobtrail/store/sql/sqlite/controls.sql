-- The controls of enqueue (0023): see PostgreSQL's controls.sql. Writers are serialised by
-- BEGIN IMMEDIATE; the driver appends the transitions.

-- name: task_insert_controlled
INSERT INTO jobtrail_tasks (
    kind, queue, tenant, state, payload, payload_hash, idempotency_key, priority, max_attempts,
    lease_seconds, reentrant, run_at, parent_id, last_reason, seq, evidence_on_row,
    budget_started_at, created_at, updated_at, debounce_key, debounce_until, unique_until,
    unique_active, expires_at, enq_state, enq_actor, enq_data)
SELECT
    :kind, :queue, :tenant, :state, :payload, :payload_hash, :idempotency_key, :priority,
    :max_attempts, :lease_seconds, :reentrant,
    CASE WHEN :debounce IS NOT NULL
         THEN MIN(round((julianday('now') - 2440587.5) * 86400.0, 3) + :debounce, COALESCE(v.until, round((julianday('now') - 2440587.5) * 86400.0, 3) + :debounce))
         ELSE COALESCE(:run_at, round((julianday('now') - 2440587.5) * 86400.0, 3) + COALESCE(:delay, 0)) END,
    :parent_id, 'enqueued', 1, 1, round((julianday('now') - 2440587.5) * 86400.0, 3), round((julianday('now') - 2440587.5) * 86400.0, 3), round((julianday('now') - 2440587.5) * 86400.0, 3), :debounce_key, v.until,
    round((julianday('now') - 2440587.5) * 86400.0, 3) + :unique_for, :unique_active, COALESCE(:expires_at, round((julianday('now') - 2440587.5) * 86400.0, 3) + :expires_in),
    :state, :actor, NULLIF(:data, '{}')
FROM (SELECT round((julianday('now') - 2440587.5) * 86400.0, 3) + :debounce_max AS until) v
WHERE true
ON CONFLICT DO NOTHING
RETURNING id, created_at, run_at;

-- name: task_debounce_old
SELECT id, payload_hash FROM jobtrail_tasks
WHERE tenant = :tenant AND kind = :kind AND debounce_key = :debounce_key AND state = 'queued';

-- name: task_debounce
UPDATE jobtrail_tasks
SET payload = :payload,
    payload_hash = :payload_hash,
    run_at = MIN(round((julianday('now') - 2440587.5) * 86400.0, 3) + :debounce, COALESCE(debounce_until, round((julianday('now') - 2440587.5) * 86400.0, 3) + :debounce)),
    seq = seq + 1,
    updated_at = round((julianday('now') - 2440587.5) * 86400.0, 3)
WHERE id = :id AND debounce_key = :debounce_key AND state = 'queued'
RETURNING id, seq, attempts, updated_at;

-- name: task_key_release
UPDATE jobtrail_tasks
SET idempotency_key = NULL
WHERE id = :id AND idempotency_key = :idempotency_key
  AND ((unique_until IS NOT NULL AND unique_until <= round((julianday('now') - 2440587.5) * 86400.0, 3))
       OR (unique_active AND state IN ('succeeded', 'cancelled', 'dead')))
RETURNING id;

-- name: task_expired_queued
SELECT id FROM jobtrail_tasks
WHERE state = 'queued' AND expires_at IS NOT NULL AND expires_at <= round((julianday('now') - 2440587.5) * 86400.0, 3)
ORDER BY expires_at
LIMIT :limit;

-- name: task_debounce_count
SELECT COUNT(*) AS n FROM jobtrail_transition_log WHERE task_id = :id AND reason = 'debounced';

-- name: children_results
SELECT result FROM jobtrail_tasks WHERE parent_id = :id ORDER BY id;
