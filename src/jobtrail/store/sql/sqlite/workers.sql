-- Live workers on SQLite: see PostgreSQL's workers.sql for what each does. Times
-- are epoch seconds; queues and kinds are JSON text.

-- name: worker_beat
-- SQLite's upsert takes no CTE before it: the forgetting is its own statement
-- (worker_forget_stale), run in the same transaction by the driver.
INSERT INTO jobtrail_workers (id, host, pid, version, queues, kinds, concurrency, started_at,
                              last_seen_at, stale_after)
VALUES (:id, :host, :pid, :version, :queues, :kinds, :concurrency,
        round((julianday('now') - 2440587.5) * 86400.0, 3),
        round((julianday('now') - 2440587.5) * 86400.0, 3), :stale_after)
ON CONFLICT (id) DO UPDATE
SET last_seen_at = round((julianday('now') - 2440587.5) * 86400.0, 3);

-- name: worker_forget_stale
DELETE FROM jobtrail_workers
WHERE id <> :id AND last_seen_at < round((julianday('now') - 2440587.5) * 86400.0, 3) - stale_after;

-- name: worker_forget
DELETE FROM jobtrail_workers WHERE id = :id;

-- name: worker_list
SELECT w.id, w.host, w.pid, w.version, w.queues, w.kinds, w.concurrency, w.started_at,
       w.last_seen_at, w.stale_after, round((julianday('now') - 2440587.5) * 86400.0, 3) AS db_now
FROM jobtrail_workers w
WHERE w.last_seen_at >= round((julianday('now') - 2440587.5) * 86400.0, 3) - w.stale_after
ORDER BY w.started_at, w.id;

-- name: worker_held_tasks
SELECT id, lease_owner, tenant FROM jobtrail_tasks
WHERE state IN ('leased', 'cancel_requested')
ORDER BY id;

-- name: worker_due_groups
SELECT queue, kind, count(*) AS n FROM jobtrail_tasks
WHERE state = 'queued' AND run_at <= round((julianday('now') - 2440587.5) * 86400.0, 3)
GROUP BY queue, kind
ORDER BY queue, kind;
