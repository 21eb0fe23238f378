-- Replay from a step (PostgreSQL): the recorded outcomes a replay forgets are moved, as they
-- were, to jobtrail_steps_superseded, beside the replay that superseded them.

-- name: step_list_recorded
-- A task's steps and effects in the order they were recorded: rows from before migration 22
-- (no call_order) first, by the time each was first recorded (each in its own transaction:
-- now() differs), then by the handler's call order.
SELECT * FROM jobtrail_steps WHERE task_id = %(id)s
ORDER BY call_order IS NOT NULL, call_order, created_at, name;

-- name: step_supersede
INSERT INTO jobtrail_steps_superseded
    (task_id, name, is_effect, status, effect_key, result, attempt, error, created_at,
     confirmed_at, record, call_order, replay_seq, position, superseded_at)
SELECT task_id, name, is_effect, status, effect_key, result, attempt, error, created_at,
       confirmed_at, record, call_order, %(replay_seq)s, %(position)s, now()
FROM jobtrail_steps WHERE task_id = %(id)s AND name = %(name)s;

-- name: step_forget
DELETE FROM jobtrail_steps WHERE task_id = %(id)s AND name = %(name)s;

-- name: step_superseded_list
SELECT * FROM jobtrail_steps_superseded WHERE task_id = %(id)s ORDER BY id;

-- name: prune_steps_superseded
DELETE FROM jobtrail_steps_superseded WHERE task_id = ANY(%(ids)s::bigint[]);
