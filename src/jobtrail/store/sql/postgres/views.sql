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
WHERE tenant = %(tenant)s AND kind = %(kind)s AND idempotency_key = %(key)s;

-- name: view_activity
-- Arrivals (enqueued or replayed: work that entered the queue) and completions (terminal outcomes) per queue and bucket since since.
SELECT t.queue,
       floor(extract(epoch FROM (x.at - %(since)s::timestamptz)) / %(bucket)s)::int AS bucket,
       COUNT(*) FILTER (WHERE x.reason IN ('enqueued', 'replayed')) AS arrivals,
       COUNT(*) FILTER (WHERE x.reason NOT IN ('enqueued', 'replayed')) AS completions
FROM jobtrail_transitions x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= %(since)s::timestamptz
  AND (x.reason IN ('enqueued', 'replayed')
       OR (x.to_state IN ('succeeded', 'cancelled', 'dead')
           AND x.reason NOT IN ('dismissed', 'correction')))
GROUP BY 1, 2;

-- name: view_tasks_by_ids
-- ids is a JSON array of task ids.
SELECT * FROM jobtrail_tasks
WHERE id IN (SELECT jsonb_array_elements_text(%(ids)s::jsonb)::bigint);
