-- Operations for PostgreSQL: queues (pause, limits), limit-aware claims, stats, pruning.

-- name: queue_limits_lock
-- Claims on a limited queue (concurrency or rate) take turns: the queue's row lock is held
-- until the claim commits, so the next claimer counts what the previous one took and sees the
-- bucket it left (READ COMMITTED re-reads per statement). Locked in name order, so two
-- claimers never deadlock. now(): the database clock every rate decision uses.
SELECT *, now() AS db_now FROM jobtrail_queues
WHERE name = ANY(%(queues)s::text[]) AND NOT paused
  AND (limit_total IS NOT NULL OR limit_per_tenant IS NOT NULL
       OR rate_per_second IS NOT NULL OR rate_per_tenant IS NOT NULL
       OR keyed OR kind_rated)
ORDER BY name
FOR UPDATE;

-- name: queue_limited_names
SELECT name FROM jobtrail_queues
WHERE name = ANY(%(queues)s::text[])
  AND (limit_total IS NOT NULL OR limit_per_tenant IS NOT NULL
       OR rate_per_second IS NOT NULL OR rate_per_tenant IS NOT NULL
       OR keyed OR kind_rated);

-- name: queue_held_count
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = %(queue)s AND state IN ('leased', 'cancel_requested');

-- name: queue_tenants_held
SELECT tenant, COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = %(queue)s AND state IN ('leased', 'cancel_requested')
GROUP BY tenant;

-- name: task_claim_limited
-- The fair claim of one limited queue, under its queue lock: at most :limit tasks (the room
-- the driver computed from the concurrency limit and the queue's bucket), and of each tenant
-- at most its room (:rooms, a JSON object tenant -> room, for the tenants whose per-tenant
-- limit or bucket leaves less than :default_room; :default_room for the others).
WITH upd AS (
    -- include: claim_set
    -- include: claim_due_head
    -- include: fair_due
            ) f
            LEFT JOIN jsonb_each_text(%(rooms)s::jsonb) r ON r.key = f.tenant
            WHERE f.tn <= COALESCE(r.value::int, %(default_room)s::int)
            ORDER BY f.priority DESC, f.turn, f.run_at, f.id
            LIMIT %(limit)s)) WITH ORDINALITY AS o(id, ord)
        JOIN jobtrail_tasks w ON w.id = o.id
        WHERE w.state = 'queued'
        ORDER BY o.ord
        LIMIT %(limit)s
        FOR UPDATE OF w))
    RETURNING t.*, EXTRACT(EPOCH FROM now() - t.run_at)::float8 AS waited
), log AS (
    -- include: claim_log
)
SELECT * FROM upd;

-- name: queue_tokens_set
UPDATE jobtrail_queues SET tokens = %(tokens)s::float8, tokens_at = now() WHERE name = %(name)s;

-- name: queue_rate_end
-- A resume ramp's temporary rate is over: the queue is as it was before (no rate).
UPDATE jobtrail_queues
SET rate_per_second = NULL, rate_burst = NULL, rate_per_tenant = NULL, ramp_seconds = NULL,
    ramp_started_at = NULL, rate_until = NULL, tokens = NULL, tokens_at = NULL
WHERE name = %(name)s AND rate_until IS NOT NULL AND rate_until <= now();

-- name: queue_rate_set
-- A new rate (or none): the bucket starts over (full, or a tenth of full during a ramp).
UPDATE jobtrail_queues
SET rate_per_second = %(per_second)s::float8,
    rate_burst = %(burst)s::int,
    rate_per_tenant = %(per_tenant)s::float8,
    ramp_seconds = %(ramp)s::float8,
    ramp_started_at = CASE WHEN %(ramp)s::float8 IS NULL THEN NULL ELSE now() END,
    rate_until = CASE WHEN %(until)s::float8 IS NULL THEN NULL
                      ELSE now() + make_interval(secs => %(until)s::float8) END,
    tokens = NULL,
    tokens_at = NULL,
    updated_at = now()
WHERE name = %(name)s
RETURNING *;

-- name: tenant_rate_list
-- The tenant buckets of a queue touched since :since (older ones are full again).
SELECT tenant, tokens, tokens_at FROM jobtrail_tenant_rates
WHERE queue = %(queue)s AND tokens_at >= %(since)s;

-- name: tenant_rate_upsert
INSERT INTO jobtrail_tenant_rates (queue, tenant, tokens, tokens_at)
SELECT %(queue)s, x.key, x.value::float8, now() FROM jsonb_each_text(%(tokens)s::jsonb) x
ON CONFLICT (queue, tenant) DO UPDATE SET tokens = excluded.tokens, tokens_at = excluded.tokens_at;

-- name: tenant_rate_forget
DELETE FROM jobtrail_tenant_rates WHERE queue = %(queue)s AND tokens_at < %(since)s;

-- name: queue_claims_between
-- Claims of a queue in a time window (a resume ramp's measured pace before the pause).
SELECT COUNT(*) AS n FROM jobtrail_transition_log tr JOIN jobtrail_tasks t ON t.id = tr.task_id
WHERE t.queue = %(queue)s AND tr.reason = 'claimed' AND tr.at >= %(since)s AND tr.at < %(until)s;

-- name: queue_due_count
-- Unkeyed and keyed tasks apart: each has its index (jobtrail_tasks_due_tenant, _keyed_order).
SELECT (SELECT COUNT(*) FROM jobtrail_tasks
        WHERE queue = %(queue)s AND state = 'queued' AND ckey IS NULL
          AND run_at <= now())
     + (SELECT COUNT(*) FROM jobtrail_tasks
        WHERE queue = %(queue)s AND state = 'queued' AND ckey IS NOT NULL
          AND run_at <= now()) AS n;

-- name: task_next_due
-- A draining burst worker (run_worker(burst=True, drain=S)): seconds until the first queued
-- task of these queues and kinds is due (0 or less: due now), among those due within
-- %(within)s seconds; NULL when there is none (read from jobtrail_tasks_queued_kind). Paused
-- queues are left out: their tasks would hold the worker until someone resumes the queue.
SELECT EXTRACT(EPOCH FROM MIN(run_at) - now())::float8 AS wait
FROM jobtrail_tasks
WHERE state = 'queued' AND kind <> ''
  AND queue = ANY(%(queues)s::text[])
  AND kind = ANY(%(kinds)s::text[])
  AND run_at <= now() + make_interval(secs => %(within)s)
  AND queue NOT IN (SELECT name FROM jobtrail_queues WHERE paused);

-- name: queue_get
SELECT * FROM jobtrail_queues WHERE name = %(name)s;

-- name: queue_list
SELECT * FROM jobtrail_queues ORDER BY name;

-- name: queue_upsert
INSERT INTO jobtrail_queues (name, paused, paused_by, paused_note, paused_at, limit_total,
                             limit_per_tenant, updated_at)
VALUES (%(name)s, %(paused)s, %(paused_by)s::text, %(paused_note)s::text,
        CASE WHEN %(paused)s THEN now() END, %(limit_total)s::int,
        %(limit_per_tenant)s::int, now())
ON CONFLICT (name) DO UPDATE
SET paused = excluded.paused,
    paused_by = excluded.paused_by,
    paused_note = excluded.paused_note,
    paused_at = CASE WHEN NOT excluded.paused THEN NULL
                     WHEN jobtrail_queues.paused THEN jobtrail_queues.paused_at
                     ELSE excluded.paused_at END,
    limit_total = excluded.limit_total,
    limit_per_tenant = excluded.limit_per_tenant,
    updated_at = excluded.updated_at
RETURNING *;

-- name: queue_history_insert
INSERT INTO jobtrail_queue_history (queue, action, actor, note, data, at)
VALUES (%(queue)s, %(action)s, %(actor)s, %(note)s, %(data)s::jsonb, now());

-- name: queue_history_list
SELECT * FROM jobtrail_queue_history WHERE queue = %(queue)s ORDER BY id DESC LIMIT %(limit)s;

-- name: queue_tenant_held
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = %(queue)s AND tenant = %(tenant)s AND state IN ('leased', 'cancel_requested');

-- name: stats_open
-- One part per partial index that holds those states (jobtrail_tasks_queued_kind: every kind
-- is a non-empty name; jobtrail_tasks_held; jobtrail_tasks_settled_kind).
SELECT queue, kind, 'queued' AS state, COUNT(*) AS n,
       MIN(run_at) FILTER (WHERE run_at <= now()) AS oldest_due
FROM jobtrail_tasks
WHERE state = 'queued' AND kind <> ''
GROUP BY queue, kind
UNION ALL
SELECT queue, kind, state, COUNT(*) AS n, NULL::timestamptz AS oldest_due
FROM jobtrail_tasks
WHERE state IN ('leased', 'cancel_requested')
GROUP BY queue, kind, state
UNION ALL
SELECT queue, kind, state, COUNT(*) AS n, NULL::timestamptz AS oldest_due
FROM jobtrail_tasks
WHERE state IN ('awaiting_receipt', 'waiting')
  AND state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                'cancel_requested')
GROUP BY queue, kind, state;

-- name: stats_dead
SELECT queue, kind, COUNT(*) AS n, MIN(finished_at) AS oldest
FROM jobtrail_tasks WHERE state = 'dead' AND dismissed_at IS NULL
GROUP BY queue, kind;

-- name: stats_finished
SELECT queue, kind, state, COUNT(*) AS n FROM jobtrail_tasks
WHERE state IN ('succeeded', 'cancelled') AND finished_at >= %(since)s
GROUP BY queue, kind, state;

-- name: stats_reasons
-- The log table's rows since since, and the enqueued transitions on the rows of the tasks
-- created since (0027): those are among the ids above the last id mark at or before since
-- (jobtrail_id_marks), read through the primary key.
SELECT queue, kind, reason, to_state, SUM(n)::bigint AS n FROM (
    SELECT t.queue, t.kind, x.reason, x.to_state, COUNT(*) AS n
    FROM jobtrail_transition_log x JOIN jobtrail_tasks t ON t.id = x.task_id
    WHERE x.at >= %(since)s
    GROUP BY t.queue, t.kind, x.reason, x.to_state
    UNION ALL
    SELECT t.queue, t.kind, 'enqueued', t.enq_state, COUNT(*)
    FROM jobtrail_tasks t
    WHERE t.id > COALESCE((SELECT m.last_id FROM jobtrail_id_marks m
                             WHERE m.at <= %(since)s::timestamptz ORDER BY m.at DESC LIMIT 1), 0)
      -- a range of ids: the planner then reads it through the primary key
      AND t.id <= (SELECT last_value FROM jobtrail_tasks_id_seq)
      AND t.enq_actor IS NOT NULL AND t.created_at >= %(since)s
    GROUP BY t.queue, t.kind, t.enq_state) u
GROUP BY queue, kind, reason, to_state;

-- name: stats_waits
SELECT t.queue, t.kind, (x.data ->> 'waited')::float8 AS seconds
FROM jobtrail_transition_log x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= %(since)s AND x.reason = 'claimed';

-- name: stats_runs
-- Run time of attempts that ended in the window: from the claim just before the outcome (attempt
-- numbers restart at 1 after a replay, so the attempt number alone would pair it with older
-- claims too).
SELECT t.queue, t.kind, EXTRACT(EPOCH FROM x.at - c.at)::float8 AS seconds
FROM jobtrail_transition_log x
CROSS JOIN LATERAL (
    SELECT c.at FROM jobtrail_transition_log c
    WHERE c.task_id = x.task_id AND c.seq < x.seq AND c.reason = 'claimed'
    ORDER BY c.seq DESC LIMIT 1
) c
JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= %(since)s AND x.from_state IN ('leased', 'cancel_requested')
  AND x.reason NOT IN ('cancel_requested', 'lease_expired', 'lease_expired_cancelled',
                       'lease_expired_effect_uncertain', 'manual_fix')
  AND x.from_state <> x.to_state;

-- name: dead_groups
-- Dead tasks that need a person, by reason and kind, with the group's evidence: the code
-- versions of their last claims, their final error categories, the range of attempts, and the
-- first and last failure among them (a failure: a change of state with an error category, or
-- into dead). One statement. A task's evidence is on its row (0017: claimed_version,
-- first_failure_at; its last failure is its death, finished_at); a task older than 0017
-- (evidence_on_row false) has its transitions read through the (task_id, seq) index instead.
SELECT t.last_reason AS reason, t.kind, COUNT(*) AS n, MIN(t.finished_at) AS oldest,
       string_agg(DISTINCT COALESCE(CASE WHEN t.evidence_on_row THEN t.claimed_version
                                         ELSE f.version END, '?'), ',') AS versions,
       string_agg(DISTINCT COALESCE(t.last_error_category, '-'), ',') AS categories,
       MIN(t.attempts) AS attempts_min, MAX(t.attempts) AS attempts_max,
       MIN(CASE WHEN t.evidence_on_row THEN t.first_failure_at ELSE f.first_failure END)
           AS first_failure,
       MAX(CASE WHEN t.evidence_on_row THEN t.finished_at ELSE f.last_failure END)
           AS last_failure
FROM jobtrail_tasks t
LEFT JOIN LATERAL (
    -- include: dead_log_evidence
    -- a condition on t alone: it gates the scan (read for a task older than 0017 only)
      AND NOT t.evidence_on_row
) f ON true
WHERE t.state = 'dead' AND t.dismissed_at IS NULL
GROUP BY t.last_reason, t.kind
ORDER BY n DESC, reason, kind;

-- fragment: dead_log_evidence
-- The dead-letter evidence of the task t as its transitions say (its first and last failure,
-- the version of its last claim): read for a task older than 0017 (dead_groups,
-- dead_tasks_evidence, each adding the gate), and compared with the row (check_row_evidence).
    SELECT MIN(x.at) FILTER (WHERE x.from_state IS DISTINCT FROM x.to_state
                               AND (x.error_category IS NOT NULL OR x.to_state = 'dead'))
               AS first_failure,
           MAX(x.at) FILTER (WHERE x.from_state IS DISTINCT FROM x.to_state
                               AND (x.error_category IS NOT NULL OR x.to_state = 'dead'))
               AS last_failure,
           (array_agg(x.data ->> 'version' ORDER BY x.seq DESC)
               FILTER (WHERE x.reason = 'claimed'))[1] AS version
    FROM jobtrail_transition_log x WHERE x.task_id = t.id

-- name: prune_select
SELECT id FROM jobtrail_tasks t
WHERE t.state IN ('succeeded', 'cancelled')
  AND t.finished_at < now() - make_interval(secs => %(older_than)s::float8)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.after_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_outbox o WHERE o.task_id = t.id AND o.state = 'pending')
ORDER BY t.finished_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: prune_guard_on
SELECT set_config('jobtrail.pruning', 'on', true);

-- name: prune_guard_off
SELECT set_config('jobtrail.pruning', 'off', true);

-- name: prune_transitions
DELETE FROM jobtrail_transition_log WHERE task_id = ANY(%(ids)s::bigint[]);

-- name: prune_enqueued_count
-- The enqueued transitions on the rows of the pruned tasks :ids (0027), counted with the log's
-- rows pruned: they go with their rows.
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE id = ANY(%(ids)s::bigint[]) AND enq_actor IS NOT NULL;

-- name: prune_steps
DELETE FROM jobtrail_steps WHERE task_id = ANY(%(ids)s::bigint[]);

-- name: prune_outbox
DELETE FROM jobtrail_outbox WHERE task_id = ANY(%(ids)s::bigint[]);

-- name: prune_tasks
DELETE FROM jobtrail_tasks WHERE id = ANY(%(ids)s::bigint[])
  AND state IN ('succeeded', 'cancelled');

-- name: stats_window_start
-- The time of the skip+1-th newest transition at or after since, none when the window holds
-- fewer: stats then reads the window from there (at most that many transitions, through the
-- (at) index newest first), so its cost follows the bound, not the log's size.
-- The log table's newest and the enqueued transitions on the rows of the tasks created since
-- (0027; found as stats_reasons finds them), each part at most skip+1 long.
SELECT at FROM (
    (SELECT at FROM jobtrail_transition_log WHERE at >= %(since)s
     ORDER BY at DESC LIMIT %(skip)s + 1)
    UNION ALL
    (SELECT t.created_at FROM jobtrail_tasks t
     WHERE t.id > COALESCE((SELECT m.last_id FROM jobtrail_id_marks m
                             WHERE m.at <= %(since)s::timestamptz ORDER BY m.at DESC LIMIT 1), 0)
       -- a range of ids: the planner then reads it through the primary key
       AND t.id <= (SELECT last_value FROM jobtrail_tasks_id_seq)
       AND t.enq_actor IS NOT NULL AND t.created_at >= %(since)s
     ORDER BY t.created_at DESC LIMIT %(skip)s + 1)) u
ORDER BY at DESC OFFSET %(skip)s LIMIT 1;

-- name: stats_open_bounded
-- stats_open with the queued tasks of each (queue, kind) counted up to upto: the groups are
-- found by a skip scan of jobtrail_tasks_queued_kind (one probe per group; kind <> '' is its
-- predicate's, which keeps the claim off it), each group's count
-- and oldest due task read from the same index; the other open states are counted exactly.
WITH RECURSIVE g(queue, kind) AS (
    (SELECT queue, kind FROM jobtrail_tasks WHERE state = 'queued' AND kind <> ''
     ORDER BY queue, kind LIMIT 1)
    UNION ALL
    SELECT n.queue, n.kind FROM g
    JOIN jobtrail_tasks n ON n.id = (
        SELECT id FROM jobtrail_tasks
        WHERE state = 'queued' AND kind <> '' AND (queue, kind) > (g.queue, g.kind)
        ORDER BY queue, kind LIMIT 1)
)
SELECT g.queue, g.kind, 'queued' AS state,
       (SELECT COUNT(*) FROM (SELECT 1 FROM jobtrail_tasks t
                              WHERE t.state = 'queued' AND t.kind <> '' AND t.queue = g.queue
                                AND t.kind = g.kind
                              -- the index's order: no plan counts by a scan of the table
                              ORDER BY t.run_at LIMIT %(upto)s) c) AS n,
       (SELECT MIN(t.run_at) FROM jobtrail_tasks t
        WHERE t.state = 'queued' AND t.kind <> '' AND t.queue = g.queue AND t.kind = g.kind
          AND t.run_at <= now()) AS oldest_due
FROM g
UNION ALL
SELECT queue, kind, state, COUNT(*) AS n, NULL::timestamptz AS oldest_due
FROM jobtrail_tasks
WHERE state IN ('leased', 'cancel_requested')
GROUP BY queue, kind, state
UNION ALL
SELECT queue, kind, state, COUNT(*) AS n, NULL::timestamptz AS oldest_due
FROM jobtrail_tasks
WHERE state IN ('awaiting_receipt', 'waiting')
  AND state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                'cancel_requested')
GROUP BY queue, kind, state;

-- name: task_claim_keyed
-- The claim of a keyed queue's tasks that carry a concurrency key, under the queue's lock
-- (queue_limits_lock: claims of the queue take turns, and this statement's snapshot, taken
-- after the lock, sees every lease the last claimer committed). The keys with queued tasks are
-- walked as a skip scan of jobtrail_tasks_keyed_due (one probe per key); of each key, the first
-- tasks in due order (run_at, id) while the key's leased tasks (jobtrail_tasks_keyed_held) and
-- the tasks before them stay within the task's concurrency_limit: a key's tasks start in due
-- order, and a head that is not due, or of a kind this worker does not serve, holds the rest
-- back. Then the fair claim's rooms per tenant (:rooms, :default_room) and :limit.
WITH RECURSIVE keys AS (
    (SELECT tenant, ckey AS key FROM jobtrail_tasks
     WHERE state = 'queued' AND queue = %(queue)s AND ckey IS NOT NULL
     ORDER BY tenant, ckey LIMIT 1)
    UNION ALL
    SELECT n.tenant, n.key FROM keys CROSS JOIN LATERAL (
        SELECT tenant, ckey AS key FROM jobtrail_tasks
        WHERE state = 'queued' AND queue = %(queue)s AND ckey IS NOT NULL
          AND (tenant, ckey) > (keys.tenant, keys.key)
        ORDER BY tenant, ckey LIMIT 1) n
), c AS (
    SELECT h.id, h.tenant, h.priority, h.run_at
    FROM keys
    CROSS JOIN LATERAL (
        SELECT COUNT(*) AS n FROM jobtrail_tasks x
        WHERE x.queue = %(queue)s AND x.tenant = keys.tenant AND x.ckey = keys.key
          AND x.state IN ('leased', 'cancel_requested')) held
    CROSS JOIN LATERAL (
        SELECT id, tenant, priority, run_at, kind, concurrency_limit, expires_at,
               ROW_NUMBER() OVER (ORDER BY run_at, id) AS pos
        FROM jobtrail_tasks
        WHERE state = 'queued' AND queue = %(queue)s AND tenant = keys.tenant
          AND ckey = keys.key
        ORDER BY run_at, id
        LIMIT %(limit)s) h
    WHERE h.pos + held.n <= h.concurrency_limit AND h.run_at <= now()
      AND h.kind = ANY(%(kinds)s::text[]) AND (h.expires_at IS NULL OR h.expires_at > now())
), f AS (
    SELECT c.*, ROW_NUMBER() OVER (PARTITION BY c.tenant ORDER BY c.priority DESC, c.run_at, c.id)
                AS tn
    FROM c
), upd AS (
    -- include: claim_set
    WHERE t.id = ANY(ARRAY(
        SELECT w.id FROM (
            SELECT f.id, f.priority, f.run_at FROM f
            LEFT JOIN jsonb_each_text(%(rooms)s::jsonb) r ON r.key = f.tenant
            WHERE f.tn <= COALESCE(r.value::int, %(default_room)s::int)
            ORDER BY f.priority DESC, f.run_at, f.id
            LIMIT %(limit)s) o
        JOIN jobtrail_tasks w ON w.id = o.id
        WHERE w.state = 'queued'
        ORDER BY o.priority DESC, o.run_at, o.id
        FOR UPDATE OF w))
    RETURNING t.*, EXTRACT(EPOCH FROM now() - t.run_at)::float8 AS waited
), log AS (
    -- include: claim_log
)
SELECT * FROM upd;

-- name: task_set_key
-- A task just inserted (queued, in this transaction) gets its concurrency key and limit.
UPDATE jobtrail_tasks SET ckey = %(key)s::text, concurrency_limit = %(limit)s::int
WHERE id = %(id)s;

-- name: queue_mark_keyed
-- The queue of a keyed task claims through the limited claim from now on (in the transaction
-- that stores the task, so no claim sees the task without the mark).
INSERT INTO jobtrail_queues (name, paused, keyed, updated_at)
SELECT %(name)s::text, false, true, now()
WHERE NOT EXISTS (SELECT 1 FROM jobtrail_queues WHERE name = %(name)s::text AND keyed)
ON CONFLICT (name) DO UPDATE SET keyed = true;

-- name: key_holders
-- The tasks of (queue, tenant, key) that hold it now (leased), oldest claim first: explain.
SELECT id, state FROM jobtrail_tasks
WHERE queue = %(queue)s AND tenant = %(tenant)s AND ckey = %(key)s
  AND state IN ('leased', 'cancel_requested')
ORDER BY updated_at, id;

-- name: key_ahead_count
-- The queued tasks of (queue, tenant, key) before the task at (:run_at, :id): explain.
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = %(queue)s AND tenant = %(tenant)s AND ckey = %(key)s
  AND state = 'queued' AND (run_at, id) < (%(run_at)s::timestamptz, %(id)s::bigint);

-- name: kind_rate_list
-- The rates per kind of :queue (NULL: of every queue), with their buckets.
SELECT queue, kind, per_second, burst, tokens, tokens_at FROM jobtrail_kind_rates
WHERE %(queue)s::text IS NULL OR queue = %(queue)s::text
ORDER BY queue, kind;

-- name: kind_rate_set
-- A new rate for one kind of a queue: its bucket starts over (full).
INSERT INTO jobtrail_kind_rates (queue, kind, per_second, burst, updated_at)
VALUES (%(queue)s, %(kind)s, %(per_second)s, %(burst)s, now())
ON CONFLICT (queue, kind) DO UPDATE
SET per_second = excluded.per_second, burst = excluded.burst, tokens = NULL, tokens_at = NULL,
    updated_at = now()
RETURNING queue, kind, per_second, burst;

-- name: kind_rate_delete
DELETE FROM jobtrail_kind_rates WHERE queue = %(queue)s AND kind = %(kind)s;

-- name: queue_kind_rated_sync
-- Whether the queue claims through the limited claim for its kinds' rates.
UPDATE jobtrail_queues
SET kind_rated = EXISTS (SELECT 1 FROM jobtrail_kind_rates k WHERE k.queue = %(name)s::text)
WHERE name = %(name)s::text;

-- name: kind_tokens_set
UPDATE jobtrail_kind_rates SET tokens = %(tokens)s, tokens_at = now()
WHERE queue = %(queue)s AND kind = %(kind)s;

-- name: task_claim_keyed_due
-- task_claim_keyed's quick look, under the same queue lock: the first :scan due keyed tasks
-- of the queue in the claim's order (jobtrail_tasks_keyed_order), each taken when its key's
-- leased tasks plus its key's queued tasks before it (bounded probes of
-- jobtrail_tasks_keyed_due) stay under its concurrency_limit. It reads about :scan rows
-- whatever the number of keys; the driver follows with task_claim_keyed (the walk of every
-- key) only when this one finds less than its :limit — so a backlog under a busy key that
-- fills the first :scan rows costs one walk of the keys, not a read of the backlog.
WITH held AS (
    SELECT tenant, ckey AS key, COUNT(*) AS n FROM jobtrail_tasks
    WHERE queue = %(queue)s AND state IN ('leased', 'cancel_requested')
      AND ckey IS NOT NULL
    GROUP BY tenant, ckey
), c AS (
    SELECT s.id, s.tenant, s.priority, s.run_at
    FROM (SELECT x.*,
                 -- its place among the rows read of its key: a cheap first cut (a key's
                 -- later rows need no probe when its limit is already used up before them)
                 ROW_NUMBER() OVER (PARTITION BY x.tenant, x.ckey
                                    ORDER BY x.run_at, x.id) AS pos
          FROM (SELECT id, tenant, ckey, priority, run_at, kind, concurrency_limit,
                       expires_at
                FROM jobtrail_tasks
                WHERE state = 'queued' AND queue = %(queue)s AND ckey IS NOT NULL
                ORDER BY priority DESC, run_at, id
                LIMIT %(scan)s) x) s
    LEFT JOIN held h ON h.tenant = s.tenant AND h.key = s.ckey
    WHERE s.run_at <= now() AND s.kind = ANY(%(kinds)s::text[])
      AND (s.expires_at IS NULL OR s.expires_at > now())
      AND COALESCE(h.n, 0) + s.pos <= s.concurrency_limit
      -- among its key's first (limit - leased) queued tasks in due order: a read of the
      -- index's first entries of the key, however long its backlog
      AND s.id IN (
          SELECT e.id FROM jobtrail_tasks e
          WHERE e.state = 'queued' AND e.queue = %(queue)s AND e.tenant = s.tenant
            AND e.ckey = s.ckey
          ORDER BY e.run_at, e.id
          LIMIT s.concurrency_limit - COALESCE(h.n, 0))
), f AS (
    SELECT c.*, ROW_NUMBER() OVER (PARTITION BY c.tenant ORDER BY c.priority DESC, c.run_at, c.id)
                AS tn
    FROM c
), upd AS (
    -- include: claim_set
    WHERE t.id = ANY(ARRAY(
        SELECT w.id FROM (
            SELECT f.id, f.priority, f.run_at FROM f
            LEFT JOIN jsonb_each_text(%(rooms)s::jsonb) r ON r.key = f.tenant
            WHERE f.tn <= COALESCE(r.value::int, %(default_room)s::int)
            ORDER BY f.priority DESC, f.run_at, f.id
            LIMIT %(limit)s) o
        JOIN jobtrail_tasks w ON w.id = o.id
        WHERE w.state = 'queued'
        ORDER BY o.priority DESC, o.run_at, o.id
        FOR UPDATE OF w))
    RETURNING t.*, EXTRACT(EPOCH FROM now() - t.run_at)::float8 AS waited
), log AS (
    -- include: claim_log
)
SELECT * FROM upd;

-- name: id_mark
-- The id marks (0027): the highest id the identity sequence has handed out (is_called false:
-- none yet), read before the mark's time is taken (clock_timestamp() in the projection, after
-- the scan): a task created at or after that time took a higher id. At most one a minute
-- (whoever sweeps first); marks older than eight days go.
WITH old AS (
    DELETE FROM jobtrail_id_marks WHERE at < now() - interval '8 days'
)
INSERT INTO jobtrail_id_marks (at, last_id)
SELECT clock_timestamp(), CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END
FROM (SELECT last_value, is_called FROM jobtrail_tasks_id_seq) s
WHERE NOT EXISTS (SELECT 1 FROM jobtrail_id_marks WHERE at > now() - interval '50 seconds')
ON CONFLICT DO NOTHING;
