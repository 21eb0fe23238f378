-- Replay runs, the effects a replay would perform again, and dead-letter evidence.

-- name: replay_run_insert
INSERT INTO jobtrail_replay_runs (actor, note, data, batch_size, stop_after_failures, total,
                                  state, created_at, updated_at, driver, detached, heartbeat_at)
VALUES (:actor, :note, :data, :batch_size, :stop_after_failures, :total, 'running',
        round((julianday('now') - 2440587.5) * 86400.0, 3),
        round((julianday('now') - 2440587.5) * 86400.0, 3),
        :driver, :detached,
        round((julianday('now') - 2440587.5) * 86400.0, 3))
RETURNING id;

-- name: replay_run_tasks_insert
-- :ids is a JSON array of task ids in the order the run replays them (position 1, 2, ...).
INSERT INTO jobtrail_replay_run_tasks (run_id, task_id, position)
SELECT :run_id, CAST(value AS INTEGER), key + 1 FROM json_each(:ids);

-- name: replay_run_tasks_next
-- The run's next tasks to replay, after position :after (what it has handled so far).
SELECT position, task_id FROM jobtrail_replay_run_tasks
WHERE run_id = :run_id AND position > :after
ORDER BY position
LIMIT :limit;

-- name: replay_run_task_mark
UPDATE jobtrail_replay_run_tasks SET replayed_seq = :seq
WHERE run_id = :run_id AND position = :position;

-- name: replay_run_progress
-- Only the run's current driver moves it on, and only while it runs (see PostgreSQL's).
UPDATE jobtrail_replay_runs
SET replayed = replayed + :replayed, skipped = skipped + :skipped,
    batches = batches + :batches,
    updated_at = round((julianday('now') - 2440587.5) * 86400.0, 3),
    heartbeat_at = round((julianday('now') - 2440587.5) * 86400.0, 3),
    batch_at = CASE WHEN :batches > 0 THEN round((julianday('now') - 2440587.5) * 86400.0, 3)
               ELSE batch_at END
WHERE id = :id AND state = 'running' AND driver = :driver;

-- name: replay_run_beat
UPDATE jobtrail_replay_runs SET heartbeat_at = round((julianday('now') - 2440587.5) * 86400.0, 3)
WHERE id = :id AND state = 'running' AND driver = :driver;

-- name: replay_run_take
UPDATE jobtrail_replay_runs SET driver = :driver,
    heartbeat_at = round((julianday('now') - 2440587.5) * 86400.0, 3)
WHERE id = :id AND state = 'running' AND detached
  AND (driver IS NULL OR heartbeat_at IS NULL
       OR heartbeat_at < round((julianday('now') - 2440587.5) * 86400.0, 3) - :stale);

-- name: replay_run_release
UPDATE jobtrail_replay_runs SET driver = NULL
WHERE id = :id AND state = 'running' AND driver = :driver;

-- name: replay_run_get
SELECT r.*, round((julianday('now') - 2440587.5) * 86400.0, 3) - r.batch_at AS batch_age,
       round((julianday('now') - 2440587.5) * 86400.0, 3) - r.updated_at AS progress_age
FROM jobtrail_replay_runs r
WHERE r.id = :id;

-- name: replay_run_due
SELECT r.id, r.detached
FROM jobtrail_replay_runs r
WHERE r.state = 'running'
  AND ((r.detached AND r.driver IS NULL)
       OR r.heartbeat_at IS NULL
       OR r.heartbeat_at < round((julianday('now') - 2440587.5) * 86400.0, 3) - :stale)
ORDER BY r.id
LIMIT :limit;

-- name: replay_run_interrupt
UPDATE jobtrail_replay_runs
SET state = 'stopped', stop_code = 'interrupted', died_again = :died, stopped_by = :by,
    finished_at = round((julianday('now') - 2440587.5) * 86400.0, 3),
    updated_at = round((julianday('now') - 2440587.5) * 86400.0, 3)
WHERE id = :id AND state = 'running' AND NOT detached
  AND (heartbeat_at IS NULL OR heartbeat_at < round((julianday('now') - 2440587.5) * 86400.0, 3) - :stale);

-- name: replay_run_observe
-- What became of the run's replayed tasks: how many went dead again after the run's replay,
-- and how many are still on their way (queued, leased, waiting for children). A task awaiting
-- a receipt has been run and counts as settled (its receipt may still fail it: counted then).
SELECT COALESCE(SUM(CASE WHEN EXISTS (
           SELECT 1 FROM jobtrail_transition_log x
           WHERE x.task_id = r.task_id AND x.seq > r.replayed_seq
             AND x.to_state = 'dead' AND x.from_state <> 'dead') THEN 1 ELSE 0 END), 0) AS died,
       COALESCE(SUM(CASE WHEN t.state IN ('queued', 'leased', 'cancel_requested', 'waiting')
                    THEN 1 ELSE 0 END), 0) AS open
FROM jobtrail_replay_run_tasks r
LEFT JOIN jobtrail_tasks t ON t.id = r.task_id
WHERE r.run_id = :id AND r.replayed_seq IS NOT NULL;

-- name: replay_run_finish
UPDATE jobtrail_replay_runs
SET state = :state, stop_code = :stop_code, died_again = :died, stopped_by = :driver,
    finished_at = round((julianday('now') - 2440587.5) * 86400.0, 3),
    updated_at = round((julianday('now') - 2440587.5) * 86400.0, 3)
WHERE id = :id AND state = 'running' AND driver = :driver;

-- name: replay_run_list
-- Newest first, with how many of each run's replayed tasks are dead again now (live), and the
-- seconds since its driver's last beat (a detached run's: since a sweep last took a step).
SELECT r.*,
       (SELECT COUNT(*) FROM jobtrail_replay_run_tasks rt
        WHERE rt.run_id = r.id AND rt.replayed_seq IS NOT NULL
          AND EXISTS (SELECT 1 FROM jobtrail_transition_log x
                      WHERE x.task_id = rt.task_id AND x.seq > rt.replayed_seq
                        AND x.to_state = 'dead' AND x.from_state <> 'dead')) AS died_now,
       round((julianday('now') - 2440587.5) * 86400.0, 3) - r.heartbeat_at AS beat_age
FROM jobtrail_replay_runs r
WHERE (:id IS NULL OR r.id = :id)
ORDER BY r.id DESC
LIMIT :limit;

-- name: effect_list_for_tasks
-- The effects recorded by some tasks (:ids a JSON array): confirmed ones a replay skips, the
-- rest (an intent without a confirmed receipt) it performs again.
SELECT s.task_id, s.name, s.status, s.effect_key, s.result, s.attempt, s.created_at,
       s.confirmed_at
FROM jobtrail_steps s
WHERE s.is_effect
  AND s.task_id IN (SELECT CAST(value AS INTEGER) FROM json_each(:ids))
ORDER BY s.task_id, s.created_at, s.name;

-- name: dead_tasks_evidence
-- The newest :per_group dead tasks of each (reason, kind) group, with their evidence (see the
-- PostgreSQL query). The window ranks the dead tasks; the picked ones' evidence is read from
-- their rows (0017) or, for a task older than 0017, through their (task_id, seq) index.
SELECT t.id, t.kind, t.queue, t.tenant, t.last_reason AS reason,
       t.last_error_category AS category, t.last_error AS error, t.attempts, t.max_attempts,
       t.replay_count,
       t.idempotency_key, t.payload_hash, t.receipt_id, t.finished_at,
       CASE WHEN t.evidence_on_row THEN t.first_failure_at ELSE
-- include: dead_log_first_failure
       END AS first_failure,
       CASE WHEN t.evidence_on_row THEN t.finished_at ELSE
           (SELECT MAX(x.at) FROM jobtrail_transition_log x
            WHERE x.task_id = t.id AND x.from_state IS NOT x.to_state
              AND (x.error_category IS NOT NULL OR x.to_state = 'dead'))
       END AS last_failure,
       CASE WHEN t.evidence_on_row THEN t.claimed_version ELSE
-- include: dead_log_version
       END AS version
FROM (SELECT d.id, ROW_NUMBER() OVER (PARTITION BY d.last_reason, d.kind
                                      ORDER BY d.finished_at DESC, d.id DESC) AS rank
      FROM jobtrail_tasks d
      WHERE d.state = 'dead' AND d.dismissed_at IS NULL
        AND (:reason IS NULL OR d.last_reason = :reason)
        AND (:kind IS NULL OR d.kind = :kind)) r
JOIN jobtrail_tasks t ON t.id = r.id
WHERE r.rank <= :per_group
ORDER BY t.last_reason, t.kind, r.rank;
