-- Named queries for PostgreSQL. Every state change and its transition row are one statement
-- (a data-modifying CTE), so a move is atomic even on a caller's autocommit connection.
-- now() is the transaction's start time by the database clock; every decision uses it.
-- Parameters are cast where PostgreSQL could not infer their type from context.

-- name: db_now
SELECT now() AS now;

-- name: db_now_for_big_read
-- db_now, and no JIT compilation for the rest of the transaction: a read over a big store
-- whose plan is estimated costly enough to be compiled (the dead-letter groups: ~230 ms of
-- compilation for a ~30 ms read). Our own sessions run with jit off already; this holds behind
-- a transaction pooler too, where no session setting may be made.
SELECT now() AS now, set_config('jit', 'off', true) AS jit;

-- fragment: claim_set
-- Fragments are shared by the queries that include them (see queries.py).
-- Edge 3 (queued -> leased, claimed) on the rows the WHERE that follows picks.
    UPDATE jobtrail_tasks t
    SET state = 'leased',
        lease_owner = %(owner)s,
        lease_expires_at = now() + make_interval(secs => t.lease_seconds),
        attempts = t.attempts + 1,
        seq = t.seq + 1,
        last_reason = 'claimed',
        updated_at = now(),
        claimed_version = %(version)s::text,
        -- claimed: no longer open to debounce (0023)
        debounce_key = NULL

-- fragment: claim_due_head
-- The claim's WHERE: the first :limit due tasks of one queue in the fair order (fair_due
-- follows, then a tail). Candidates are read without locks, three batches' worth in fair
-- order; then the claim locks the first :limit of them still queued with SKIP LOCKED, so
-- many workers claim at once without waiting on each other (one that finds the first batch
-- taken takes the next) and the claim locks only what it takes. The id = ANY(ARRAY(...))
-- shape keeps the update on the primary key for any batch size.
    WHERE t.id = ANY(ARRAY(
        SELECT w.id FROM unnest(ARRAY(
            SELECT f.id FROM (

-- fragment: fair_due
-- Fairness: priority first, then tenants in turn, then due time. The tenants with
-- queued tasks of the queue are walked as a skip scan of jobtrail_tasks_due_tenant (one probe
-- per tenant, not one row per task); each tenant gives its first due tasks in its own order,
-- as many as its fair share of the candidates needs (all three batches with one tenant, one
-- task each with hundreds), so a claim reads about 3 x :limit rows plus one probe per tenant.
-- tn: a task's place within its tenant; turn: within its tenant and priority (the round it is
-- taken in). :mode says which queues may be claimed so: 'unlimited' (not paused, no
-- concurrency or rate limit: checked in the same statement, so a queue that has one yields
-- nothing here and is claimed by task_claim under its queue lock), 'unpaused', or 'limited'
-- (the caller holds the queue's lock and has checked).
                WITH RECURSIVE tenants AS (
                    (SELECT tenant FROM jobtrail_tasks
                     WHERE state = 'queued' AND queue = %(queue)s AND ckey IS NULL
                       AND NOT EXISTS (
                           SELECT 1 FROM jobtrail_queues q
                           WHERE q.name = %(queue)s
                             AND ((%(mode)s::text <> 'limited' AND q.paused)
                                  OR (%(mode)s::text = 'unlimited'
                                      -- a keyed queue's unkeyed tasks need no lock
                                      AND (num_nonnulls(q.limit_total, q.limit_per_tenant,
                                                        q.rate_per_second, q.rate_per_tenant)
                                           > 0 OR q.kind_rated))))
                     ORDER BY tenant LIMIT 1)
                    UNION ALL
                    SELECT (SELECT n.tenant FROM jobtrail_tasks n
                            WHERE n.state = 'queued' AND n.queue = %(queue)s
                              AND n.ckey IS NULL AND n.tenant > tenants.tenant
                            ORDER BY n.tenant LIMIT 1)
                    FROM tenants WHERE tenants.tenant IS NOT NULL
                )
                SELECT c.id, c.tenant, c.priority, c.run_at, c.tn, c.turn
                FROM tenants CROSS JOIN LATERAL (
                    -- numbered here, per tenant, where the index already gives the order
                    -- (no sort of every candidate by tenant). The second LIMIT only tells the
                    -- planner how few rows this is (its guess for a LIMIT by subquery is a
                    -- tenth of the table, which would cost the plan a JIT compilation of
                    -- 100 ms).
                    SELECT share.*,
                           ROW_NUMBER() OVER (ORDER BY priority DESC, run_at, id) AS tn,
                           ROW_NUMBER() OVER (PARTITION BY priority ORDER BY run_at, id) AS turn
                    FROM (SELECT * FROM (
                        SELECT id, tenant, priority, run_at FROM jobtrail_tasks
                        WHERE state = 'queued' AND queue = %(queue)s AND tenant = tenants.tenant
                          AND run_at <= now() AND kind = ANY(%(kinds)s::text[])
                          -- keyed tasks are not in the index: task_claim_keyed takes them
                          AND ckey IS NULL
                          AND (expires_at IS NULL OR expires_at > now())
                        ORDER BY priority DESC, run_at, id
                        LIMIT (SELECT (3 * %(limit)s::int + GREATEST(1, COUNT(tenant)) - 1)
                                      / GREATEST(1, COUNT(tenant))
                               FROM tenants)) own
                          LIMIT 3 * %(limit)s::int) share) c

-- fragment: claim_fair_tail
            ) f
            ORDER BY f.priority DESC, f.turn, f.run_at, f.id
            LIMIT 3 * %(limit)s::int)) WITH ORDINALITY AS o(id, ord)
        JOIN jobtrail_tasks w ON w.id = o.id
        WHERE w.state = 'queued'
        ORDER BY o.ord
        LIMIT %(limit)s
        FOR UPDATE OF w SKIP LOCKED))
    RETURNING t.*, EXTRACT(EPOCH FROM now() - t.run_at)::float8 AS waited

-- fragment: claim_gate
-- The unlimited claims' first look (task_claim_unlimited, task_complete_and_claim and their
-- _fair twins): is the queue open to them (not paused, no concurrency or rate limit), and do
-- tasks of more than one tenant wait in it (two probes of jobtrail_tasks_due_tenant: its
-- first and last tenant)? With one tenant the fair order is the due order, and the claim locks
-- the first :limit due tasks of that tenant straight off jobtrail_tasks_due_tenant; with
-- several the driver uses the _fair twin, whose candidates, numbering and sort cost the
-- planner and the server about twice as much.
        SELECT open, lo AS first_tenant, lo IS DISTINCT FROM hi AS many
        FROM (SELECT NOT EXISTS (
                         SELECT 1 FROM jobtrail_queues q
                         WHERE q.name = %(queue)s
                           AND (q.paused OR q.kind_rated
                                OR num_nonnulls(q.limit_total, q.limit_per_tenant,
                                                q.rate_per_second, q.rate_per_tenant) > 0))
                     AS open,
                     (SELECT tenant FROM jobtrail_tasks
                      WHERE state = 'queued' AND queue = %(queue)s AND ckey IS NULL
                      ORDER BY tenant LIMIT 1) AS lo,
                     (SELECT tenant FROM jobtrail_tasks
                      WHERE state = 'queued' AND queue = %(queue)s AND ckey IS NULL
                      ORDER BY tenant DESC LIMIT 1)
                     AS hi) s

-- fragment: claim_one_tenant_where
-- The WHERE of an unlimited claim when the gate found at most one tenant waiting: that
-- tenant's first :limit due tasks in the due order, locked with SKIP LOCKED as they are read
-- (nothing when the gate found the queue closed or several tenants: the driver then takes the
-- fair twin).
    WHERE t.id = ANY(ARRAY(
        SELECT w.id FROM jobtrail_tasks w
        WHERE (SELECT open AND NOT many FROM gate)
          AND w.state = 'queued' AND w.queue = %(queue)s AND w.ckey IS NULL
          AND w.tenant = (SELECT first_tenant FROM gate) AND w.run_at <= now()
          AND w.kind = ANY(%(kinds)s::text[])
          AND (w.expires_at IS NULL OR w.expires_at > now())
        ORDER BY w.priority DESC, w.run_at, w.id
        LIMIT %(limit)s
        FOR UPDATE OF w SKIP LOCKED))
    RETURNING t.*, EXTRACT(EPOCH FROM now() - t.run_at)::float8 AS waited

-- fragment: claim_log
-- The claimed transitions of the rows of the CTE upd.
    INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor,
                                      attempt, at, data)
    SELECT id, seq, 'queued', 'leased', 'claimed', %(owner)s, attempts, updated_at,
           %(data)s::jsonb || jsonb_build_object('waited', round(waited::numeric, 6))
    FROM upd

-- fragment: complete_update
-- Edge 4 (leased -> succeeded, completed) for several attempts of one worker: the same guard
-- as task_move, per row (holder, attempt, unexpired lease). Workflow children are excluded
-- (their parents are re-derived by the single-task path). The id = ANY(...) shape keeps the
-- update on the primary key whatever the batch size (a join with unnest(...) gets a hash join
-- over the whole table when the planner guesses wrong).
    UPDATE jobtrail_tasks t
    SET state = 'succeeded',
        last_reason = 'completed',
        seq = t.seq + 1,
        updated_at = now(),
        finished_at = now(),
        lease_owner = NULL,
        lease_expires_at = NULL,
        receipt_deadline = NULL,
        dismissed_at = NULL,
        -- each task's return value (a JSON array aligned with ids; JSON null = none)
        result = NULLIF((%(results)s::jsonb) -> (array_position(%(ids)s::bigint[], t.id) - 1),
                        'null'::jsonb)
    WHERE t.id = ANY(%(ids)s::bigint[])
      -- written so that no index on state or lease fits: the planner's statistics rarely see
      -- leased rows (ANALYZE runs when few are leased), and it would then read every leased
      -- task of every worker through the lease index instead of these ids on the primary key
      AND t.state || '' = 'leased'
      AND t.lease_owner = %(owner)s::text
      AND t.attempts = (%(attempts)s::int[])[array_position(%(ids)s::bigint[], t.id)]
      AND t.lease_expires_at + interval '0 s' > now()
      AND t.parent_id IS NULL
    RETURNING t.id, t.seq, t.attempts, t.updated_at

-- fragment: complete_log
-- The completed transitions of the rows of the CTE done.
    INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor,
                                      attempt, at, data)
    SELECT id, seq, 'leased', 'succeeded', 'completed', %(actor)s::text, attempts, updated_at,
           '{}'::jsonb
    FROM done

-- name: task_insert
-- Returns only what the database generated (id, created_at, run_at): the driver builds the
-- rest of the row from what it inserted (base.inserted_row). The wake-up rides along: NOTIFY
-- is transactional, so it is sent when (and only if) the insert commits — in the caller's
-- transaction, or at once on an autocommit connection.
WITH ins AS (
    INSERT INTO jobtrail_tasks (
        kind, queue, tenant, state, payload, payload_hash, idempotency_key, priority,
        max_attempts, lease_seconds, reentrant, run_at, parent_id, last_reason, seq,
        budget_started_at, created_at, updated_at, enq_state, enq_actor, enq_data)
    VALUES (
        %(kind)s, %(queue)s, %(tenant)s, %(state)s, %(payload)s::jsonb, %(payload_hash)s,
        %(idempotency_key)s::text, %(priority)s, %(max_attempts)s, %(lease_seconds)s,
        %(reentrant)s,
        COALESCE(%(run_at)s::timestamptz,
                 now() + make_interval(secs => COALESCE(%(delay)s::float8, 0))),
        %(parent_id)s::bigint, 'enqueued', 1, now(), now(), now(),
    -- its enqueued transition, on the row (0027)
    %(state)s::text, %(actor)s::text, NULLIF(%(data)s::jsonb, '{}'::jsonb))
    ON CONFLICT (tenant, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, queue, state, created_at, run_at
)
SELECT id, created_at, run_at, pg_notify(jobtrail_channel('queued'), queue)::text AS notified
FROM ins;

-- name: task_insert_handoff
-- task_insert for a single enqueue on its own (task_insert_alone), with the hand-off (0018,
-- docs/design_idle_handoff.md): when the task would be claimed at once (queued and due now,
-- no parent or idempotency key, its queue neither paused nor limited nor rated and with
-- nothing else queued, so no order, priority or tenant turn is passed over) and a live idle
-- worker serves its queue and kind (pick: the longest idle; live = its LISTEN session holds
-- its advisory lock, which this transaction then cannot take), the task is inserted leased to
-- that worker as a claim leases it, both edges are logged (enqueued, then claimed by the
-- worker, at the same time), the worker's row is marked handed and its own channel is sent
-- what the database generated and the payload (only the id and owner when that would not fit
-- in NOTIFY's 8,000 bytes: the worker then reads the row; the rest of a handed row the worker
-- knows from its kind: handoff.py). Otherwise it is task_insert. Returns what task_insert
-- returns, and whether any worker is registered.
WITH pick AS (
    SELECT w.owner, w.channel, w.version
    FROM jobtrail_idle_workers w
    WHERE w.handed IS NULL
      AND %(state)s::text = 'queued' AND %(parent_id)s::bigint IS NULL
      AND %(idempotency_key)s::text IS NULL AND %(run_at)s::timestamptz IS NULL
      AND COALESCE(%(delay)s::float8, 0) <= 0
      AND %(queue)s::text = ANY(w.queues) AND %(kind)s::text = ANY(w.kinds)
      AND NOT EXISTS (
          SELECT 1 FROM jobtrail_queues q
          WHERE q.name = %(queue)s::text
            AND (q.paused OR q.limit_total IS NOT NULL OR q.limit_per_tenant IS NOT NULL
                 OR q.rate_per_second IS NOT NULL OR q.rate_per_tenant IS NOT NULL
                 OR q.kind_rated))
      AND NOT EXISTS (
          SELECT 1 FROM jobtrail_tasks x
          WHERE x.state = 'queued' AND x.queue = %(queue)s::text AND x.ckey IS NULL)
      AND NOT pg_try_advisory_xact_lock_shared(w.lock_key)
    ORDER BY w.since
    LIMIT 1
    FOR UPDATE OF w SKIP LOCKED
), ins AS (
    INSERT INTO jobtrail_tasks (
        kind, queue, tenant, state, payload, payload_hash, idempotency_key, priority,
        max_attempts, lease_seconds, reentrant, run_at, parent_id, last_reason, seq,
        budget_started_at, created_at, updated_at, lease_owner, lease_expires_at, attempts,
        claimed_version, enq_state, enq_actor, enq_data)
    SELECT
        %(kind)s, %(queue)s, %(tenant)s,
        CASE WHEN p.owner IS NULL THEN %(state)s::text ELSE 'leased' END,
        %(payload)s::jsonb, %(payload_hash)s, %(idempotency_key)s::text, %(priority)s,
        %(max_attempts)s, %(lease_seconds)s, %(reentrant)s,
        COALESCE(%(run_at)s::timestamptz,
                 now() + make_interval(secs => COALESCE(%(delay)s::float8, 0))),
        %(parent_id)s::bigint,
        CASE WHEN p.owner IS NULL THEN 'enqueued' ELSE 'claimed' END,
        CASE WHEN p.owner IS NULL THEN 1 ELSE 2 END,
        now(), now(), now(),
        p.owner,
        CASE WHEN p.owner IS NULL THEN NULL
             ELSE now() + make_interval(secs => %(lease_seconds)s::float8) END,
        CASE WHEN p.owner IS NULL THEN 0 ELSE 1 END,
        p.version,
    -- its enqueued transition, on the row (0027)
    %(state)s::text, %(actor)s::text, NULLIF(%(data)s::jsonb, '{}'::jsonb)
    FROM (SELECT 1) one LEFT JOIN pick p ON true
    ON CONFLICT (tenant, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, queue, created_at, run_at, lease_owner, lease_expires_at, claimed_version
), log AS (
    -- the enqueued transition is on the row (0027); the claim's is the log's first row
    INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor,
                                         attempt, at, data)
    SELECT id, 2, 'queued', 'leased', 'claimed', lease_owner, 1, created_at,
           CASE WHEN claimed_version IS NULL THEN '{}'::jsonb
                ELSE jsonb_build_object('version', claimed_version) END
           || jsonb_build_object('waited', 0, 'handed', true)
    FROM ins WHERE lease_owner IS NOT NULL
), mark AS (
    UPDATE jobtrail_idle_workers w SET handed = ins.id
    FROM ins, pick WHERE w.owner = pick.owner
)
SELECT ins.id, ins.created_at, ins.run_at,
       CASE WHEN p.owner IS NULL THEN pg_notify(jobtrail_channel('queued'), ins.queue)
            -- the longest the JSON of the rest can be (each character escaped as \u0000)
            WHEN octet_length(%(payload)s::text) + 6 * (octet_length(%(kind)s::text)
                 + octet_length(%(queue)s::text) + octet_length(%(tenant)s::text)) <= 7000
            THEN pg_notify(p.channel,
                json_build_object('id', ins.id, 'lease_owner', ins.lease_owner,
                                  'created_at', ins.created_at, 'run_at', ins.run_at,
                                  'lease_expires_at', ins.lease_expires_at,
                                  'kind', %(kind)s::text, 'queue', %(queue)s::text,
                                  'tenant', %(tenant)s::text, 'priority', %(priority)s::int,
                                  'max_attempts', %(max_attempts)s::int,
                                  'lease_seconds', %(lease_seconds)s::float8,
                                  'payload', %(payload)s::json)::text)
            ELSE pg_notify(p.channel, json_build_object('id', ins.id,
                                                        'lease_owner', ins.lease_owner)::text)
       END::text AS notified,
       -- whether any worker is registered (the driver skips this statement for a while when
       -- none is: handoff.py _may_hand_off)
       p.owner IS NOT NULL OR EXISTS (SELECT 1 FROM jobtrail_idle_workers) AS idle_seen
FROM ins LEFT JOIN pick p ON true;

-- name: task_insert_many
-- Several tasks without idempotency keys or parents, with one actor and one transition data,
-- in one statement, each with its creating transition (enqueue_many's common case). :rows is
-- one JSON array of [kind, queue, tenant, state, payload (JSON text), payload_hash, priority,
-- max_attempts, lease_seconds, reentrant, run_at (ISO 8601 with offset), delay] (one
-- parameter the client writes with json.dumps, instead of twelve arrays dumped element by
-- element). Rows are inserted in input order (ORDER BY ord), so their ids ascend in input
-- order. Returns only what the database generated, as task_insert does.
WITH src AS (
    SELECT e ->> 0 AS kind, e ->> 1 AS queue, e ->> 2 AS tenant, e ->> 3 AS state,
           e ->> 4 AS payload, e ->> 5 AS payload_hash, (e ->> 6)::int AS priority,
           (e ->> 7)::int AS max_attempts, (e ->> 8)::float8 AS lease_seconds,
           (e ->> 9)::bool AS reentrant, (e ->> 10)::timestamptz AS run_at,
           (e ->> 11)::float8 AS delay, ord
    FROM jsonb_array_elements(%(rows)s::jsonb) WITH ORDINALITY AS a(e, ord)
), ins AS (
    INSERT INTO jobtrail_tasks (
        kind, queue, tenant, state, payload, payload_hash, priority, max_attempts,
        lease_seconds, reentrant, run_at, last_reason, seq, budget_started_at, created_at,
        updated_at, enq_state, enq_actor, enq_data)
    SELECT kind, queue, tenant, state, payload::jsonb, payload_hash, priority, max_attempts,
           lease_seconds, reentrant,
           COALESCE(run_at, now() + make_interval(secs => COALESCE(delay, 0))),
           'enqueued', 1, now(), now(), now(),
           -- the enqueued transitions, on the rows (0027)
           state, %(actor)s::text, NULLIF(%(data)s::jsonb, '{}'::jsonb)
    FROM src ORDER BY ord
    RETURNING id, state, created_at, run_at
)
SELECT id, created_at, run_at FROM ins ORDER BY id;

-- name: task_insert_uniform
-- task_insert_many for tasks alike in everything but their payloads (a bulk enqueue of one
-- kind: the usual case): the shared columns are parameters once, the payloads and their hashes
-- two text array literals. A fifth less work for the server than a JSON row per task. Returns
-- one row: the ids in input order (ascending), and the creation and due time all share (now()
-- is the transaction's time; run_at one expression): no time written out per task.
WITH src AS (
    SELECT p, h, ord
    FROM unnest(%(payloads)s::text[], %(hashes)s::text[]) WITH ORDINALITY AS u(p, h, ord)
), ins AS (
    INSERT INTO jobtrail_tasks (
        kind, queue, tenant, state, payload, payload_hash, priority, max_attempts,
        lease_seconds, reentrant, run_at, last_reason, seq, budget_started_at, created_at,
        updated_at, enq_state, enq_actor, enq_data)
    SELECT %(kind)s::text, %(queue)s::text, %(tenant)s::text, %(state)s::text, p::jsonb, h,
           %(priority)s::int, %(max_attempts)s::int, %(lease_seconds)s::float8,
           %(reentrant)s::bool,
           COALESCE(%(run_at)s::timestamptz,
                    now() + make_interval(secs => COALESCE(%(delay)s::float8, 0))),
           'enqueued', 1, now(), now(), now(),
           -- the enqueued transitions, on the rows (0027)
           %(state)s::text, %(actor)s::text, NULLIF(%(data)s::jsonb, '{}'::jsonb)
    FROM src ORDER BY ord
    RETURNING id, state, created_at, run_at
)
SELECT array_agg(id ORDER BY id), min(created_at), min(run_at) FROM ins;

-- name: task_get_by_key
SELECT * FROM jobtrail_tasks
WHERE tenant = %(tenant)s AND kind = %(kind)s AND idempotency_key = %(idempotency_key)s;

-- name: task_get
SELECT *, now() AS db_now FROM jobtrail_tasks WHERE id = %(id)s;

-- name: task_claim
-- One queue at a time (of those task_claim found without limits under their locks), so the
-- claim reads the queue's due tasks in order and stops at the limit instead of sorting every
-- queued row of several queues.
WITH upd AS (
    -- include: claim_set
    -- include: claim_due_head
    -- include: fair_due
    -- include: claim_fair_tail
), log AS (
    -- include: claim_log
)
SELECT * FROM upd;

-- name: task_claim_unlimited
-- task_claim for a queue without concurrency limits, when at most one tenant waits in it. One
-- statement that appends its own transitions, so it may run on an autocommit connection: it
-- commits before its rows come back. Returns one row of NULLs when it claims nothing; every
-- row says (fair) whether the fair twin is the one to use for this queue now.
WITH gate AS (
    -- include: claim_gate
), upd AS (
    -- include: claim_set
    -- include: claim_one_tenant_where
), log AS (
    -- include: claim_log
)
SELECT upd.*, (SELECT open AND many FROM gate) AS fair
FROM (SELECT 1) AS one LEFT JOIN upd ON true;

-- name: task_claim_unlimited_fair
-- task_claim_unlimited when tasks of several tenants wait: the fair order (fair_due).
WITH gate AS (
    -- include: claim_gate
), upd AS (
    -- include: claim_set
    -- include: claim_due_head
    -- include: fair_due
    -- include: claim_fair_tail
), log AS (
    -- include: claim_log
)
SELECT upd.*, (SELECT open AND many FROM gate) AS fair
FROM (SELECT 1) AS one LEFT JOIN upd ON true;

-- name: task_move
WITH upd AS (
    UPDATE jobtrail_tasks
    SET state = %(to_state)s,
        last_reason = %(reason)s,
        seq = seq + 1,
        updated_at = now(),
        finished_at = CASE WHEN %(terminal)s THEN now() END,
        run_at = CASE WHEN %(run_in)s::float8 IS NULL THEN run_at
                      ELSE now() + make_interval(secs => %(run_in)s::float8) END,
        lease_owner = CASE WHEN %(keep_lease)s THEN lease_owner END,
        lease_expires_at = CASE WHEN %(keep_lease)s THEN lease_expires_at END,
        attempts = CASE WHEN %(reset_attempts)s THEN 0
                        WHEN %(uncount)s THEN GREATEST(attempts - 1, 0)
                        ELSE attempts END,
        replay_count = replay_count + %(replay)s,
        budget_started_at = CASE WHEN %(reset_attempts)s THEN now()
                                 ELSE budget_started_at END,
        last_error_category = CASE WHEN %(set_error)s THEN %(error_category)s::text
                                   ELSE last_error_category END,
        last_error = CASE WHEN %(set_error)s THEN %(error)s::text ELSE last_error END,
        -- the first failure (0017): a change of state with an error category, or into dead
        first_failure_at = CASE
            WHEN first_failure_at IS NULL AND %(from_state)s::text IS DISTINCT FROM %(to_state)s
                 AND (%(error_category)s::text IS NOT NULL OR %(to_state)s::text = 'dead')
                THEN now() ELSE first_failure_at END,
        receipt_id = COALESCE(%(receipt_id)s::text, receipt_id),
        receipt_deadline = CASE
            WHEN %(to_state)s::text = 'awaiting_receipt' AND %(receipt_in)s::float8 IS NOT NULL
                THEN now() + make_interval(secs => %(receipt_in)s::float8)
            WHEN %(to_state)s::text = 'awaiting_receipt' THEN receipt_deadline END,
        dismissed_at = NULL,
        -- a success stores the handler's return value with its transition; a replay
        -- (attempts reset) starts without one
        result = CASE WHEN %(set_result)s THEN %(result)s::jsonb
                      WHEN %(reset_attempts)s THEN NULL ELSE result END,
        -- out of queued: no longer open to debounce (0023)
        debounce_key = NULL
    WHERE id = %(id)s
      AND state = %(from_state)s
      AND (%(owner)s::text IS NULL OR (lease_owner = %(owner)s::text
           AND attempts = %(attempt)s::int AND lease_expires_at > now()))
      AND (%(expired_owner)s::text IS NULL OR (lease_owner = %(expired_owner)s::text
           AND attempts = %(attempt)s::int AND lease_expires_at <= now()))
    RETURNING id, state, attempts, seq, updated_at, parent_id, queue, kind
), log AS (
    INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason,
                                      error_category, error, actor, attempt, at, note,
                                      corrects, data, traceback, error_class)
    SELECT id, seq, %(from_state)s, %(to_state)s, %(reason)s, %(error_category)s::text,
           %(error)s::text, %(actor)s,
           COALESCE(%(log_attempt)s::int, attempts + CASE WHEN %(uncount)s THEN 1 ELSE 0 END),
           updated_at, %(note)s::text, %(corrects)s::int, %(data)s::jsonb,
           %(traceback)s::text, %(error_class)s::text
    FROM upd
)
-- a terminal move wakes whoever waits for a result (app.result: LISTEN jobtrail_finished),
-- when someone does (jobtrail_result_waiters, 0014: a NOTIFY serializes commits)
SELECT upd.*,
       CASE WHEN %(terminal)s AND EXISTS (SELECT 1 FROM jobtrail_result_waiters)
            THEN pg_notify(jobtrail_channel('finished'), '')::text END AS notified
FROM upd;

-- name: task_complete_many
-- Edge 4 for several attempts of one worker in one statement, the transitions appended in
-- the same statement. Rows whose guard fails are simply not returned: the worker then decides
-- for those one by one, exactly as for a single completion.
WITH done AS (
    -- include: complete_update
), log AS (
    -- include: complete_log
)
-- the completions wake whoever waits for a result (one notification per transaction), when
-- someone does (jobtrail_result_waiters)
SELECT id, (SELECT pg_notify(jobtrail_channel('finished'), '')::text
            WHERE EXISTS (SELECT 1 FROM jobtrail_result_waiters)) AS notified
FROM done;

-- name: task_complete_and_claim
-- task_complete_many and task_claim_unlimited for one queue in one statement: the worker's
-- round trip. The completions of the last batch commit together with the claim of the next
-- (one commit, one round trip), each with the same guards as the two statements alone. The
-- claim cannot take a task this statement completes (those are leased, it takes queued ones).
-- One row comes back with the ids that completed (an array; the one row of NULLs returned
-- when nothing was claimed has them too); the others have NULL there (60 rows each with the
-- same 60 ids cost the client 165 us a round trip to parse).
WITH gate AS (
    -- include: claim_gate
), done AS (
    -- include: complete_update
), done_log AS (
    -- include: complete_log
), upd AS (
    -- include: claim_set
    -- include: claim_one_tenant_where
), log AS (
    -- include: claim_log
)
SELECT upd.*,
       CASE WHEN row_number() OVER () = 1 THEN (SELECT array_agg(id) FROM done) END
       AS completed_ids,
       (SELECT pg_notify(jobtrail_channel('finished'), '')::text
        WHERE EXISTS (SELECT 1 FROM done) AND EXISTS (SELECT 1 FROM jobtrail_result_waiters))
       AS notified,
       (SELECT open AND many FROM gate) AS fair
FROM (SELECT 1) AS one LEFT JOIN upd ON true;

-- name: task_complete_and_claim_fair
-- task_complete_and_claim with task_claim_unlimited_fair's claim.
WITH gate AS (
    -- include: claim_gate
), done AS (
    -- include: complete_update
), done_log AS (
    -- include: complete_log
), upd AS (
    -- include: claim_set
    -- include: claim_due_head
    -- include: fair_due
    -- include: claim_fair_tail
), log AS (
    -- include: claim_log
)
SELECT upd.*,
       CASE WHEN row_number() OVER () = 1 THEN (SELECT array_agg(id) FROM done) END
       AS completed_ids,
       (SELECT pg_notify(jobtrail_channel('finished'), '')::text
        WHERE EXISTS (SELECT 1 FROM done) AND EXISTS (SELECT 1 FROM jobtrail_result_waiters))
       AS notified,
       (SELECT open AND many FROM gate) AS fair
FROM (SELECT 1) AS one LEFT JOIN upd ON true;

-- name: result_waiter_add
-- A result waiter's LISTEN connection registers itself (0014), clearing the rows of waiters
-- whose connections are gone.
WITH gone AS (
    DELETE FROM jobtrail_result_waiters w
    WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.pid)
)
INSERT INTO jobtrail_result_waiters (pid) VALUES (pg_backend_pid())
ON CONFLICT (pid) DO UPDATE SET since = now();

-- name: result_waiter_remove
DELETE FROM jobtrail_result_waiters WHERE pid = pg_backend_pid();

-- name: task_annotate
WITH upd AS (
    UPDATE jobtrail_tasks
    SET seq = seq + 1,
        updated_at = now(),
        dismissed_at = CASE WHEN %(dismiss)s THEN now() ELSE dismissed_at END
    WHERE id = %(id)s AND state = %(from_state)s
    RETURNING id, state, attempts, seq, updated_at, parent_id, queue, kind
), log AS (
    INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason,
                                      error_category, error, actor, attempt, at, note,
                                      corrects, data)
    SELECT id, seq, %(from_state)s, %(to_state)s, %(reason)s, %(error_category)s::text,
           %(error)s::text, %(actor)s, COALESCE(%(log_attempt)s::int, attempts), updated_at,
           %(note)s::text, %(corrects)s::int, %(data)s::jsonb
    FROM upd
)
SELECT * FROM upd;

-- name: transition_insert
INSERT INTO jobtrail_transition_log (
    task_id, seq, from_state, to_state, reason, error_category, error, actor, attempt, at,
    note, corrects, data, traceback, error_class)
VALUES (%(task_id)s, %(seq)s, %(from_state)s::text, %(to_state)s, %(reason)s,
        %(error_category)s::text, %(error)s::text, %(actor)s, %(attempt)s, %(at)s,
        %(note)s::text, %(corrects)s::int, %(data)s::jsonb, %(traceback)s::text,
        %(error_class)s::text);

-- name: lease_extend
UPDATE jobtrail_tasks
SET lease_expires_at = now() + make_interval(secs => %(seconds)s::float8)
WHERE id = %(id)s
  AND state IN ('leased', 'cancel_requested')
  AND lease_owner = %(owner)s AND attempts = %(attempt)s
  AND lease_expires_at > now()
RETURNING state, lease_expires_at;

-- name: task_holder
SELECT state, lease_owner, attempts, lease_expires_at > now() AS lease_valid
FROM jobtrail_tasks WHERE id = %(id)s;

-- name: task_held_by
-- The tasks leased to a worker (the rows a claim returns): after a round trip whose answer was
-- lost, the worker starts those it does not know it holds instead of leaving them to their
-- lease (issue 40). Rare: only after a failed round.
SELECT *, now() AS db_now FROM jobtrail_tasks
WHERE state = 'leased' AND lease_owner = %(owner)s AND lease_expires_at > now()
ORDER BY id LIMIT %(limit)s;

-- name: task_list
SELECT * FROM jobtrail_tasks
WHERE (%(state)s::text IS NULL OR state = %(state)s::text)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND id < COALESCE(%(before_id)s::bigint, 9223372036854775807)  -- an index range
ORDER BY id DESC
LIMIT %(limit)s;

-- name: transition_list
SELECT * FROM jobtrail_transitions WHERE task_id = %(id)s ORDER BY seq;

-- name: task_expired
SELECT id, state, attempts, max_attempts, reentrant, lease_owner, kind
FROM jobtrail_tasks
WHERE state IN ('leased', 'cancel_requested') AND lease_expires_at <= now()
ORDER BY lease_expires_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: task_dead_select
SELECT id FROM jobtrail_tasks
WHERE state = 'dead' AND dismissed_at IS NULL
  AND (%(reason)s::text IS NULL OR last_reason = %(reason)s::text)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR finished_at < %(until)s::timestamptz)
ORDER BY finished_at, id
LIMIT CASE WHEN %(limit)s::int < 0 THEN NULL ELSE %(limit)s::int END;

-- name: invariant_violations
-- The log's last entry, count and last seq: the log table's rows, and the enqueued transition
-- on the task row (0027) as seq 1 when the task has one there.
SELECT f.id, f.state, f.seq, f.last_to_state, f.n, f.max_seq
FROM (SELECT t.id, t.state, t.seq,
             COALESCE(last.to_state, t.enq_state) AS last_to_state,
             agg.n + (t.enq_actor IS NOT NULL)::int AS n,
             COALESCE(agg.max_seq, CASE WHEN t.enq_actor IS NOT NULL THEN 1 END) AS max_seq
      FROM jobtrail_tasks t
      LEFT JOIN LATERAL (SELECT to_state FROM jobtrail_transition_log x
                         WHERE x.task_id = t.id ORDER BY x.seq DESC LIMIT 1) last ON true
      LEFT JOIN LATERAL (SELECT COUNT(*) AS n, MAX(seq) AS max_seq
                         FROM jobtrail_transition_log x WHERE x.task_id = t.id) agg ON true) f
WHERE f.state IS DISTINCT FROM f.last_to_state
   OR f.seq IS DISTINCT FROM f.max_seq
   OR f.seq IS DISTINCT FROM f.n;

-- name: notify_queued
SELECT pg_notify(jobtrail_channel('queued'), %(queue)s);

-- name: idle_register
-- A worker registers as idle (0018), or again after the task handed to it: the next task a
-- single enqueue can hand over may be leased to it (task_insert_handoff). On the way it
-- clears the registrations of workers whose LISTEN session has been gone (its advisory lock
-- free) for a minute: workers killed while idle (what was handed to one is recovered when its
-- lease expires, as any claim of a dead worker).
WITH dead AS (
    DELETE FROM jobtrail_idle_workers
    WHERE owner <> %(owner)s AND since < now() - interval '1 minute'
      AND pg_try_advisory_xact_lock_shared(lock_key)
)
INSERT INTO jobtrail_idle_workers (owner, queues, kinds, channel, lock_key, version)
VALUES (%(owner)s, %(queues)s::text[], %(kinds)s::text[], %(channel)s, %(lock_key)s,
        %(version)s::text)
ON CONFLICT (owner) DO UPDATE
SET queues = EXCLUDED.queues, kinds = EXCLUDED.kinds, channel = EXCLUDED.channel,
    lock_key = EXCLUDED.lock_key, version = EXCLUDED.version, handed = NULL, since = now();

-- name: idle_unregister
-- A worker leaves the idle registry before it claims (or stops); the task handed to it
-- meanwhile, if any.
DELETE FROM jobtrail_idle_workers WHERE owner = %(owner)s RETURNING handed;
