-- Operations (§12) for SQLite: queues (pause, limits), limit-aware claims, stats, pruning.

-- name: queue_limits_lock
-- Queues of this claim that have a concurrency limit and are not paused. (SQLite writers are
-- serialised by BEGIN IMMEDIATE; PostgreSQL locks these rows so limited claims take turns.)
SELECT name, limit_total, limit_per_tenant FROM jobtrail_queues
WHERE name IN (SELECT value FROM json_each(:queues)) AND paused = 0
  AND (limit_total IS NOT NULL OR limit_per_tenant IS NOT NULL)
ORDER BY name;

-- name: queue_limited_names
SELECT name FROM jobtrail_queues
WHERE name IN (SELECT value FROM json_each(:queues))
  AND (limit_total IS NOT NULL OR limit_per_tenant IS NOT NULL);

-- name: queue_held_count
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = :queue AND state IN ('leased', 'cancel_requested');

-- name: task_claim_limited
-- Like task_claim for one queue, but never past the per-tenant limit: each candidate's rank
-- within its tenant plus what that tenant already holds must stay within the limit. The
-- queue-wide limit is the LIMIT (capacity computed by the driver). Candidates come from the
-- first :scan due tasks, so a tenant far down a long queue waits for the head to move.
UPDATE jobtrail_tasks
SET state = 'leased',
    lease_owner = :owner,
    lease_expires_at = round((julianday('now') - 2440587.5) * 86400.0, 3) + lease_seconds,
    attempts = attempts + 1,
    seq = seq + 1,
    last_reason = 'claimed',
    updated_at = round((julianday('now') - 2440587.5) * 86400.0, 3)
WHERE state = 'queued' AND id IN (
    SELECT id FROM (
        SELECT c.id, c.priority, c.run_at,
               ROW_NUMBER() OVER (PARTITION BY c.tenant
                                  ORDER BY c.priority DESC, c.run_at, c.id) AS tn,
               COALESCE(h.n, 0) AS held
        FROM (SELECT id, tenant, priority, run_at FROM jobtrail_tasks
              WHERE state = 'queued' AND queue = :queue AND run_at <= round((julianday('now') - 2440587.5) * 86400.0, 3)
                AND kind IN (SELECT value FROM json_each(:kinds))
              ORDER BY priority DESC, run_at, id
              LIMIT :scan) c
        LEFT JOIN (SELECT tenant, COUNT(*) AS n FROM jobtrail_tasks
                   WHERE queue = :queue AND state IN ('leased', 'cancel_requested')
                   GROUP BY tenant) h ON h.tenant = c.tenant
    ) x
    WHERE :per_tenant IS NULL OR x.tn + x.held <= :per_tenant
    ORDER BY x.priority DESC, x.run_at, x.id
    LIMIT :limit)
RETURNING *, round((julianday('now') - 2440587.5) * 86400.0, 3) - run_at AS waited;

-- name: queue_get
SELECT * FROM jobtrail_queues WHERE name = :name;

-- name: queue_list
SELECT * FROM jobtrail_queues ORDER BY name;

-- name: queue_upsert
INSERT INTO jobtrail_queues (name, paused, paused_by, paused_note, paused_at, limit_total,
                             limit_per_tenant, updated_at)
VALUES (:name, :paused, :paused_by, :paused_note,
        CASE WHEN :paused THEN round((julianday('now') - 2440587.5) * 86400.0, 3) END, :limit_total, :limit_per_tenant, round((julianday('now') - 2440587.5) * 86400.0, 3))
ON CONFLICT (name) DO UPDATE
SET paused = excluded.paused,
    paused_by = excluded.paused_by,
    paused_note = excluded.paused_note,
    paused_at = CASE WHEN excluded.paused = 0 THEN NULL
                     WHEN jobtrail_queues.paused = 1 THEN jobtrail_queues.paused_at
                     ELSE excluded.paused_at END,
    limit_total = excluded.limit_total,
    limit_per_tenant = excluded.limit_per_tenant,
    updated_at = excluded.updated_at
RETURNING *;

-- name: queue_history_insert
INSERT INTO jobtrail_queue_history (queue, action, actor, note, data, at)
VALUES (:queue, :action, :actor, :note, :data, round((julianday('now') - 2440587.5) * 86400.0, 3));

-- name: queue_history_list
SELECT * FROM jobtrail_queue_history WHERE queue = :queue ORDER BY id DESC LIMIT :limit;

-- name: queue_tenant_held
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = :queue AND tenant = :tenant AND state IN ('leased', 'cancel_requested');

-- name: stats_open
SELECT queue, kind, state, COUNT(*) AS n,
       MIN(CASE WHEN state = 'queued' AND run_at <= round((julianday('now') - 2440587.5) * 86400.0, 3) THEN run_at END) AS oldest_due
FROM jobtrail_tasks
WHERE state IN ('queued', 'leased', 'cancel_requested', 'awaiting_receipt', 'waiting')
GROUP BY queue, kind, state;

-- name: stats_dead
SELECT queue, kind, COUNT(*) AS n, MIN(finished_at) AS oldest
FROM jobtrail_tasks WHERE state = 'dead' AND dismissed_at IS NULL
GROUP BY queue, kind;

-- name: stats_finished
SELECT queue, kind, state, COUNT(*) AS n FROM jobtrail_tasks
WHERE state IN ('succeeded', 'cancelled') AND finished_at >= :since
GROUP BY queue, kind, state;

-- name: stats_reasons
SELECT t.queue, t.kind, x.reason, x.to_state, COUNT(*) AS n
FROM jobtrail_transitions x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= :since
GROUP BY t.queue, t.kind, x.reason, x.to_state;

-- name: stats_waits
SELECT t.queue, t.kind, json_extract(x.data, '$.waited') AS seconds
FROM jobtrail_transitions x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= :since AND x.reason = 'claimed';

-- name: stats_runs
-- Run time of attempts that ended in the window: from the claim just before the outcome (attempt
-- numbers restart at 1 after a replay, so the attempt number alone would pair it with older
-- claims too).
SELECT t.queue, t.kind,
       x.at - (SELECT c.at FROM jobtrail_transitions c
               WHERE c.task_id = x.task_id AND c.seq < x.seq AND c.reason = 'claimed'
               ORDER BY c.seq DESC LIMIT 1) AS seconds
FROM jobtrail_transitions x
JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= :since AND x.from_state IN ('leased', 'cancel_requested')
  AND x.reason NOT IN ('cancel_requested', 'lease_expired', 'lease_expired_cancelled',
                       'lease_expired_effect_uncertain', 'manual_fix')
  AND x.from_state <> x.to_state;

-- name: dead_groups
-- Dead tasks that need a person, by reason and kind, with the group's evidence (see the
-- PostgreSQL query). SQLite: per task one backward probe of its (task_id, seq) index for the
-- version of its last claim (as before) and one forward probe that stops at its first
-- failure; its last failure is its death (finished_at: a dead task's last move into dead).
SELECT d.reason, d.kind, COUNT(*) AS n, MIN(d.finished_at) AS oldest,
       GROUP_CONCAT(DISTINCT COALESCE(d.version, '?')) AS versions,
       GROUP_CONCAT(DISTINCT COALESCE(d.category, '-')) AS categories,
       MIN(d.attempts) AS attempts_min, MAX(d.attempts) AS attempts_max,
       MIN(d.first_failure) AS first_failure, MAX(d.finished_at) AS last_failure
FROM (SELECT t.last_reason AS reason, t.kind, t.finished_at,
             t.last_error_category AS category, t.attempts,
             (SELECT json_extract(c.data, '$.version') FROM jobtrail_transitions c
              WHERE c.task_id = t.id AND c.reason = 'claimed' ORDER BY c.seq DESC LIMIT 1)
                 AS version,
             (SELECT x.at FROM jobtrail_transitions x
              WHERE x.task_id = t.id AND x.from_state IS NOT x.to_state
                AND (x.error_category IS NOT NULL OR x.to_state = 'dead')
              ORDER BY x.seq LIMIT 1) AS first_failure
      FROM jobtrail_tasks t
      WHERE t.state = 'dead' AND t.dismissed_at IS NULL) d
GROUP BY d.reason, d.kind
ORDER BY n DESC, d.reason, d.kind;

-- name: prune_select
SELECT id FROM jobtrail_tasks t
WHERE t.state IN ('succeeded', 'cancelled') AND t.finished_at < round((julianday('now') - 2440587.5) * 86400.0, 3) - :older_than
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.after_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_outbox o WHERE o.task_id = t.id AND o.state = 'pending')
ORDER BY t.finished_at
LIMIT :limit;

-- name: prune_guard_on
INSERT INTO jobtrail_prune_guard (token) VALUES (1);

-- name: prune_guard_off
DELETE FROM jobtrail_prune_guard;

-- name: prune_transitions
DELETE FROM jobtrail_transitions WHERE task_id IN (SELECT value FROM json_each(:ids));

-- name: prune_steps
DELETE FROM jobtrail_steps WHERE task_id IN (SELECT value FROM json_each(:ids));

-- name: prune_outbox
DELETE FROM jobtrail_outbox WHERE task_id IN (SELECT value FROM json_each(:ids));

-- name: prune_tasks
DELETE FROM jobtrail_tasks WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN ('succeeded', 'cancelled');
