-- Named queries for SQLite. NOW is written out as
-- round((julianday('now') - 2440587.5) * 86400.0, 3): seconds since the epoch by the database clock.
-- (datetime('now','subsec') returns NULL on SQLite 3.40, so it is not used.)
-- SQLite has no data-modifying CTEs: the driver appends the transition row with a second
-- statement in the same transaction (transition_insert).

-- name: db_now
SELECT round((julianday('now') - 2440587.5) * 86400.0, 3) AS now;

-- name: db_now_for_big_read
-- db_now (SQLite compiles nothing: see the PostgreSQL query).
SELECT round((julianday('now') - 2440587.5) * 86400.0, 3) AS now;

-- name: task_insert
-- No RETURNING: SQLite buffers RETURNING rows in a temporary b-tree that it opens and closes per
-- statement (~5 us of an enqueue's CPU). The driver reads what the database generated with
-- task_inserted (the id is the connection's last rowid; nothing inserted: rowcount 0) and builds
-- the rest of the row from what it inserted (base.inserted_row), as on PostgreSQL.
INSERT INTO jobtrail_tasks (
    kind, queue, tenant, state, payload, payload_hash, idempotency_key, priority, max_attempts,
    lease_seconds, reentrant, run_at, parent_id, last_reason, seq, evidence_on_row,
    budget_started_at, created_at, updated_at, enq_state, enq_actor, enq_data)
VALUES (
    :kind, :queue, :tenant, :state, :payload, :payload_hash, :idempotency_key, :priority,
    :max_attempts, :lease_seconds, :reentrant,
    COALESCE(:run_at, round((julianday('now') - 2440587.5) * 86400.0, 3) + COALESCE(:delay, 0)),
    :parent_id, 'enqueued', 1, 1,
    round((julianday('now') - 2440587.5) * 86400.0, 3),
    round((julianday('now') - 2440587.5) * 86400.0, 3),
    round((julianday('now') - 2440587.5) * 86400.0, 3),
    -- its enqueued transition, on the row (0027)
    :state, :actor, NULLIF(:data, '{}'))
ON CONFLICT (tenant, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;

-- name: task_inserted
-- What task_insert generated for the row it just inserted (read after the write, so a caller's
-- deferred transaction takes the write lock first, as before).
SELECT created_at, run_at FROM jobtrail_tasks WHERE id = :id;

-- name: task_get_by_key
SELECT * FROM jobtrail_tasks
WHERE tenant = :tenant AND kind = :kind AND idempotency_key = :idempotency_key;

-- name: task_get
SELECT *, round((julianday('now') - 2440587.5) * 86400.0, 3) AS db_now
FROM jobtrail_tasks WHERE id = :id;

-- fragment: claim_set
-- Edge 3 (queued -> leased, claimed) on the rows the WHERE that follows picks.
UPDATE jobtrail_tasks
SET state = 'leased',
    lease_owner = :owner,
    lease_expires_at = round((julianday('now') - 2440587.5) * 86400.0, 3) + lease_seconds,
    attempts = attempts + 1,
    seq = seq + 1,
    last_reason = 'claimed',
    updated_at = round((julianday('now') - 2440587.5) * 86400.0, 3),
    claimed_version = :version,
    -- claimed: no longer open to debounce (0023)
    debounce_key = NULL

-- fragment: fair_due
-- Fairness: priority first, then tenants in turn, then due time. The tenants with
-- queued tasks of the queue are walked as a skip scan of jobtrail_tasks_due_tenant (one probe
-- per tenant, not one row per task); each tenant gives its first due tasks in its own order,
-- as many as its fair share of three batches needs (all of them with one tenant, one task
-- each with hundreds), so a claim reads about 3 x :limit rows plus one probe per tenant. The
-- same as PostgreSQL's fair_due. tn: a task's place within its tenant; turn:
-- within its tenant and priority (the round it is taken in).
    WITH RECURSIVE tenants(tenant) AS (
        SELECT (SELECT tenant FROM jobtrail_tasks
                WHERE state = 'queued' AND queue = :queue AND ckey IS NULL
                ORDER BY tenant LIMIT 1)
        UNION ALL
        SELECT (SELECT n.tenant FROM jobtrail_tasks n
                WHERE n.state = 'queued' AND n.queue = :queue AND n.ckey IS NULL
                  AND n.tenant > tenants.tenant
                ORDER BY n.tenant LIMIT 1)
        FROM tenants WHERE tenants.tenant IS NOT NULL
    ), c AS (
        SELECT d.id, d.tenant, d.priority, d.run_at
        FROM tenants JOIN jobtrail_tasks d ON d.id IN (
            SELECT e.id FROM jobtrail_tasks e
            WHERE e.state = 'queued' AND e.queue = :queue AND e.tenant = tenants.tenant
              AND e.run_at <= round((julianday('now') - 2440587.5) * 86400.0, 3)
              AND e.kind IN (SELECT value FROM json_each(:kinds))
              -- keyed tasks are not in the index: task_claim_keyed takes them
              AND e.ckey IS NULL
              AND (e.expires_at IS NULL
                   OR e.expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3))
            ORDER BY e.priority DESC, e.run_at, e.id
            LIMIT (SELECT (3 * :limit + MAX(1, COUNT(tenant)) - 1) / MAX(1, COUNT(tenant))
                   FROM tenants))
    ), f AS (
        SELECT c.*,
               ROW_NUMBER() OVER (PARTITION BY c.tenant
                                  ORDER BY c.priority DESC, c.run_at, c.id) AS tn,
               ROW_NUMBER() OVER (PARTITION BY c.tenant, c.priority
                                  ORDER BY c.run_at, c.id) AS turn
        FROM c
    )

-- name: task_claim
-- One queue at a time, so the claim reads the queue's due tasks and stops at :limit.
-- Writers are serialised by BEGIN IMMEDIATE, so no row locking is needed to take each due
-- task exactly once. Order: the fair order (fair_due).
-- include: claim_set
WHERE id IN (
    -- include: fair_due
    SELECT f.id FROM f
    WHERE :queue NOT IN (SELECT name FROM jobtrail_queues WHERE paused = 1)
    ORDER BY f.priority DESC, f.turn, f.run_at, f.id
    LIMIT :limit)
RETURNING *, round((julianday('now') - 2440587.5) * 86400.0, 3) - run_at AS waited;

-- name: task_move
UPDATE jobtrail_tasks
SET state = :to_state,
    last_reason = :reason,
    seq = seq + 1,
    updated_at = round((julianday('now') - 2440587.5) * 86400.0, 3),
    finished_at = CASE WHEN :terminal THEN round((julianday('now') - 2440587.5) * 86400.0, 3) END,
    run_at = CASE WHEN :run_in IS NULL THEN run_at
                  ELSE round((julianday('now') - 2440587.5) * 86400.0, 3) + :run_in END,
    lease_owner = CASE WHEN :keep_lease THEN lease_owner END,
    lease_expires_at = CASE WHEN :keep_lease THEN lease_expires_at END,
    attempts = CASE WHEN :reset_attempts THEN 0
                    WHEN :uncount THEN MAX(attempts - 1, 0)
                    ELSE attempts END,
    replay_count = replay_count + :replay,
    budget_started_at = CASE WHEN :reset_attempts
                             THEN round((julianday('now') - 2440587.5) * 86400.0, 3)
                             ELSE budget_started_at END,
    last_error_category = CASE WHEN :set_error THEN :error_category ELSE last_error_category END,
    last_error = CASE WHEN :set_error THEN :error ELSE last_error END,
    -- the first failure (0017): a change of state with an error category, or into dead
    first_failure_at = CASE
        WHEN first_failure_at IS NULL AND :from_state IS NOT :to_state
             AND (:error_category IS NOT NULL OR :to_state = 'dead')
            THEN round((julianday('now') - 2440587.5) * 86400.0, 3) ELSE first_failure_at END,
    receipt_id = COALESCE(:receipt_id, receipt_id),
    receipt_deadline = CASE WHEN :to_state = 'awaiting_receipt' AND :receipt_in IS NOT NULL
                            THEN round((julianday('now') - 2440587.5) * 86400.0, 3) + :receipt_in
                            WHEN :to_state = 'awaiting_receipt' THEN receipt_deadline END,
    dismissed_at = NULL,
    -- a success stores the handler's return value with its transition; a replay
    -- (attempts reset) starts without one
    result = CASE WHEN :set_result THEN :result WHEN :reset_attempts THEN NULL ELSE result END,
    -- out of queued: no longer open to debounce (0023)
    debounce_key = NULL
WHERE id = :id
  AND state = :from_state
  AND (:owner IS NULL OR (lease_owner = :owner AND attempts = :attempt
       AND lease_expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3)))
  AND (:expired_owner IS NULL OR (lease_owner = :expired_owner AND attempts = :attempt
       AND lease_expires_at <= round((julianday('now') - 2440587.5) * 86400.0, 3)))
RETURNING id, state, attempts, seq, updated_at, parent_id, queue, kind, run_at;

-- name: task_annotate
UPDATE jobtrail_tasks
SET seq = seq + 1,
    updated_at = round((julianday('now') - 2440587.5) * 86400.0, 3),
    dismissed_at = CASE WHEN :dismiss THEN round((julianday('now') - 2440587.5) * 86400.0, 3)
                        ELSE dismissed_at END
WHERE id = :id AND state = :from_state
RETURNING id, state, attempts, seq, updated_at, parent_id, queue, kind;

-- name: transition_insert
INSERT INTO jobtrail_transition_log (
    task_id, seq, from_state, to_state, reason, error_category, error, actor, attempt, at,
    note, corrects, data, traceback, error_class)
VALUES (:task_id, :seq, :from_state, :to_state, :reason, :error_category, :error, :actor,
        :attempt, :at, :note, :corrects, :data, :traceback, :error_class);

-- name: lease_extend
-- Renewal carries the same guard as every worker edge; the state it returns tells the worker
-- whether a cancel was requested meanwhile.
UPDATE jobtrail_tasks
SET lease_expires_at = round((julianday('now') - 2440587.5) * 86400.0, 3) + :seconds
WHERE id = :id
  AND state IN ('leased', 'cancel_requested')
  AND lease_owner = :owner AND attempts = :attempt
  AND lease_expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3)
RETURNING state, lease_expires_at;

-- name: task_list
SELECT * FROM jobtrail_tasks
WHERE (:state IS NULL OR state = :state)
  AND (:kind IS NULL OR kind = :kind)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant IS NULL OR tenant = :tenant)
  AND id < COALESCE(:before_id, 9223372036854775807)  -- a rowid range even on page 1
ORDER BY id DESC
LIMIT :limit;

-- name: transition_list
SELECT * FROM jobtrail_transitions WHERE task_id = :id ORDER BY seq;

-- name: task_expired
SELECT id, state, attempts, max_attempts, reentrant, lease_owner, kind
FROM jobtrail_tasks
WHERE state IN ('leased', 'cancel_requested')
  AND lease_expires_at <= round((julianday('now') - 2440587.5) * 86400.0, 3)
ORDER BY lease_expires_at
LIMIT :limit;

-- name: task_dead_select
SELECT id FROM jobtrail_tasks
WHERE state = 'dead' AND dismissed_at IS NULL
  AND (:reason IS NULL OR last_reason = :reason)
  AND (:kind IS NULL OR kind = :kind)
  AND (:since IS NULL OR finished_at >= :since)
  AND (:until IS NULL OR finished_at < :until)
ORDER BY finished_at, id
LIMIT :limit;

-- name: invariant_violations
-- Tasks whose state is not the projection of their last transition, or whose log has gaps (the
-- enqueued transition on the task row, 0027, is the log's seq 1 when the log table has none).
SELECT f.id, f.state, f.seq, f.last_to_state, f.n, f.max_seq
FROM (SELECT t.id, t.state, t.seq,
             COALESCE((SELECT x.to_state FROM jobtrail_transition_log x
                       WHERE x.task_id = t.id ORDER BY x.seq DESC LIMIT 1),
                      t.enq_state) AS last_to_state,
             (SELECT COUNT(*) FROM jobtrail_transition_log x WHERE x.task_id = t.id)
             + (t.enq_actor IS NOT NULL) AS n,
             COALESCE((SELECT MAX(seq) FROM jobtrail_transition_log x WHERE x.task_id = t.id),
                      CASE WHEN t.enq_actor IS NOT NULL THEN 1 END) AS max_seq
      FROM jobtrail_tasks t) f
WHERE f.state IS NOT f.last_to_state OR f.seq IS NOT f.max_seq OR f.seq IS NOT f.n;

-- name: task_holder
-- Does this attempt still hold the task? (state, and whether the lease is still valid)
SELECT state, lease_owner, attempts,
       lease_expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3) AS lease_valid
FROM jobtrail_tasks WHERE id = :id;

-- name: task_held_by
-- The tasks leased to a worker: after a round trip whose answer was lost, the worker starts
-- those it does not know it holds instead of leaving them to their lease (issue 40).
SELECT *, round((julianday('now') - 2440587.5) * 86400.0, 3) AS db_now FROM jobtrail_tasks
WHERE state = 'leased' AND lease_owner = :owner
  AND lease_expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3)
ORDER BY id LIMIT :limit;

-- name: task_insert_many
-- Several tasks without idempotency keys or parents in one statement (enqueue_many's common
-- case; their transitions follow with transition_insert_enqueued). :rows is a JSON array of
-- [kind, queue, tenant, state, payload, payload_hash, priority, max_attempts,
--  lease_seconds numerator, lease_seconds denominator, reentrant, run_at in microseconds,
--  delay numerator, delay denominator]: floats travel as exact integer ratios (a power-of-two
-- denominator) and run_at as integer microseconds, so each stored value is bit for bit the
-- double the one-row task_insert would have bound. Rows are inserted in input order (ORDER BY
-- key), so their ids ascend in input order.
INSERT INTO jobtrail_tasks (
    kind, queue, tenant, state, payload, payload_hash, priority, max_attempts, lease_seconds,
    reentrant, run_at, last_reason, seq, evidence_on_row, budget_started_at, created_at,
    updated_at, enq_state, enq_actor, enq_data)
SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4,
       j.value ->> 5, j.value ->> 6, j.value ->> 7,
       CAST(j.value ->> 8 AS REAL) / (j.value ->> 9),
       j.value ->> 10,
       COALESCE(CAST(j.value ->> 11 AS REAL) / 1000000.0,
                round((julianday('now') - 2440587.5) * 86400.0, 3)
                + COALESCE(CAST(j.value ->> 12 AS REAL) / (j.value ->> 13), 0)),
       'enqueued', 1, 1,
       round((julianday('now') - 2440587.5) * 86400.0, 3),
       round((julianday('now') - 2440587.5) * 86400.0, 3),
       round((julianday('now') - 2440587.5) * 86400.0, 3),
       j.value ->> 3, :actor, NULLIF(:data, '{}')
FROM json_each(:rows) AS j
ORDER BY j.key
RETURNING *;

-- name: transition_insert_claimed
-- The claim transitions of the tasks that task_claim / task_claim_limited have just leased, in
-- the order of :rows (a JSON array of [task id, transition data as JSON text]): seq, attempt
-- and at are the task's own, exactly as the claim stored them.
INSERT INTO jobtrail_transition_log (
    task_id, seq, from_state, to_state, reason, error_category, error, actor, attempt, at,
    note, corrects, data)
SELECT t.id, t.seq, 'queued', 'leased', 'claimed', NULL, NULL, :owner, t.attempts,
       t.updated_at, NULL, NULL, j.value ->> 1
FROM json_each(:rows) AS j
JOIN jobtrail_tasks AS t ON t.id = j.value ->> 0
ORDER BY j.key;

-- name: task_complete_many
-- Edge 4 (leased -> succeeded, completed) for several attempts of one worker in one statement:
-- the same guard as task_move, per row (holder, that row's attempt, unexpired lease), and the
-- same columns set. :batch is a JSON array of [task id, attempt, result or null]. Rows whose
-- guard fails are not
-- returned (the worker decides for those one by one). Workflow children are excluded (their
-- parents are re-derived by the single-task path). Transitions: transition_insert_completed.
-- :batch is expected to hold each task once (a task named twice moves at most once).
UPDATE jobtrail_tasks AS t
SET state = 'succeeded',
    last_reason = 'completed',
    seq = t.seq + 1,
    updated_at = round((julianday('now') - 2440587.5) * 86400.0, 3),
    finished_at = round((julianday('now') - 2440587.5) * 86400.0, 3),
    lease_owner = NULL,
    lease_expires_at = NULL,
    receipt_deadline = NULL,
    dismissed_at = NULL,
    -- the return value, the batch item's third element (JSON null = none)
    result = b.result
FROM (SELECT j.value ->> 0 AS id, j.value ->> 1 AS attempt,
             CASE WHEN j.value ->> 2 IS NULL THEN NULL ELSE j.value -> 2 END AS result
      FROM json_each(:batch) AS j) AS b
WHERE t.id = b.id
  -- (unary + keeps the planner off the state and lease indexes: walk the batch, find each
  -- task by its id)
  AND +t.state = 'leased'
  AND +t.lease_owner = :owner
  AND +t.attempts = b.attempt
  AND +t.lease_expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3)
  AND +t.parent_id IS NULL
RETURNING id;

-- name: transition_insert_completed
-- The transitions of the tasks :ids (a JSON array) that task_complete_many has just moved, in
-- id order (the order the one-by-one moves took): seq, attempt and at are the task's own.
INSERT INTO jobtrail_transition_log (
    task_id, seq, from_state, to_state, reason, error_category, error, actor, attempt, at,
    note, corrects, data)
SELECT t.id, t.seq, 'leased', 'succeeded', 'completed', NULL, NULL, :actor, t.attempts,
       t.updated_at, NULL, NULL, '{}'
FROM jobtrail_tasks AS t
WHERE t.id IN (SELECT value FROM json_each(:ids))
ORDER BY t.id;
