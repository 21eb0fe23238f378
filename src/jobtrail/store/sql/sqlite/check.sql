-- The invariant checker (jobtrail.check, `jobtrail check`). Read-only: SELECTs only.

-- name: check_read_only
-- SQLite: a deferred BEGIN that only reads never takes the write lock; nothing to set.
SELECT 1;

-- name: check_state_projection
-- Every task's state is the to_state of its last transition (its log's last row, or the
-- enqueued transition on its row when the log has none: 0027).
SELECT f.task_id, f.state, f.last_to_state
FROM (SELECT t.id AS task_id, t.state,
             COALESCE((SELECT x.to_state FROM jobtrail_transition_log x
                       WHERE x.task_id = t.id ORDER BY x.seq DESC LIMIT 1),
                      t.enq_state) AS last_to_state
      FROM jobtrail_tasks t) f
WHERE f.state IS NOT f.last_to_state
ORDER BY f.task_id;

-- name: check_seq_contiguous
-- The log of a task is numbered 1..n with no gap, and the task's seq is n (the enqueued
-- transition on the row, 0027, is its seq 1).
SELECT f.task_id, f.seq, f.n, f.min_seq, f.max_seq
FROM (SELECT t.id AS task_id, t.seq,
             NULLIF(COALESCE(agg.n, 0) + (t.enq_actor IS NOT NULL), 0) AS n,
             CASE WHEN t.enq_actor IS NOT NULL THEN 1 ELSE agg.min_seq END AS min_seq,
             CASE WHEN t.enq_actor IS NOT NULL THEN COALESCE(agg.max_seq, 1)
                  ELSE agg.max_seq END AS max_seq
      FROM jobtrail_tasks t
      LEFT JOIN (SELECT task_id, COUNT(*) AS n, MIN(seq) AS min_seq, MAX(seq) AS max_seq
                 FROM jobtrail_transition_log GROUP BY task_id) agg ON agg.task_id = t.id) f
WHERE f.n IS NULL OR f.min_seq IS NOT 1 OR f.max_seq IS NOT f.n OR f.seq IS NOT f.n
ORDER BY f.task_id;

-- name: check_log_chain
-- Each transition starts where the one before it ended (the one before a log row of seq 2 may
-- be the enqueued transition on the task row: 0027).
SELECT x.task_id, x.seq, x.from_state, COALESCE(p.to_state, t.enq_state) AS previous_to_state
FROM jobtrail_transition_log x
LEFT JOIN jobtrail_transition_log p ON p.task_id = x.task_id AND p.seq = x.seq - 1
LEFT JOIN jobtrail_tasks t ON x.seq = 2 AND t.id = x.task_id AND t.enq_actor IS NOT NULL
WHERE (p.task_id IS NOT NULL OR t.id IS NOT NULL)
  AND x.from_state IS NOT COALESCE(p.to_state, t.enq_state)
ORDER BY x.task_id, x.seq;

-- name: check_transitions_page
-- The log in pages by its key, for the edge check in Python: the log table's rows and the
-- enqueued transitions on the task rows (0027), each read through its own key.
SELECT task_id, seq, from_state, to_state, reason FROM (
    SELECT * FROM (
        SELECT id AS task_id, 1 AS seq, NULL AS from_state, enq_state AS to_state,
               'enqueued' AS reason
        FROM jobtrail_tasks
        WHERE enq_actor IS NOT NULL AND (id, 1) > (:after_task, :after_seq)
        ORDER BY id LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT task_id, seq, from_state, to_state, reason FROM jobtrail_transition_log
        WHERE (task_id, seq) > (:after_task, :after_seq)
        ORDER BY task_id, seq LIMIT :limit))
ORDER BY task_id, seq
LIMIT :limit;

-- name: check_terminal_finished
SELECT id AS task_id, state FROM jobtrail_tasks
WHERE state IN ('succeeded', 'cancelled', 'dead') AND finished_at IS NULL
ORDER BY id;

-- name: check_effect_keys
-- No two confirmed effects share a key.
SELECT effect_key, MIN(task_id) AS task_id, COUNT(*) AS n
FROM jobtrail_steps
WHERE is_effect = 1 AND status = 'confirmed'
GROUP BY effect_key HAVING COUNT(*) > 1
ORDER BY effect_key;

-- name: check_held_lease
-- A held task has an owner and an expiry.
SELECT id AS task_id, state, lease_owner, lease_expires_at FROM jobtrail_tasks
WHERE state IN ('leased', 'cancel_requested')
  AND (lease_owner IS NULL OR lease_expires_at IS NULL)
ORDER BY id;

-- name: check_queued_lease
-- A queued task holds no unexpired lease.
SELECT id AS task_id, lease_owner, lease_expires_at FROM jobtrail_tasks
WHERE state = 'queued' AND lease_expires_at IS NOT NULL
  AND lease_expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3)
ORDER BY id;

-- name: check_row_evidence
-- The dead-letter evidence a task row keeps (0017, evidence_on_row) is what its log says: the
-- code version of its last claim and the time of its first failure.
SELECT f.task_id, f.claimed_version, f.log_version, f.first_failure_at, f.log_first_failure
FROM (SELECT t.id AS task_id, t.claimed_version, t.first_failure_at,
-- include: dead_log_version
                 AS log_version,
-- include: dead_log_first_failure
                 AS log_first_failure
      FROM jobtrail_tasks t
      WHERE t.evidence_on_row) f
WHERE f.claimed_version IS NOT f.log_version OR f.first_failure_at IS NOT f.log_first_failure
ORDER BY f.task_id;

-- name: check_parents
-- Every parent with its children's states (aggregated in Python by workflow.aggregate).
SELECT p.id AS task_id, p.state, p.last_reason, c.id AS child_id, c.state AS child_state
FROM jobtrail_tasks p
JOIN jobtrail_tasks c ON c.parent_id = p.id
-- a parent whose handler spawned its children (ctx.spawn) decides for itself: not by the rule
WHERE NOT EXISTS (SELECT 1 FROM jobtrail_steps s WHERE s.task_id = p.id AND s.record = 'spawn')
ORDER BY p.id, c.id;
