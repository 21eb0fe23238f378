-- Live workers: the heartbeat rows of jobtrail_workers (migration 0020) and the
-- reads that compare due work with what the live workers take.

-- name: worker_beat
-- A worker's heartbeat, sent by its sweep every few seconds: the row is inserted at the first
-- beat (and again if it was forgotten while the worker was cut off from the store), later
-- beats move last_seen_at only. The same statement forgets the workers silent past their own
-- stale_after (a handful of rows: one per worker process), so no other pass is needed.
WITH forgotten AS (
    DELETE FROM jobtrail_workers
    WHERE id <> %(id)s AND last_seen_at < now() - make_interval(secs => stale_after)
)
INSERT INTO jobtrail_workers (id, host, pid, version, queues, kinds, concurrency, stale_after)
VALUES (%(id)s, %(host)s, %(pid)s, %(version)s, %(queues)s::jsonb, %(kinds)s::jsonb,
        %(concurrency)s, %(stale_after)s::float8)
ON CONFLICT (id) DO UPDATE SET last_seen_at = now();

-- name: worker_forget
-- A stopping worker's last word: its row goes.
DELETE FROM jobtrail_workers WHERE id = %(id)s;

-- name: worker_list
-- The live workers, oldest first: a row silent past its stale_after is not live even before a
-- beat deletes it (a store whose workers all died keeps their rows until the next one beats).
SELECT w.id, w.host, w.pid, w.version, w.queues, w.kinds, w.concurrency, w.started_at,
       w.last_seen_at, w.stale_after, now() AS db_now
FROM jobtrail_workers w
WHERE w.last_seen_at >= now() - make_interval(secs => w.stale_after)
ORDER BY w.started_at, w.id;

-- name: worker_held_tasks
-- Who holds what right now: the tasks leased to any owner (the partial index
-- jobtrail_tasks_lease holds exactly these rows, as many as the workers' slots).
SELECT id, lease_owner, tenant FROM jobtrail_tasks
WHERE state IN ('leased', 'cancel_requested')
ORDER BY id;

-- name: worker_due_groups
-- The due work by queue and kind (doctor: is there a live worker for each?). Workflow steps
-- held back until their previous step succeeds have a run_at in the year 9999: not due.
SELECT queue, kind, count(*) AS n FROM jobtrail_tasks
WHERE state = 'queued' AND run_at <= now()
GROUP BY queue, kind
ORDER BY queue, kind;
