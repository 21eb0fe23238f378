-- Read-only views for people (the dashboard): cheap, indexed lookups only.

-- name: view_state_counts
-- One part per partial index that holds those states (no index holds every open state), each
-- index's WHERE written out as SQLite matches it: jobtrail_tasks_queued_kind,
-- jobtrail_tasks_held, jobtrail_tasks_settled_kind.
SELECT state, COUNT(*) AS n FROM jobtrail_tasks
WHERE state = 'queued'
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
WHERE tenant = :tenant AND kind = :kind AND idempotency_key = :key;

-- name: view_activity
-- Arrivals (enqueued or replayed: work that entered the queue) and completions (terminal outcomes) per queue and bucket since :since.
-- start: read from there instead (a later time: the activity bound), buckets still from since.
SELECT t.queue, CAST((x.at - :since) / :bucket AS INTEGER) AS bucket,
       SUM(CASE WHEN x.reason IN ('enqueued', 'replayed') THEN 1 ELSE 0 END) AS arrivals,
       SUM(CASE WHEN x.reason NOT IN ('enqueued', 'replayed') THEN 1 ELSE 0 END) AS completions
FROM jobtrail_transitions x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= COALESCE(:start, :since)
  AND (x.reason IN ('enqueued', 'replayed')
       OR (x.to_state IN ('succeeded', 'cancelled', 'dead')
           AND x.reason NOT IN ('dismissed', 'correction')))
GROUP BY t.queue, CAST((x.at - :since) / :bucket AS INTEGER);

-- name: view_tasks_by_ids
-- :ids is a JSON array of task ids.
SELECT * FROM jobtrail_tasks WHERE id IN (SELECT value FROM json_each(:ids));

-- name: view_counts_between
-- /metrics counters: what the log gained in (after, upto], through the (at) index, so the cost
-- follows the rows appended since the last scrape, never the size of the log.
SELECT t.queue, t.kind, x.reason, x.to_state, COUNT(*) AS n
FROM jobtrail_transitions x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at > :after AND x.at <= :upto
GROUP BY t.queue, t.kind, x.reason, x.to_state;

-- name: view_waits_between
-- Queue wait (claimed − due) of the claims in (after, upto].
SELECT t.queue, t.kind, json_extract(x.data, '$.waited') AS seconds
FROM jobtrail_transition_log x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at > :after AND x.at <= :upto AND x.reason = 'claimed';

-- name: view_runs_between
-- Run time of the attempts that ended in (after, upto]: outcome − the claim just before it
-- (the rule of stats_runs).
SELECT t.queue, t.kind,
       x.at - (SELECT c.at FROM jobtrail_transition_log c
               WHERE c.task_id = x.task_id AND c.seq < x.seq AND c.reason = 'claimed'
               ORDER BY c.seq DESC LIMIT 1) AS seconds
FROM jobtrail_transition_log x
JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at > :after AND x.at <= :upto
  AND x.from_state IN ('leased', 'cancel_requested')
  AND x.reason NOT IN ('cancel_requested', 'lease_expired', 'lease_expired_cancelled',
                       'lease_expired_effect_uncertain', 'manual_fix')
  AND x.from_state <> x.to_state;

-- name: view_state_counts_upto
-- view_state_counts with each state counted up to upto (an index-only walk of at most upto
-- entries per state, each through the partial index that holds it): the dashboard's header
-- shows "upto or more" instead of waiting on a million-row count.
SELECT 'queued' AS state,
       (SELECT COUNT(*) FROM (SELECT 1 FROM jobtrail_tasks WHERE state = 'queued'
                              LIMIT :upto)) AS n
UNION ALL
SELECT 'leased', (SELECT COUNT(*) FROM (SELECT 1 FROM jobtrail_tasks
                                        WHERE state = 'leased'
                                          AND state IN ('leased', 'cancel_requested')
                                        LIMIT :upto))
UNION ALL
SELECT s.state, (SELECT COUNT(*) FROM (SELECT 1 FROM jobtrail_tasks t
                                       WHERE t.state = s.state
                                         AND t.state IN ('succeeded', 'cancelled', 'dead',
                                                         'waiting', 'awaiting_receipt',
                                                         'cancel_requested')
                                       LIMIT :upto))
FROM (SELECT 'cancel_requested' AS state UNION ALL SELECT 'awaiting_receipt'
      UNION ALL SELECT 'waiting') s;

-- name: view_dead_count_upto
SELECT COUNT(*) AS n FROM (SELECT 1 FROM jobtrail_tasks WHERE state = 'dead'
                           AND dismissed_at IS NULL LIMIT :upto) c;

-- name: view_state_kinds
-- The kinds that have tasks in one settled state (any but queued and leased): a skip scan of
-- jobtrail_tasks_settled_kind (one probe per kind, not one row per task); its WHERE is written
-- out as SQLite matches it.
WITH RECURSIVE k(kind) AS (
    SELECT * FROM (SELECT kind FROM jobtrail_tasks WHERE state = :state
                     AND state IN ('succeeded', 'cancelled', 'dead', 'waiting',
                                   'awaiting_receipt', 'cancel_requested')
                   ORDER BY kind LIMIT 1)
    UNION ALL
    SELECT (SELECT t.kind FROM jobtrail_tasks t
            WHERE t.state = :state AND t.kind > k.kind
              AND t.state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                              'cancel_requested')
            ORDER BY t.kind LIMIT 1)
    FROM k WHERE k.kind IS NOT NULL
)
SELECT kind FROM k WHERE kind IS NOT NULL;

-- name: view_task_list_state_kind
-- task_list for one settled state and kind, newest first through jobtrail_tasks_settled_kind
-- (a page of one state is the newest of these over its kinds: store.reads).
SELECT * FROM jobtrail_tasks
WHERE state = :state AND kind = :kind
  AND state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                'cancel_requested')
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant IS NULL OR tenant = :tenant)
  AND id < COALESCE(:before_id, 9223372036854775807)
ORDER BY id DESC
LIMIT :limit;

-- name: view_task_list_queued
-- task_list for the queued tasks (held by no index in id order: the claim would write it),
-- newest first, in two reads (store.reads): the primary key backwards over the newest ids
-- above floor_id (``+state``: not jobtrail_tasks_queued_kind, which would read every queued
-- task), where a backlog's queued tasks are; and, when that did not fill the page, every
-- queued task through jobtrail_tasks_queued_kind, sorted (floor_id NULL).
SELECT * FROM jobtrail_tasks
WHERE +state = 'queued'
  AND (:kind IS NULL OR kind = :kind)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant IS NULL OR tenant = :tenant)
  AND id < COALESCE(:before_id, 9223372036854775807)
  AND id > :floor_id
ORDER BY id DESC
LIMIT :limit;

-- name: view_task_list_queued_all
SELECT * FROM jobtrail_tasks
WHERE state = 'queued'
  AND (:kind IS NULL OR kind = :kind)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant IS NULL OR tenant = :tenant)
  AND +id < COALESCE(:before_id, 9223372036854775807)
ORDER BY +id DESC
LIMIT :limit;

-- name: view_task_list_leased
-- task_list for the leased tasks (at most the workers' concurrency), through
-- jobtrail_tasks_held (``+id``: not the primary key, which would read every task).
SELECT * FROM jobtrail_tasks
WHERE state = 'leased' AND state IN ('leased', 'cancel_requested')
  AND (:kind IS NULL OR kind = :kind)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant IS NULL OR tenant = :tenant)
  AND +id < COALESCE(:before_id, 9223372036854775807)
ORDER BY +id DESC
LIMIT :limit;
