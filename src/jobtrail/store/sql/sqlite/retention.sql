-- Retention and tracing: the sweeper's bounded prune batches, the store's counts
-- of what was pruned, and the trace contexts stored with tasks.

-- name: retention_select
-- The oldest finished tasks of one state past its retention, through the finished_at indexes
-- (jobtrail_tasks_finished, jobtrail_tasks_dead). No row locks in SQLite: the batch runs under
-- BEGIN IMMEDIATE, one writer at a time.
-- The state is also written out (IN, or 'dead' in the _dead twin) so that the partial index
-- serves any plan: a plan made for any value of the parameter (a generic plan, or SQLite's
-- plan of the prepared statement) cannot use it through the parameter alone, and then read
-- every task of the store at each prune pass (156 ms at 200,000 finished tasks).
SELECT id FROM jobtrail_tasks t
WHERE t.state = :state
  AND t.state IN ('succeeded', 'cancelled')  -- implies jobtrail_tasks_finished's predicate
  AND t.finished_at < round((julianday('now') - 2440587.5) * 86400.0, 3) - :older_than
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.after_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_outbox o WHERE o.task_id = t.id AND o.state = 'pending')
ORDER BY t.finished_at
LIMIT :limit;


-- name: retention_select_dead
-- retention_select for dead tasks (through jobtrail_tasks_dead).
SELECT id FROM jobtrail_tasks t
WHERE t.state = 'dead'
  AND t.finished_at < round((julianday('now') - 2440587.5) * 86400.0, 3) - :older_than
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.after_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_outbox o WHERE o.task_id = t.id AND o.state = 'pending')
ORDER BY t.finished_at
LIMIT :limit;

-- name: retention_delete_tasks
DELETE FROM jobtrail_tasks WHERE id IN (SELECT value FROM json_each(:ids)) AND state = :state;

-- name: pruned_add
INSERT INTO jobtrail_pruned (state, tasks, transitions, last_at)
VALUES (:state, :tasks, :transitions, round((julianday('now') - 2440587.5) * 86400.0, 3))
ON CONFLICT (state) DO UPDATE
SET tasks = tasks + excluded.tasks,
    transitions = transitions + excluded.transitions,
    last_at = excluded.last_at;

-- name: pruned_list
SELECT state, tasks, transitions FROM jobtrail_pruned ORDER BY state;

-- name: trace_contexts
-- The context stored at enqueue, in the creating transition's data (key "trace"), by its key.
-- (on the task row since 0027, in the log's seq 1 before)
SELECT id AS task_id, json_extract(enq_data, '$.trace') AS trace FROM jobtrail_tasks
WHERE id IN (SELECT value FROM json_each(:ids)) AND enq_actor IS NOT NULL
  AND json_extract(enq_data, '$.trace') IS NOT NULL
UNION ALL
SELECT task_id, json_extract(data, '$.trace') AS trace FROM jobtrail_transition_log
WHERE task_id IN (SELECT value FROM json_each(:ids)) AND seq = 1
  AND json_extract(data, '$.trace') IS NOT NULL;

-- name: prune_events
-- Events sent more than the retention of succeeded tasks ago that no waiting task of their
-- tenant waits for (through jobtrail_tasks_wait_event). A woken wait's record holds the
-- payload, so only a task still waiting could need it, and one that has not waited yet gets
-- the retention window to do so. Batches without order (the table has no time index; a scan
-- meets the oldest rows first).
DELETE FROM jobtrail_events
WHERE rowid IN (
    SELECT e.rowid FROM jobtrail_events e
    WHERE e.created_at < round((julianday('now') - 2440587.5) * 86400.0, 3) - :older_than
      AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks t
                      WHERE t.state = 'waiting' AND t.wait_kind = 'event'
                        AND t.tenant = e.tenant AND t.wait_key = e.key)
    LIMIT :limit);
