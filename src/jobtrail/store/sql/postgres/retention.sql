-- Retention and tracing: the sweeper's bounded prune batches, the store's counts
-- of what was pruned, and the trace contexts stored with tasks.

-- name: retention_select
-- The oldest finished tasks of one state past its retention, through the finished_at indexes
-- (jobtrail_tasks_finished, jobtrail_tasks_dead): a batch reads the rows it deletes, not every
-- finished task. SKIP LOCKED: two workers pruning at once take different batches, and a row
-- another transaction holds is never waited for.
-- Kept like `prune_select`: parents of tasks still present and tasks with pending outbox
-- messages wait.
-- The state is also written out (IN, or 'dead' in the _dead twin) so that the partial index
-- serves any plan: a plan made for any value of the parameter (a generic plan, or SQLite's
-- plan of the prepared statement) cannot use it through the parameter alone, and then read
-- every task of the store at each prune pass (156 ms at 200,000 finished tasks).
SELECT id FROM jobtrail_tasks t
WHERE t.state = %(state)s
  AND t.state IN ('succeeded', 'cancelled')  -- implies jobtrail_tasks_finished's predicate
  AND t.finished_at < now() - make_interval(secs => %(older_than)s::float8)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.after_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_outbox o WHERE o.task_id = t.id AND o.state = 'pending')
ORDER BY t.finished_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;


-- name: retention_select_dead
-- retention_select for dead tasks (through jobtrail_tasks_dead).
SELECT id FROM jobtrail_tasks t
WHERE t.state = 'dead'
  AND t.finished_at < now() - make_interval(secs => %(older_than)s::float8)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.after_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_outbox o WHERE o.task_id = t.id AND o.state = 'pending')
ORDER BY t.finished_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: retention_delete_tasks
DELETE FROM jobtrail_tasks WHERE id = ANY(%(ids)s::bigint[]) AND state = %(state)s;

-- name: pruned_add
INSERT INTO jobtrail_pruned AS p (state, tasks, transitions, last_at)
VALUES (%(state)s, %(tasks)s, %(transitions)s, now())
ON CONFLICT (state) DO UPDATE
SET tasks = p.tasks + EXCLUDED.tasks,
    transitions = p.transitions + EXCLUDED.transitions,
    last_at = EXCLUDED.last_at;

-- name: pruned_list
SELECT state, tasks, transitions FROM jobtrail_pruned ORDER BY state;

-- name: trace_contexts
-- The context stored at enqueue, in the creating transition's data (key "trace"), by its key.
-- (on the task row since 0027, in the log's seq 1 before)
SELECT id AS task_id, enq_data -> 'trace' AS trace FROM jobtrail_tasks
WHERE id = ANY(%(ids)s::bigint[]) AND enq_actor IS NOT NULL AND enq_data ? 'trace'
UNION ALL
SELECT task_id, data -> 'trace' AS trace FROM jobtrail_transition_log
WHERE task_id = ANY(%(ids)s::bigint[]) AND seq = 1 AND data ? 'trace';

-- name: prune_events
-- Events sent more than the retention of succeeded tasks ago that no waiting task of their
-- tenant waits for (through jobtrail_tasks_wait_event). A woken wait's record holds the
-- payload, so only a task still waiting could need it, and one that has not waited yet gets
-- the retention window to do so. Batches without order (the table has no time index; a scan
-- meets the oldest rows first), SKIP LOCKED against a send of the same key.
DELETE FROM jobtrail_events
WHERE (tenant, key) IN (
    SELECT e.tenant, e.key FROM jobtrail_events e
    WHERE e.created_at < now() - make_interval(secs => %(older_than)s::float8)
      AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks t
                      WHERE t.state = 'waiting' AND t.wait_kind = 'event'
                        AND t.tenant = e.tenant AND t.wait_key = e.key)
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED);
