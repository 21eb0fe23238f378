-- Cron schedules and windows (SQLite). See jobtrail/scheduler.py.

-- name: cron_schedules
SELECT s.kind, s.cron, s.tz, s.queue, s.catch_up, s.on_paused, s.anchor_at,
       (SELECT MAX(w.window_at) FROM jobtrail_cron_windows w WHERE w.kind = s.kind)
           AS last_window
FROM jobtrail_cron_schedules s
ORDER BY s.kind;

-- name: cron_schedule_get
SELECT s.kind, s.cron, s.tz, s.anchor_at,
       (SELECT MAX(w.window_at) FROM jobtrail_cron_windows w WHERE w.kind = s.kind)
           AS last_window
FROM jobtrail_cron_schedules s
WHERE s.kind = :kind;

-- name: cron_schedule_upsert
-- A changed expression or time zone starts afresh from now (anchor_at): the old expression's
-- missed windows are not caught up under the new one.
INSERT INTO jobtrail_cron_schedules (kind, cron, tz, queue, catch_up, on_paused, anchor_at,
                                     updated_at)
VALUES (:kind, :cron, :tz, :queue, :catch_up, :on_paused,
        ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0))
ON CONFLICT (kind) DO UPDATE
SET anchor_at = CASE WHEN jobtrail_cron_schedules.cron = excluded.cron
                          AND jobtrail_cron_schedules.tz = excluded.tz
                     THEN jobtrail_cron_schedules.anchor_at ELSE excluded.anchor_at END,
    cron = excluded.cron, tz = excluded.tz, queue = excluded.queue,
    catch_up = excluded.catch_up, on_paused = excluded.on_paused,
    updated_at = excluded.updated_at;

-- name: cron_window_insert
-- The (kind, window_at) primary key is the arbiter: a window another scheduler recorded first
-- returns no row, and this scheduler does nothing for it.
INSERT INTO jobtrail_cron_windows (kind, window_at, state, reason, earlier_skipped, recorded_at)
VALUES (:kind, :window_at, :state, :reason, :earlier_skipped,
        ((julianday('now') - 2440587.5) * 86400.0))
ON CONFLICT (kind, window_at) DO NOTHING
RETURNING kind;

-- name: cron_window_set_task
UPDATE jobtrail_cron_windows SET task_id = :task_id
WHERE kind = :kind AND window_at = :window_at;

-- name: cron_window_list
SELECT kind, window_at, state, reason, task_id, earlier_skipped, recorded_at
FROM jobtrail_cron_windows
WHERE kind = :kind AND (:state IS NULL OR state = :state)
ORDER BY window_at DESC
LIMIT :limit;
