-- The controls of enqueue (0023): debounce, uniqueness windows, expiry. Plain enqueues never
-- come here (task_insert and its batch forms are unchanged).

-- name: task_insert_controlled
-- task_insert with the controls' columns. ON CONFLICT without a target: a row that would break
-- either unique index (the idempotency key, jobtrail_tasks_intent_once; the open debounce key,
-- jobtrail_tasks_debounce_open) inserts nothing, and the driver then decides (controls.py).
-- A debounced task is due debounce seconds from now, never past debounce_until.
WITH ins AS (
    INSERT INTO jobtrail_tasks (
        kind, queue, tenant, state, payload, payload_hash, idempotency_key, priority,
        max_attempts, lease_seconds, reentrant, run_at, parent_id, last_reason, seq,
        budget_started_at, created_at, updated_at, debounce_key, debounce_until, unique_until,
        unique_active, expires_at, enq_state, enq_actor, enq_data)
    SELECT
        %(kind)s, %(queue)s, %(tenant)s, %(state)s, %(payload)s::jsonb, %(payload_hash)s,
        %(idempotency_key)s::text, %(priority)s, %(max_attempts)s, %(lease_seconds)s,
        %(reentrant)s,
        CASE WHEN %(debounce)s::float8 IS NOT NULL
             THEN LEAST(now() + make_interval(secs => %(debounce)s::float8), v.until)
             ELSE COALESCE(%(run_at)s::timestamptz,
                           now() + make_interval(secs => COALESCE(%(delay)s::float8, 0))) END,
        %(parent_id)s::bigint, 'enqueued', 1, now(), now(), now(), %(debounce_key)s::text,
        v.until,
        now() + make_interval(secs => %(unique_for)s::float8),
        %(unique_active)s::bool,
        COALESCE(%(expires_at)s::timestamptz,
                 now() + make_interval(secs => %(expires_in)s::float8)),
    -- its enqueued transition, on the row (0027)
    %(state)s::text, %(actor)s::text, NULLIF(%(data)s::jsonb, '{}'::jsonb)
    FROM (SELECT now() + make_interval(secs => %(debounce_max)s::float8) AS until) v
    ON CONFLICT DO NOTHING
    RETURNING id, queue, state, created_at, run_at
)
SELECT id FROM ins;

-- name: task_debounce
-- The open task of (tenant, kind, debounce key), if any, takes this enqueue's payload and is
-- due debounce seconds from now (never past its debounce_until), with a debounced annotation
-- whose data is the replaced payload's hash (read under the row's lock: the payload this
-- update replaces). A row locked by someone else (a claim taking it, another enqueue folding
-- into it) is skipped, not waited for: the caller's insert then waits for that transaction in
-- the unique index and decides again (controls.py). Waiting here instead would keep the lock
-- of a row that a claim meanwhile took (a lock outlives a failed re-check) while the insert
-- waits for others: three enqueues could deadlock.
WITH old AS (
    SELECT id, payload_hash FROM jobtrail_tasks
    WHERE tenant = %(tenant)s AND kind = %(kind)s AND debounce_key = %(debounce_key)s::text
      AND state = 'queued'
    FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE jobtrail_tasks t
    SET payload = %(payload)s::jsonb,
        payload_hash = %(payload_hash)s,
        run_at = LEAST(now() + make_interval(secs => %(debounce)s::float8), t.debounce_until),
        seq = t.seq + 1,
        updated_at = now()
    FROM old
    WHERE t.id = old.id
    RETURNING t.id, t.seq, t.attempts, t.updated_at, old.payload_hash AS replaced
), log AS (
    INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor,
                                      attempt, at, data)
    SELECT id, seq, 'queued', 'queued', 'debounced', %(actor)s::text, attempts, updated_at,
           jsonb_build_object('replaced', replaced)
    FROM upd
)
SELECT id FROM upd;

-- name: task_key_release
-- The idempotency key of task :id, whose window is over (unique_for passed, or unique_while
-- 'active' and the task has ended), is given up so that a new task may take it: a guarded
-- update, so of several enqueues that saw the window over one releases it and inserts; the
-- others find the new task.
UPDATE jobtrail_tasks
SET idempotency_key = NULL
WHERE id = %(id)s AND idempotency_key = %(idempotency_key)s::text
  AND ((unique_until IS NOT NULL AND unique_until <= now())
       OR (unique_active AND state IN ('succeeded', 'cancelled', 'dead')))
RETURNING id;

-- name: task_expired_queued
-- Queued tasks past their expiry (the sweeper cancels them: expired).
SELECT id FROM jobtrail_tasks
WHERE state = 'queued' AND expires_at IS NOT NULL AND expires_at <= now()
ORDER BY expires_at
LIMIT %(limit)s;

-- name: task_debounce_count
-- How many times task :id was debounced (explain).
SELECT COUNT(*) AS n FROM jobtrail_transition_log WHERE task_id = %(id)s AND reason = 'debounced';

-- name: children_results
-- The results of a workflow's children, in their order (a sequential parent's result).
SELECT result FROM jobtrail_tasks WHERE parent_id = %(id)s ORDER BY id;
