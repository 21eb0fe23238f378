-- Operations (§12) for PostgreSQL: queues (pause, limits), limit-aware claims, stats, pruning.

-- name: queue_limits_lock
-- Claims on a limited queue take turns: the queue's row lock is held until the claim commits,
-- so the next claimer counts what the previous one took (READ COMMITTED re-reads per statement).
-- Locked in name order, so two claimers never deadlock.
SELECT name, limit_total, limit_per_tenant FROM jobtrail_queues
WHERE name = ANY(%(queues)s::text[]) AND NOT paused
  AND (limit_total IS NOT NULL OR limit_per_tenant IS NOT NULL)
ORDER BY name
FOR UPDATE;

-- name: queue_limited_names
SELECT name FROM jobtrail_queues
WHERE name = ANY(%(queues)s::text[])
  AND (limit_total IS NOT NULL OR limit_per_tenant IS NOT NULL);

-- name: queue_held_count
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = %(queue)s AND state IN ('leased', 'cancel_requested');

-- name: task_claim_limited
WITH upd AS (
    -- include: claim_set
    WHERE t.state = 'queued' AND t.id = ANY(ARRAY(
        SELECT x.id FROM (
            SELECT c.id, c.priority, c.run_at,
                   ROW_NUMBER() OVER (PARTITION BY c.tenant
                                      ORDER BY c.priority DESC, c.run_at, c.id) AS tn,
                   COALESCE(h.n, 0) AS held
            FROM (SELECT id, tenant, priority, run_at FROM jobtrail_tasks
                  WHERE state = 'queued' AND queue = %(queue)s AND run_at <= now()
                    AND kind = ANY(%(kinds)s::text[])
                  ORDER BY priority DESC, run_at, id
                  LIMIT %(scan)s) c
            LEFT JOIN (SELECT tenant, COUNT(*) AS n FROM jobtrail_tasks
                       WHERE queue = %(queue)s AND state IN ('leased', 'cancel_requested')
                       GROUP BY tenant) h ON h.tenant = c.tenant
        ) x
        WHERE %(per_tenant)s::int IS NULL OR x.tn + x.held <= %(per_tenant)s::int
        ORDER BY x.priority DESC, x.run_at, x.id
        LIMIT %(limit)s))
    RETURNING t.*, EXTRACT(EPOCH FROM now() - t.run_at)::float8 AS waited
), log AS (
    -- include: claim_log
)
SELECT * FROM upd;

-- name: queue_get
SELECT * FROM jobtrail_queues WHERE name = %(name)s;

-- name: queue_list
SELECT * FROM jobtrail_queues ORDER BY name;

-- name: queue_upsert
INSERT INTO jobtrail_queues (name, paused, paused_by, paused_note, paused_at, limit_total,
                             limit_per_tenant, updated_at)
VALUES (%(name)s, %(paused)s, %(paused_by)s::text, %(paused_note)s::text,
        CASE WHEN %(paused)s THEN now() END, %(limit_total)s::int,
        %(limit_per_tenant)s::int, now())
ON CONFLICT (name) DO UPDATE
SET paused = excluded.paused,
    paused_by = excluded.paused_by,
    paused_note = excluded.paused_note,
    paused_at = CASE WHEN NOT excluded.paused THEN NULL
                     WHEN jobtrail_queues.paused THEN jobtrail_queues.paused_at
                     ELSE excluded.paused_at END,
    limit_total = excluded.limit_total,
    limit_per_tenant = excluded.limit_per_tenant,
    updated_at = excluded.updated_at
RETURNING *;

-- name: queue_history_insert
INSERT INTO jobtrail_queue_history (queue, action, actor, note, data, at)
VALUES (%(queue)s, %(action)s, %(actor)s, %(note)s, %(data)s::jsonb, now());

-- name: queue_history_list
SELECT * FROM jobtrail_queue_history WHERE queue = %(queue)s ORDER BY id DESC LIMIT %(limit)s;

-- name: queue_tenant_held
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = %(queue)s AND tenant = %(tenant)s AND state IN ('leased', 'cancel_requested');

-- name: stats_open
SELECT queue, kind, state, COUNT(*) AS n,
       MIN(run_at) FILTER (WHERE state = 'queued' AND run_at <= now()) AS oldest_due
FROM jobtrail_tasks
WHERE state IN ('queued', 'leased', 'cancel_requested', 'awaiting_receipt', 'waiting')
GROUP BY queue, kind, state;

-- name: stats_dead
SELECT queue, kind, COUNT(*) AS n, MIN(finished_at) AS oldest
FROM jobtrail_tasks WHERE state = 'dead' AND dismissed_at IS NULL
GROUP BY queue, kind;

-- name: stats_finished
SELECT queue, kind, state, COUNT(*) AS n FROM jobtrail_tasks
WHERE state IN ('succeeded', 'cancelled') AND finished_at >= %(since)s
GROUP BY queue, kind, state;

-- name: stats_reasons
SELECT t.queue, t.kind, x.reason, x.to_state, COUNT(*) AS n
FROM jobtrail_transitions x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= %(since)s
GROUP BY t.queue, t.kind, x.reason, x.to_state;

-- name: stats_waits
SELECT t.queue, t.kind, (x.data ->> 'waited')::float8 AS seconds
FROM jobtrail_transitions x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= %(since)s AND x.reason = 'claimed';

-- name: stats_runs
-- Run time of attempts that ended in the window: from the claim just before the outcome (attempt
-- numbers restart at 1 after a replay, so the attempt number alone would pair it with older
-- claims too).
SELECT t.queue, t.kind, EXTRACT(EPOCH FROM x.at - c.at)::float8 AS seconds
FROM jobtrail_transitions x
CROSS JOIN LATERAL (
    SELECT c.at FROM jobtrail_transitions c
    WHERE c.task_id = x.task_id AND c.seq < x.seq AND c.reason = 'claimed'
    ORDER BY c.seq DESC LIMIT 1
) c
JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= %(since)s AND x.from_state IN ('leased', 'cancel_requested')
  AND x.reason NOT IN ('cancel_requested', 'lease_expired', 'lease_expired_cancelled',
                       'lease_expired_effect_uncertain', 'manual_fix')
  AND x.from_state <> x.to_state;

-- name: dead_groups
-- Dead tasks that need a person, by reason and kind, with the group's evidence: the code
-- versions of their last claims, their final error categories, the range of attempts, and the
-- first and last failure among them. One statement; each task's transitions are read once
-- through the (task_id, seq) index (a failure: a change of state with an error category, or
-- into dead).
SELECT t.last_reason AS reason, t.kind, COUNT(*) AS n, MIN(t.finished_at) AS oldest,
       string_agg(DISTINCT COALESCE(f.version, '?'), ',') AS versions,
       string_agg(DISTINCT COALESCE(t.last_error_category, '-'), ',') AS categories,
       MIN(t.attempts) AS attempts_min, MAX(t.attempts) AS attempts_max,
       MIN(f.first_failure) AS first_failure, MAX(f.last_failure) AS last_failure
FROM jobtrail_tasks t
LEFT JOIN LATERAL (
    SELECT MIN(x.at) FILTER (WHERE x.from_state IS DISTINCT FROM x.to_state
                               AND (x.error_category IS NOT NULL OR x.to_state = 'dead'))
               AS first_failure,
           MAX(x.at) FILTER (WHERE x.from_state IS DISTINCT FROM x.to_state
                               AND (x.error_category IS NOT NULL OR x.to_state = 'dead'))
               AS last_failure,
           (array_agg(x.data ->> 'version' ORDER BY x.seq DESC)
               FILTER (WHERE x.reason = 'claimed'))[1] AS version
    FROM jobtrail_transitions x WHERE x.task_id = t.id) f ON true
WHERE t.state = 'dead' AND t.dismissed_at IS NULL
GROUP BY t.last_reason, t.kind
ORDER BY n DESC, reason, kind;

-- name: prune_select
SELECT id FROM jobtrail_tasks t
WHERE t.state IN ('succeeded', 'cancelled')
  AND t.finished_at < now() - make_interval(secs => %(older_than)s::float8)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.after_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_outbox o WHERE o.task_id = t.id AND o.state = 'pending')
ORDER BY t.finished_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: prune_guard_on
SELECT set_config('jobtrail.pruning', 'on', true);

-- name: prune_guard_off
SELECT set_config('jobtrail.pruning', 'off', true);

-- name: prune_transitions
DELETE FROM jobtrail_transitions WHERE task_id = ANY(%(ids)s::bigint[]);

-- name: prune_steps
DELETE FROM jobtrail_steps WHERE task_id = ANY(%(ids)s::bigint[]);

-- name: prune_outbox
DELETE FROM jobtrail_outbox WHERE task_id = ANY(%(ids)s::bigint[]);

-- name: prune_tasks
DELETE FROM jobtrail_tasks WHERE id = ANY(%(ids)s::bigint[])
  AND state IN ('succeeded', 'cancelled');
