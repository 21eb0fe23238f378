-- Durable handlers seen from outside (PostgreSQL): how many are suspended.

-- name: stats_suspended
-- The suspended durable handlers per queue, kind and what they wait for (wait_kind: sleep,
-- event, children), read from jobtrail_tasks_suspended alone.
SELECT queue, kind, wait_kind, COUNT(*) AS n FROM jobtrail_tasks
WHERE ((state = 'queued' AND last_reason = 'sleeping')
       OR (state = 'waiting' AND last_reason IN ('waiting_for_event', 'waiting_for_children')))
  AND wait_kind IS NOT NULL
GROUP BY queue, kind, wait_kind;
