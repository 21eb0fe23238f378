-- Replay runs, the effects a replay would perform again, and dead-letter evidence.

-- name: replay_run_insert
-- :driver is the process that drives the run (a detached run's first step is taken by the
-- process that starts it, too); its heartbeat starts now.
INSERT INTO jobtrail_replay_runs (actor, note, data, batch_size, stop_after_failures, total,
                                  state, created_at, updated_at, driver, detached, heartbeat_at)
VALUES (%(actor)s, %(note)s, %(data)s::jsonb, %(batch_size)s, %(stop_after_failures)s,
        %(total)s, 'running', now(), now(), %(driver)s, %(detached)s, now())
RETURNING id;

-- name: replay_run_tasks_insert
-- :ids is a JSON array of task ids in the order the run replays them (position 1, 2, ...).
INSERT INTO jobtrail_replay_run_tasks (run_id, task_id, position)
SELECT %(run_id)s::bigint, v.task_id::bigint, v.ord::int
FROM jsonb_array_elements_text(%(ids)s::jsonb) WITH ORDINALITY AS v(task_id, ord);

-- name: replay_run_tasks_next
-- The run's next tasks to replay, after position :after (what it has handled so far).
SELECT position, task_id FROM jobtrail_replay_run_tasks
WHERE run_id = %(run_id)s AND position > %(after)s
ORDER BY position
LIMIT %(limit)s;

-- name: replay_run_task_mark
UPDATE jobtrail_replay_run_tasks SET replayed_seq = %(seq)s
WHERE run_id = %(run_id)s AND position = %(position)s;

-- name: replay_run_progress
-- Only the run's current driver moves it on, and only while it runs: a driver found stale and
-- stopped (or whose detached step was taken over) changes nothing, and the transaction that
-- replayed its task rolls back with it. Progress is a heartbeat; a finished batch (:batches 1)
-- starts its settle timeout (batch_at).
UPDATE jobtrail_replay_runs
SET replayed = replayed + %(replayed)s, skipped = skipped + %(skipped)s,
    batches = batches + %(batches)s, updated_at = now(), heartbeat_at = now(),
    batch_at = CASE WHEN %(batches)s::int > 0 THEN now() ELSE batch_at END
WHERE id = %(id)s AND state = 'running' AND driver = %(driver)s::text;

-- name: replay_run_beat
-- The driver is alive (it beats while it waits for a batch to settle or for its pace).
UPDATE jobtrail_replay_runs SET heartbeat_at = now()
WHERE id = %(id)s AND state = 'running' AND driver = %(driver)s::text;

-- name: replay_run_take
-- A sweeper takes a detached run's next step: nobody holds it, or its holder stopped beating.
UPDATE jobtrail_replay_runs SET driver = %(driver)s::text, heartbeat_at = now()
WHERE id = %(id)s AND state = 'running' AND detached
  AND (driver IS NULL OR heartbeat_at IS NULL
       OR heartbeat_at < now() - make_interval(secs => %(stale)s::float8));

-- name: replay_run_release
-- The end of a detached run's step: the next sweep, in any process, may take the next one.
UPDATE jobtrail_replay_runs SET driver = NULL
WHERE id = %(id)s AND state = 'running' AND driver = %(driver)s::text;

-- name: replay_run_get
-- One run with its ages on the database clock: since its latest batch was replayed (the settle
-- timeout) and since its last progress (a detached run's pace).
SELECT r.*, EXTRACT(EPOCH FROM now() - r.batch_at)::float8 AS batch_age,
       EXTRACT(EPOCH FROM now() - r.updated_at)::float8 AS progress_age
FROM jobtrail_replay_runs r
WHERE r.id = %(id)s;

-- name: replay_run_due
-- The running runs a sweep has to look at: detached runs nobody holds (or whose holder stopped
-- beating), and attached runs whose driver stopped beating :stale seconds ago.
SELECT r.id, r.detached
FROM jobtrail_replay_runs r
WHERE r.state = 'running'
  AND ((r.detached AND r.driver IS NULL)
       OR r.heartbeat_at IS NULL
       OR r.heartbeat_at < now() - make_interval(secs => %(stale)s::float8))
ORDER BY r.id
LIMIT %(limit)s;

-- name: replay_run_interrupt
-- An attached run whose driver stopped beating stops as `interrupted`, guarded like every
-- other move: a driver that beat in between keeps its run.
UPDATE jobtrail_replay_runs
SET state = 'stopped', stop_code = 'interrupted', died_again = %(died)s,
    stopped_by = %(by)s::text, finished_at = now(), updated_at = now()
WHERE id = %(id)s AND state = 'running' AND NOT detached
  AND (heartbeat_at IS NULL OR heartbeat_at < now() - make_interval(secs => %(stale)s::float8));

-- name: replay_run_observe
-- What became of the run's replayed tasks: how many went dead again after the run's replay,
-- and how many are still on their way (queued, leased, waiting for children). A task awaiting
-- a receipt has been run and counts as settled (its receipt may still fail it: counted then).
SELECT COUNT(*) FILTER (WHERE EXISTS (
           SELECT 1 FROM jobtrail_transition_log x
           WHERE x.task_id = r.task_id AND x.seq > r.replayed_seq
             AND x.to_state = 'dead' AND x.from_state <> 'dead')) AS died,
       COUNT(*) FILTER (WHERE t.state IN ('queued', 'leased', 'cancel_requested', 'waiting'))
           AS open
FROM jobtrail_replay_run_tasks r
LEFT JOIN jobtrail_tasks t ON t.id = r.task_id
WHERE r.run_id = %(id)s AND r.replayed_seq IS NOT NULL;

-- name: replay_run_finish
UPDATE jobtrail_replay_runs
SET state = %(state)s, stop_code = %(stop_code)s, died_again = %(died)s,
    stopped_by = %(driver)s::text, finished_at = now(), updated_at = now()
WHERE id = %(id)s AND state = 'running' AND driver = %(driver)s::text;

-- name: replay_run_list
-- Newest first, with how many of each run's replayed tasks are dead again now (live), and the
-- seconds since its driver's last beat (a detached run's: since a sweep last took a step).
SELECT r.*,
       (SELECT COUNT(*) FROM jobtrail_replay_run_tasks rt
        WHERE rt.run_id = r.id AND rt.replayed_seq IS NOT NULL
          AND EXISTS (SELECT 1 FROM jobtrail_transition_log x
                      WHERE x.task_id = rt.task_id AND x.seq > rt.replayed_seq
                        AND x.to_state = 'dead' AND x.from_state <> 'dead')) AS died_now,
       EXTRACT(EPOCH FROM now() - r.heartbeat_at)::float8 AS beat_age
FROM jobtrail_replay_runs r
WHERE (%(id)s::bigint IS NULL OR r.id = %(id)s::bigint)
ORDER BY r.id DESC
LIMIT %(limit)s;

-- name: effect_list_for_tasks
-- The effects recorded by some tasks (:ids a JSON array): confirmed ones a replay skips, the
-- rest (an intent without a confirmed receipt) it performs again.
SELECT s.task_id, s.name, s.status, s.effect_key, s.result, s.attempt, s.created_at,
       s.confirmed_at
FROM jobtrail_steps s
WHERE s.is_effect
  AND s.task_id IN (SELECT v::bigint FROM jsonb_array_elements_text(%(ids)s::jsonb) AS v)
ORDER BY s.task_id, s.created_at, s.name;

-- name: dead_tasks_evidence
-- The newest :per_group dead tasks of each (reason, kind) group, with their evidence: the
-- final error category and error text, attempts, the code version of the last claim, the input reference,
-- the receipt id, and the first and last failure (a transition that changed state with an
-- error category, or into dead). The window ranks the dead index's entries (an index-only
-- scan, 0017); only the picked tasks' rows are read, their evidence from the row (0017) or,
-- for a task older than 0017, from its transitions.
SELECT t.id, t.kind, t.queue, t.tenant, t.last_reason AS reason,
       t.last_error_category AS category, t.last_error AS error, t.attempts, t.max_attempts,
       t.replay_count,
       t.idempotency_key, t.payload_hash, t.receipt_id, t.finished_at,
       CASE WHEN t.evidence_on_row THEN t.first_failure_at ELSE f.first_failure END
           AS first_failure,
       CASE WHEN t.evidence_on_row THEN t.finished_at ELSE f.last_failure END AS last_failure,
       CASE WHEN t.evidence_on_row THEN t.claimed_version ELSE f.version END AS version
FROM (SELECT d.id, ROW_NUMBER() OVER (PARTITION BY d.last_reason, d.kind
                                      ORDER BY d.finished_at DESC, d.id DESC) AS rank
      FROM jobtrail_tasks d
      WHERE d.state = 'dead' AND d.dismissed_at IS NULL
        AND (%(reason)s::text IS NULL OR d.last_reason = %(reason)s::text)
        AND (%(kind)s::text IS NULL OR d.kind = %(kind)s::text)) r
JOIN jobtrail_tasks t ON t.id = r.id
LEFT JOIN LATERAL (
    -- include: dead_log_evidence
      AND NOT t.evidence_on_row
) f ON true
WHERE r.rank <= %(per_group)s
ORDER BY t.last_reason, t.kind, r.rank;
