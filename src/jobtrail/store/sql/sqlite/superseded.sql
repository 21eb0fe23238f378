-- Replay from a step (SQLite): the recorded outcomes a replay forgets are moved, as they were,
-- to jobtrail_steps_superseded, beside the replay that superseded them.

-- name: step_list_recorded
-- A task's steps and effects in the order they were recorded: rows from before migration 22
-- (no call_order) first, by the time each was first recorded (rowid breaks a tie within a
-- millisecond), then by the handler's call order.
SELECT * FROM jobtrail_steps WHERE task_id = :id
ORDER BY call_order IS NOT NULL, call_order, created_at, rowid;

-- name: step_supersede
INSERT INTO jobtrail_steps_superseded
    (task_id, name, is_effect, status, effect_key, result, attempt, error, created_at,
     confirmed_at, record, call_order, replay_seq, position, superseded_at)
SELECT task_id, name, is_effect, status, effect_key, result, attempt, error, created_at,
       confirmed_at, record, call_order, :replay_seq, :position, round((julianday('now') - 2440587.5) * 86400.0, 3)
FROM jobtrail_steps WHERE task_id = :id AND name = :name;

-- name: step_forget
DELETE FROM jobtrail_steps WHERE task_id = :id AND name = :name;

-- name: step_superseded_list
SELECT * FROM jobtrail_steps_superseded WHERE task_id = :id ORDER BY id;

-- name: prune_steps_superseded
DELETE FROM jobtrail_steps_superseded WHERE task_id IN (SELECT value FROM json_each(:ids));
