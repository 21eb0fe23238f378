-- Read-only views for people (the dashboard): cheap, indexed lookups only.

-- name: view_state_counts
-- One part per partial index that holds those states (no index holds every open state):
-- jobtrail_tasks_queued_kind (every kind is a non-empty name), jobtrail_tasks_held,
-- jobtrail_tasks_settled_kind.
SELECT state, COUNT(*) AS n FROM jobtrail_tasks
WHERE state = 'queued' AND kind <> ''
GROUP BY state
UNION ALL
SELECT state, COUNT(*) AS n FROM jobtrail_tasks
WHERE state IN ('leased', 'cancel_requested')
GROUP BY state
UNION ALL
SELECT state, COUNT(*) AS n FROM jobtrail_tasks
WHERE state IN ('awaiting_receipt', 'waiting')
  AND state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                'cancel_requested')
GROUP BY state;

-- name: view_dead_count
SELECT COUNT(*) AS n FROM jobtrail_tasks WHERE state = 'dead' AND dismissed_at IS NULL;

-- name: view_task_by_key
-- Uses the unique (tenant, kind, idempotency_key) index: one point lookup per kind.
SELECT * FROM jobtrail_tasks
WHERE tenant = %(tenant)s AND kind = %(kind)s AND idempotency_key = %(key)s;

-- name: view_activity
-- Arrivals (enqueued or replayed: work that entered the queue) and completions (terminal outcomes) per queue and bucket since since.
-- start: read from there instead (a later time: the activity bound), buckets still from since.
-- The log table's rows, and the enqueued transitions on the task rows (0027) through the id
-- marks (as stats_reasons).
SELECT x.queue,
       floor(extract(epoch FROM (x.at - %(since)s::timestamptz)) / %(bucket)s)::int AS bucket,
       COUNT(*) FILTER (WHERE x.reason IN ('enqueued', 'replayed')) AS arrivals,
       COUNT(*) FILTER (WHERE x.reason NOT IN ('enqueued', 'replayed')) AS completions
FROM (
    SELECT t.queue, x.at, x.reason
    FROM jobtrail_transition_log x JOIN jobtrail_tasks t ON t.id = x.task_id
    WHERE x.at >= COALESCE(%(start)s::timestamptz, %(since)s::timestamptz)
      AND (x.reason IN ('enqueued', 'replayed')
           OR (x.to_state IN ('succeeded', 'cancelled', 'dead')
               AND x.reason NOT IN ('dismissed', 'correction')))
    UNION ALL
    SELECT t.queue, t.created_at, 'enqueued'
    FROM jobtrail_tasks t
    WHERE t.id > COALESCE((SELECT m.last_id FROM jobtrail_id_marks m
                             WHERE m.at <= COALESCE(%(start)s::timestamptz, %(since)s::timestamptz) ORDER BY m.at DESC LIMIT 1), 0)
      -- a range of ids: the planner then reads it through the primary key
      AND t.id <= (SELECT last_value FROM jobtrail_tasks_id_seq)
      AND t.enq_actor IS NOT NULL
      AND t.created_at >= COALESCE(%(start)s::timestamptz, %(since)s::timestamptz)) x
GROUP BY 1, 2;

-- name: view_tasks_by_ids
-- ids is a JSON array of task ids.
SELECT * FROM jobtrail_tasks
WHERE id IN (SELECT jsonb_array_elements_text(%(ids)s::jsonb)::bigint);

-- name: view_counts_between
-- /metrics counters: what the log gained in (after, upto], through the (at) index, so the cost
-- follows the rows appended since the last scrape, never the size of the log.
-- The enqueued transitions on the task rows (0027) through the id marks (as stats_reasons).
SELECT queue, kind, reason, to_state, SUM(n)::bigint AS n FROM (
    SELECT t.queue, t.kind, x.reason, x.to_state, COUNT(*) AS n
    FROM jobtrail_transition_log x JOIN jobtrail_tasks t ON t.id = x.task_id
    WHERE x.at > %(after)s::timestamptz AND x.at <= %(upto)s::timestamptz
    GROUP BY t.queue, t.kind, x.reason, x.to_state
    UNION ALL
    SELECT t.queue, t.kind, 'enqueued', t.enq_state, COUNT(*)
    FROM jobtrail_tasks t
    WHERE t.id > COALESCE((SELECT m.last_id FROM jobtrail_id_marks m
                             WHERE m.at <= %(after)s::timestamptz ORDER BY m.at DESC LIMIT 1), 0)
      -- a range of ids: the planner then reads it through the primary key
      AND t.id <= (SELECT last_value FROM jobtrail_tasks_id_seq)
      AND t.enq_actor IS NOT NULL
      AND t.created_at > %(after)s::timestamptz AND t.created_at <= %(upto)s::timestamptz
    GROUP BY t.queue, t.kind, t.enq_state) u
GROUP BY queue, kind, reason, to_state;

-- name: view_waits_between
-- Queue wait (claimed − due) of the claims in (after, upto].
SELECT t.queue, t.kind, (x.data ->> 'waited')::float8 AS seconds
FROM jobtrail_transition_log x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at > %(after)s::timestamptz AND x.at <= %(upto)s::timestamptz
  AND x.reason = 'claimed';

-- name: view_runs_between
-- Run time of the attempts that ended in (after, upto]: outcome − the claim just before it
-- (the rule of stats_runs).
SELECT t.queue, t.kind, EXTRACT(EPOCH FROM x.at - c.at)::float8 AS seconds
FROM jobtrail_transition_log x
CROSS JOIN LATERAL (
    SELECT c.at FROM jobtrail_transition_log c
    WHERE c.task_id = x.task_id AND c.seq < x.seq AND c.reason = 'claimed'
    ORDER BY c.seq DESC LIMIT 1
) c
JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at > %(after)s::timestamptz AND x.at <= %(upto)s::timestamptz
  AND x.from_state IN ('leased', 'cancel_requested')
  AND x.reason NOT IN ('cancel_requested', 'lease_expired', 'lease_expired_cancelled',
                       'lease_expired_effect_uncertain', 'manual_fix')
  AND x.from_state <> x.to_state;

-- name: view_state_counts_upto
-- view_state_counts with each state counted up to upto (an index-only walk of at most upto
-- entries per state, each through the partial index that holds it): the dashboard's header
-- shows "upto or more" instead of waiting on a million-row count.
SELECT 'queued' AS state,
       (SELECT COUNT(*) FROM (SELECT 1 FROM jobtrail_tasks
                              WHERE state = 'queued' AND kind <> '' LIMIT %(upto)s) c) AS n
UNION ALL
SELECT 'leased', (SELECT COUNT(*) FROM (SELECT 1 FROM jobtrail_tasks
                                        WHERE state = 'leased' LIMIT %(upto)s) c)
UNION ALL
SELECT 'cancel_requested', (SELECT COUNT(*) FROM (SELECT 1 FROM jobtrail_tasks
                                                  WHERE state = 'cancel_requested'
                                                  LIMIT %(upto)s) c)
UNION ALL
SELECT 'awaiting_receipt', (SELECT COUNT(*) FROM (SELECT 1 FROM jobtrail_tasks
                                                  WHERE state = 'awaiting_receipt'
                                                  LIMIT %(upto)s) c)
UNION ALL
SELECT 'waiting', (SELECT COUNT(*) FROM (SELECT 1 FROM jobtrail_tasks
                                         WHERE state = 'waiting' LIMIT %(upto)s) c);

-- name: view_dead_count_upto
SELECT COUNT(*) AS n FROM (SELECT 1 FROM jobtrail_tasks WHERE state = 'dead'
                           AND dismissed_at IS NULL LIMIT %(upto)s) c;

-- name: view_state_kinds
-- The kinds that have tasks in one settled state (any but queued and leased): a skip scan of
-- jobtrail_tasks_settled_kind (one probe per kind, not one row per task). The states it holds
-- are written out so that the partial index serves a plan made for any value.
WITH RECURSIVE k(kind) AS (
    (SELECT kind FROM jobtrail_tasks WHERE state = %(state)s::text
       AND state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                     'cancel_requested')
     ORDER BY kind LIMIT 1)
    UNION ALL
    SELECT (SELECT t.kind FROM jobtrail_tasks t
            WHERE t.state = %(state)s::text AND t.kind > k.kind
              AND t.state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                              'cancel_requested')
            ORDER BY t.kind LIMIT 1)
    FROM k WHERE k.kind IS NOT NULL
)
SELECT kind FROM k WHERE kind IS NOT NULL;

-- name: view_task_list_state_kind
-- task_list for one settled state and kind, newest first through jobtrail_tasks_settled_kind
-- (a page of one state is the newest of these over its kinds: store.reads). State and kind
-- are written as ranges of one value and ordered on: with "state = $1 AND kind = $2 ORDER BY
-- id DESC" the planner walks the primary key backwards filtering on them, guessing it finds a
-- page at once (it does not know the newest million tasks are all queued: 0.3-0.5 s before the
-- first succeeded one); this way only the index gives the order, in custom and generic plans
-- alike.
SELECT * FROM jobtrail_tasks
WHERE state >= %(state)s::text AND state <= %(state)s::text
  AND state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                'cancel_requested')
  AND kind >= %(kind)s::text AND kind <= %(kind)s::text
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
ORDER BY state DESC, kind DESC, id DESC
LIMIT %(limit)s;

-- name: view_task_list_queued
-- task_list for the queued tasks (held by no index in id order: the claim would write it),
-- newest first, in two reads (store.reads): the primary key backwards over the newest ids
-- above floor_id, where a backlog's queued tasks are; and, when that did not fill the page,
-- every queued task through jobtrail_tasks_queued_kind (every kind is a non-empty name),
-- sorted (view_task_list_queued_all).
SELECT * FROM jobtrail_tasks
WHERE state = 'queued'
  AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
  AND id > %(floor_id)s::bigint
ORDER BY id DESC
LIMIT %(limit)s;

-- name: view_task_list_queued_all
SELECT * FROM jobtrail_tasks
WHERE state = 'queued' AND kind <> ''
  AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
ORDER BY id + 0 DESC
LIMIT %(limit)s;

-- name: view_task_list_leased
-- task_list for the leased tasks (at most the workers' concurrency), through
-- jobtrail_tasks_held.
SELECT * FROM jobtrail_tasks
WHERE state = 'leased'
  AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
ORDER BY id + 0 DESC
LIMIT %(limit)s;
