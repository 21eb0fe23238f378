-- Read-only views for people (the dashboard): cheap, indexed lookups only.

-- name: view_state_counts
SELECT state, COUNT(*) AS n FROM jobtrail_tasks
WHERE state IN ('queued', 'leased', 'cancel_requested', 'awaiting_receipt', 'waiting')
GROUP BY state;

-- name: view_dead_count
SELECT COUNT(*) AS n FROM jobtrail_tasks WHERE state = 'dead' AND dismissed_at IS NULL;

-- name: view_task_by_key
-- Uses the unique (tenant, kind, idempotency_key) index: one point lookup per kind.
SELECT * FROM jobtrail_tasks
WHERE tenant = :tenant AND kind = :kind AND idempotency_key = :key;

-- name: view_activity
-- Arrivals (enqueued or replayed: work that entered the queue) and completions (terminal outcomes) per queue and bucket since :since.
SELECT t.queue, CAST((x.at - :since) / :bucket AS INTEGER) AS bucket,
       SUM(CASE WHEN x.reason IN ('enqueued', 'replayed') THEN 1 ELSE 0 END) AS arrivals,
       SUM(CASE WHEN x.reason NOT IN ('enqueued', 'replayed') THEN 1 ELSE 0 END) AS completions
FROM jobtrail_transitions x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= :since
  AND (x.reason IN ('enqueued', 'replayed')
       OR (x.to_state IN ('succeeded', 'cancelled', 'dead')
           AND x.reason NOT IN ('dismissed', 'correction')))
GROUP BY t.queue, CAST((x.at - :since) / :bucket AS INTEGER);

-- name: view_tasks_by_ids
-- :ids is a JSON array of task ids.
SELECT * FROM jobtrail_tasks WHERE id IN (SELECT value FROM json_each(:ids));
