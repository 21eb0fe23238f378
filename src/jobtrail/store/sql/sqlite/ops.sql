-- Operations for SQLite: queues (pause, limits), limit-aware claims, stats, pruning.

-- name: queue_limits_lock
-- Queues of this claim that have a concurrency or rate limit and are not paused, with the
-- database clock every rate decision uses. (SQLite writers are serialised by BEGIN
-- IMMEDIATE; PostgreSQL locks these rows so limited claims take turns.)
SELECT *, round((julianday('now') - 2440587.5) * 86400.0, 3) AS db_now FROM jobtrail_queues
WHERE name IN (SELECT value FROM json_each(:queues)) AND paused = 0
  AND (limit_total IS NOT NULL OR limit_per_tenant IS NOT NULL
       OR rate_per_second IS NOT NULL OR rate_per_tenant IS NOT NULL
       OR keyed = 1 OR kind_rated = 1)
ORDER BY name;

-- name: queue_limited_names
SELECT name FROM jobtrail_queues
WHERE name IN (SELECT value FROM json_each(:queues))
  AND (limit_total IS NOT NULL OR limit_per_tenant IS NOT NULL
       OR rate_per_second IS NOT NULL OR rate_per_tenant IS NOT NULL
       OR keyed = 1 OR kind_rated = 1);

-- name: queue_held_count
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = :queue AND state IN ('leased', 'cancel_requested');

-- name: queue_tenants_held
SELECT tenant, COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = :queue AND state IN ('leased', 'cancel_requested')
GROUP BY tenant;

-- name: task_claim_limited
-- The fair claim of one limited queue: at most :limit tasks (the room the driver computed
-- from the concurrency limit and the queue's bucket), and of each tenant at most its room
-- (:rooms, a JSON object tenant -> room, for the tenants whose per-tenant limit or bucket
-- leaves less than :default_room; :default_room for the others).
-- include: claim_set
WHERE state = 'queued' AND id IN (
    -- include: fair_due
    SELECT f.id FROM f LEFT JOIN json_each(:rooms) r ON r.key = f.tenant
    WHERE f.tn <= COALESCE(r.value, :default_room)
    ORDER BY f.priority DESC, f.turn, f.run_at, f.id
    LIMIT :limit)
RETURNING *, round((julianday('now') - 2440587.5) * 86400.0, 3) - run_at AS waited;

-- name: queue_tokens_set
UPDATE jobtrail_queues SET tokens = :tokens, tokens_at = round((julianday('now') - 2440587.5) * 86400.0, 3) WHERE name = :name;

-- name: queue_rate_end
-- A resume ramp's temporary rate is over: the queue is as it was before (no rate).
UPDATE jobtrail_queues
SET rate_per_second = NULL, rate_burst = NULL, rate_per_tenant = NULL, ramp_seconds = NULL,
    ramp_started_at = NULL, rate_until = NULL, tokens = NULL, tokens_at = NULL
WHERE name = :name AND rate_until IS NOT NULL AND rate_until <= round((julianday('now') - 2440587.5) * 86400.0, 3);

-- name: queue_rate_set
-- A new rate (or none): the bucket starts over (full, or a tenth of full during a ramp).
UPDATE jobtrail_queues
SET rate_per_second = :per_second,
    rate_burst = :burst,
    rate_per_tenant = :per_tenant,
    ramp_seconds = :ramp,
    ramp_started_at = CASE WHEN :ramp IS NULL THEN NULL ELSE round((julianday('now') - 2440587.5) * 86400.0, 3) END,
    rate_until = CASE WHEN :until IS NULL THEN NULL ELSE round((julianday('now') - 2440587.5) * 86400.0, 3) + :until END,
    tokens = NULL,
    tokens_at = NULL,
    updated_at = round((julianday('now') - 2440587.5) * 86400.0, 3)
WHERE name = :name
RETURNING *;

-- name: tenant_rate_list
-- The tenant buckets of a queue touched since :since (older ones are full again).
SELECT tenant, tokens, tokens_at FROM jobtrail_tenant_rates
WHERE queue = :queue AND tokens_at >= :since;

-- name: tenant_rate_upsert
INSERT INTO jobtrail_tenant_rates (queue, tenant, tokens, tokens_at)
SELECT :queue, x.key, x.value, round((julianday('now') - 2440587.5) * 86400.0, 3) FROM json_each(:tokens) x WHERE true
ON CONFLICT (queue, tenant) DO UPDATE SET tokens = excluded.tokens, tokens_at = excluded.tokens_at;

-- name: tenant_rate_forget
DELETE FROM jobtrail_tenant_rates WHERE queue = :queue AND tokens_at < :since;

-- name: queue_claims_between
-- Claims of a queue in a time window (a resume ramp's measured pace before the pause).
SELECT COUNT(*) AS n FROM jobtrail_transition_log tr JOIN jobtrail_tasks t ON t.id = tr.task_id
WHERE t.queue = :queue AND tr.reason = 'claimed' AND tr.at >= :since AND tr.at < :until;

-- name: queue_due_count
SELECT (SELECT COUNT(*) FROM jobtrail_tasks
        WHERE queue = :queue AND state = 'queued' AND ckey IS NULL
          AND run_at <= round((julianday('now') - 2440587.5) * 86400.0, 3))
     + (SELECT COUNT(*) FROM jobtrail_tasks
        WHERE queue = :queue AND state = 'queued' AND ckey IS NOT NULL
          AND run_at <= round((julianday('now') - 2440587.5) * 86400.0, 3)) AS n;

-- name: task_next_due
-- A draining burst worker (run_worker(burst=True, drain=S)): seconds until the first queued
-- task of these queues and kinds is due (0 or less: due now), among those due within :within
-- seconds; NULL when there is none. Paused queues are left out: their tasks would hold the
-- worker until someone resumes the queue.
SELECT MIN(run_at) - round((julianday('now') - 2440587.5) * 86400.0, 3) AS wait
FROM jobtrail_tasks
WHERE state = 'queued'
  AND queue IN (SELECT value FROM json_each(:queues))
  AND kind IN (SELECT value FROM json_each(:kinds))
  AND run_at <= round((julianday('now') - 2440587.5) * 86400.0, 3) + :within
  AND queue NOT IN (SELECT name FROM jobtrail_queues WHERE paused = 1);

-- name: queue_get
SELECT * FROM jobtrail_queues WHERE name = :name;

-- name: queue_list
SELECT * FROM jobtrail_queues ORDER BY name;

-- name: queue_upsert
INSERT INTO jobtrail_queues (name, paused, paused_by, paused_note, paused_at, limit_total,
                             limit_per_tenant, updated_at)
VALUES (:name, :paused, :paused_by, :paused_note,
        CASE WHEN :paused THEN round((julianday('now') - 2440587.5) * 86400.0, 3) END, :limit_total, :limit_per_tenant, round((julianday('now') - 2440587.5) * 86400.0, 3))
ON CONFLICT (name) DO UPDATE
SET paused = excluded.paused,
    paused_by = excluded.paused_by,
    paused_note = excluded.paused_note,
    paused_at = CASE WHEN excluded.paused = 0 THEN NULL
                     WHEN jobtrail_queues.paused = 1 THEN jobtrail_queues.paused_at
                     ELSE excluded.paused_at END,
    limit_total = excluded.limit_total,
    limit_per_tenant = excluded.limit_per_tenant,
    updated_at = excluded.updated_at
RETURNING *;

-- name: queue_history_insert
INSERT INTO jobtrail_queue_history (queue, action, actor, note, data, at)
VALUES (:queue, :action, :actor, :note, :data, round((julianday('now') - 2440587.5) * 86400.0, 3));

-- name: queue_history_list
SELECT * FROM jobtrail_queue_history WHERE queue = :queue ORDER BY id DESC LIMIT :limit;

-- name: queue_tenant_held
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = :queue AND tenant = :tenant AND state IN ('leased', 'cancel_requested');

-- name: stats_open
-- One part per partial index that holds those states, each index's WHERE written out as SQLite
-- matches it (jobtrail_tasks_queued_kind, jobtrail_tasks_held, jobtrail_tasks_settled_kind).
SELECT queue, kind, 'queued' AS state, COUNT(*) AS n,
       MIN(CASE WHEN run_at <= round((julianday('now') - 2440587.5) * 86400.0, 3) THEN run_at END) AS oldest_due
FROM jobtrail_tasks
WHERE state = 'queued'
GROUP BY queue, kind
UNION ALL
SELECT queue, kind, state, COUNT(*) AS n, NULL AS oldest_due
FROM jobtrail_tasks
WHERE state IN ('leased', 'cancel_requested')
GROUP BY queue, kind, state
UNION ALL
SELECT queue, kind, state, COUNT(*) AS n, NULL AS oldest_due
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
WHERE state IN ('succeeded', 'cancelled') AND finished_at >= :since
GROUP BY queue, kind, state;

-- name: stats_reasons
SELECT t.queue, t.kind, x.reason, x.to_state, COUNT(*) AS n
FROM jobtrail_transitions x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= :since
GROUP BY t.queue, t.kind, x.reason, x.to_state;

-- name: stats_waits
SELECT t.queue, t.kind, json_extract(x.data, '$.waited') AS seconds
FROM jobtrail_transition_log x JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= :since AND x.reason = 'claimed';

-- name: stats_runs
-- Run time of attempts that ended in the window: from the claim just before the outcome (attempt
-- numbers restart at 1 after a replay, so the attempt number alone would pair it with older
-- claims too).
SELECT t.queue, t.kind,
       x.at - (SELECT c.at FROM jobtrail_transition_log c
               WHERE c.task_id = x.task_id AND c.seq < x.seq AND c.reason = 'claimed'
               ORDER BY c.seq DESC LIMIT 1) AS seconds
FROM jobtrail_transition_log x
JOIN jobtrail_tasks t ON t.id = x.task_id
WHERE x.at >= :since AND x.from_state IN ('leased', 'cancel_requested')
  AND x.reason NOT IN ('cancel_requested', 'lease_expired', 'lease_expired_cancelled',
                       'lease_expired_effect_uncertain', 'manual_fix')
  AND x.from_state <> x.to_state;

-- name: dead_groups
-- Dead tasks that need a person, by reason and kind, with the group's evidence (see the
-- PostgreSQL query). A task's evidence is on its row (0017: claimed_version, first_failure_at;
-- its last failure is its death, finished_at); for a task older than 0017 (evidence_on_row 0)
-- the CASE probes its (task_id, seq) index instead, backward for the version of its last claim
-- and forward to its first failure (SQLite evaluates a CASE branch only when it is taken).
SELECT d.reason, d.kind, COUNT(*) AS n, MIN(d.finished_at) AS oldest,
       GROUP_CONCAT(DISTINCT COALESCE(d.version, '?')) AS versions,
       GROUP_CONCAT(DISTINCT COALESCE(d.category, '-')) AS categories,
       MIN(d.attempts) AS attempts_min, MAX(d.attempts) AS attempts_max,
       MIN(d.first_failure) AS first_failure, MAX(d.finished_at) AS last_failure
FROM (SELECT t.last_reason AS reason, t.kind, t.finished_at,
             t.last_error_category AS category, t.attempts,
             CASE WHEN t.evidence_on_row THEN t.claimed_version ELSE
-- include: dead_log_version
             END AS version,
             CASE WHEN t.evidence_on_row THEN t.first_failure_at ELSE
-- include: dead_log_first_failure
             END AS first_failure
      FROM jobtrail_tasks t
      WHERE t.state = 'dead' AND t.dismissed_at IS NULL) d
GROUP BY d.reason, d.kind
ORDER BY n DESC, d.reason, d.kind;

-- fragment: dead_log_version
-- The code version of the last claim of the task t as its log says: read for a task older
-- than 0017 (dead_groups, dead_tasks_evidence) and compared with the row (check_row_evidence).
             (SELECT json_extract(c.data, '$.version') FROM jobtrail_transition_log c
              WHERE c.task_id = t.id AND c.reason = 'claimed' ORDER BY c.seq DESC LIMIT 1)

-- fragment: dead_log_first_failure
-- The time of the first failure of the task t as its log says (a change of state with an
-- error category, or into dead), for the same readers.
             (SELECT x.at FROM jobtrail_transition_log x
              WHERE x.task_id = t.id AND x.from_state IS NOT x.to_state
                AND (x.error_category IS NOT NULL OR x.to_state = 'dead')
              ORDER BY x.seq LIMIT 1)

-- name: prune_select
SELECT id FROM jobtrail_tasks t
WHERE t.state IN ('succeeded', 'cancelled') AND t.finished_at < round((julianday('now') - 2440587.5) * 86400.0, 3) - :older_than
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.parent_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_tasks c WHERE c.after_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM jobtrail_outbox o WHERE o.task_id = t.id AND o.state = 'pending')
ORDER BY t.finished_at
LIMIT :limit;

-- name: prune_guard_on
INSERT INTO jobtrail_prune_guard (token) VALUES (1);

-- name: prune_guard_off
DELETE FROM jobtrail_prune_guard;

-- name: prune_transitions
DELETE FROM jobtrail_transition_log WHERE task_id IN (SELECT value FROM json_each(:ids));

-- name: prune_enqueued_count
-- The enqueued transitions on the rows of the pruned tasks :ids (0027), counted with the log's
-- rows pruned: they go with their rows.
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE id IN (SELECT value FROM json_each(:ids)) AND enq_actor IS NOT NULL;

-- name: prune_steps
DELETE FROM jobtrail_steps WHERE task_id IN (SELECT value FROM json_each(:ids));

-- name: prune_outbox
DELETE FROM jobtrail_outbox WHERE task_id IN (SELECT value FROM json_each(:ids));

-- name: prune_tasks
DELETE FROM jobtrail_tasks WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN ('succeeded', 'cancelled');

-- name: stats_window_start
-- The time of the skip+1-th newest transition at or after since, none when the window holds
-- fewer: stats then reads the window from there (at most that many transitions, through the
-- (at) index newest first), so its cost follows the bound, not the log's size.
SELECT at FROM jobtrail_transitions WHERE at >= :since
ORDER BY at DESC LIMIT 1 OFFSET :skip;

-- name: stats_open_bounded
-- stats_open with the queued tasks of each (queue, kind) counted up to upto: the groups are
-- found by a skip scan of jobtrail_tasks_queued_kind (one probe per group), each group's count
-- and oldest due task read from the same index; the other open states are counted exactly.
WITH RECURSIVE g(queue, kind) AS (
    SELECT * FROM (SELECT queue, kind FROM jobtrail_tasks WHERE state = 'queued'
                   ORDER BY queue, kind LIMIT 1)
    UNION ALL
    -- the next kind of this queue, else the first of the next queue: two index range starts
    -- (a row-value "(queue, kind) >" starts at the queue and walks its kinds' tasks)
    SELECT n.queue, n.kind FROM g
    JOIN jobtrail_tasks n ON n.id = COALESCE(
        (SELECT id FROM jobtrail_tasks
         WHERE state = 'queued' AND queue = g.queue AND kind > g.kind
         ORDER BY queue, kind LIMIT 1),
        (SELECT id FROM jobtrail_tasks
         WHERE state = 'queued' AND queue > g.queue
         ORDER BY queue, kind LIMIT 1))
)
SELECT g.queue, g.kind, 'queued' AS state,
       (SELECT COUNT(*) FROM (SELECT 1 FROM jobtrail_tasks t
                              WHERE t.state = 'queued' AND t.queue = g.queue AND t.kind = g.kind
                              -- the index's order: no plan counts by a scan of the table
                              ORDER BY t.run_at LIMIT :upto)) AS n,
       (SELECT MIN(t.run_at) FROM jobtrail_tasks t
        WHERE t.state = 'queued' AND t.queue = g.queue AND t.kind = g.kind
          AND t.run_at <= round((julianday('now') - 2440587.5) * 86400.0, 3)) AS oldest_due
FROM g
UNION ALL
SELECT queue, kind, state, COUNT(*) AS n, NULL AS oldest_due
FROM jobtrail_tasks
WHERE state IN ('leased', 'cancel_requested')
GROUP BY queue, kind, state
UNION ALL
SELECT queue, kind, state, COUNT(*) AS n, NULL AS oldest_due
FROM jobtrail_tasks
WHERE state IN ('awaiting_receipt', 'waiting')
  AND state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                'cancel_requested')
GROUP BY queue, kind, state;

-- name: task_claim_keyed
-- The claim of a keyed queue's tasks that carry a concurrency key: the same as PostgreSQL's
-- (writers are serialised by BEGIN IMMEDIATE, so the counts are those of the last claim).
-- include: claim_set
WHERE state = 'queued' AND id IN (
    WITH RECURSIVE keys(tenant, key) AS (
        SELECT * FROM (SELECT tenant, ckey FROM jobtrail_tasks
                       WHERE state = 'queued' AND queue = :queue
                         AND ckey IS NOT NULL
                       ORDER BY tenant, ckey LIMIT 1)
        UNION ALL
        -- the next key of this tenant, else the first of the next tenant: two index range
        -- starts (SQLite bounds a row value "(tenant, key) >" by the tenant alone, and would
        -- read every queued task of the tenant's keys)
        SELECT n.tenant, n.ckey FROM keys
        JOIN jobtrail_tasks n ON n.id = COALESCE(
            (SELECT id FROM jobtrail_tasks
             WHERE state = 'queued' AND queue = :queue AND ckey IS NOT NULL
               AND tenant = keys.tenant AND ckey > keys.key
             ORDER BY tenant, ckey LIMIT 1),
            (SELECT id FROM jobtrail_tasks
             WHERE state = 'queued' AND queue = :queue AND ckey IS NOT NULL
               AND tenant > keys.tenant
             ORDER BY tenant, ckey LIMIT 1))
    ), held AS (
        SELECT keys.tenant, keys.key,
               (SELECT COUNT(*) FROM jobtrail_tasks x
                WHERE x.queue = :queue AND x.tenant = keys.tenant
                  AND x.ckey = keys.key
                  AND x.state IN ('leased', 'cancel_requested')) AS n
        FROM keys WHERE keys.key IS NOT NULL
    ), h AS (
        SELECT d.id, d.tenant, d.priority, d.run_at, d.kind, d.concurrency_limit, held.n AS held,
               d.expires_at,
               ROW_NUMBER() OVER (PARTITION BY d.tenant, d.ckey
                                  ORDER BY d.run_at, d.id) AS pos
        FROM held JOIN jobtrail_tasks d ON d.id IN (
            SELECT e.id FROM jobtrail_tasks e
            WHERE e.state = 'queued' AND e.queue = :queue AND e.tenant = held.tenant
              AND e.ckey = held.key
            ORDER BY e.run_at, e.id
            LIMIT :limit)
    ), c AS (
        SELECT h.*, ROW_NUMBER() OVER (PARTITION BY h.tenant
                                       ORDER BY h.priority DESC, h.run_at, h.id) AS tn
        FROM h
        WHERE h.pos + h.held <= h.concurrency_limit
          AND h.run_at <= round((julianday('now') - 2440587.5) * 86400.0, 3)
          AND h.kind IN (SELECT value FROM json_each(:kinds))
          AND (h.expires_at IS NULL OR h.expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3))
    )
    SELECT c.id FROM c LEFT JOIN json_each(:rooms) r ON r.key = c.tenant
    WHERE c.tn <= COALESCE(r.value, :default_room)
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT :limit)
RETURNING *, round((julianday('now') - 2440587.5) * 86400.0, 3) - run_at AS waited;

-- name: task_set_key
UPDATE jobtrail_tasks SET ckey = :key, concurrency_limit = :limit WHERE id = :id;

-- name: queue_mark_keyed
INSERT INTO jobtrail_queues (name, paused, keyed, updated_at)
SELECT :name, 0, 1, round((julianday('now') - 2440587.5) * 86400.0, 3)
WHERE NOT EXISTS (SELECT 1 FROM jobtrail_queues WHERE name = :name AND keyed = 1)
ON CONFLICT (name) DO UPDATE SET keyed = 1;

-- name: key_holders
SELECT id, state FROM jobtrail_tasks
WHERE queue = :queue AND tenant = :tenant AND ckey = :key
  AND state IN ('leased', 'cancel_requested')
ORDER BY updated_at, id;

-- name: key_ahead_count
SELECT COUNT(*) AS n FROM jobtrail_tasks
WHERE queue = :queue AND tenant = :tenant AND ckey = :key
  AND state = 'queued' AND (run_at, id) < (:run_at, :id);

-- name: kind_rate_list
SELECT queue, kind, per_second, burst, tokens, tokens_at FROM jobtrail_kind_rates
WHERE :queue IS NULL OR queue = :queue
ORDER BY queue, kind;

-- name: kind_rate_set
INSERT INTO jobtrail_kind_rates (queue, kind, per_second, burst, updated_at)
VALUES (:queue, :kind, :per_second, :burst, round((julianday('now') - 2440587.5) * 86400.0, 3))
ON CONFLICT (queue, kind) DO UPDATE
SET per_second = excluded.per_second, burst = excluded.burst, tokens = NULL, tokens_at = NULL,
    updated_at = excluded.updated_at
RETURNING queue, kind, per_second, burst;

-- name: kind_rate_delete
DELETE FROM jobtrail_kind_rates WHERE queue = :queue AND kind = :kind;

-- name: queue_kind_rated_sync
UPDATE jobtrail_queues
SET kind_rated = EXISTS (SELECT 1 FROM jobtrail_kind_rates k WHERE k.queue = :name)
WHERE name = :name;

-- name: kind_tokens_set
UPDATE jobtrail_kind_rates SET tokens = :tokens, tokens_at = round((julianday('now') - 2440587.5) * 86400.0, 3)
WHERE queue = :queue AND kind = :kind;

-- name: task_claim_keyed_due
-- task_claim_keyed's quick look: the same as PostgreSQL's.
-- include: claim_set
WHERE state = 'queued' AND id IN (
    WITH held AS (
        SELECT tenant, ckey AS key, COUNT(*) AS n FROM jobtrail_tasks
        WHERE queue = :queue AND state IN ('leased', 'cancel_requested')
          AND ckey IS NOT NULL
        GROUP BY tenant, ckey
    ), x AS (
        SELECT id, tenant, ckey, priority, run_at, kind, concurrency_limit, expires_at
        FROM jobtrail_tasks
        WHERE state = 'queued' AND queue = :queue AND ckey IS NOT NULL
        ORDER BY priority DESC, run_at, id
        LIMIT :scan
    ), s AS (
        SELECT x.*, ROW_NUMBER() OVER (PARTITION BY x.tenant, x.ckey
                                       ORDER BY x.run_at, x.id) AS pos
        FROM x
    ), c AS (
        SELECT s.id, s.tenant, s.priority, s.run_at,
               ROW_NUMBER() OVER (PARTITION BY s.tenant
                                  ORDER BY s.priority DESC, s.run_at, s.id) AS tn
        FROM s LEFT JOIN held h ON h.tenant = s.tenant AND h.key = s.ckey
        WHERE s.run_at <= round((julianday('now') - 2440587.5) * 86400.0, 3)
          AND s.kind IN (SELECT value FROM json_each(:kinds))
          AND (s.expires_at IS NULL OR s.expires_at > round((julianday('now') - 2440587.5) * 86400.0, 3))
          AND COALESCE(h.n, 0) + s.pos <= s.concurrency_limit
          -- the key's queued tasks before it: one probe when one more may run (SQLite takes
          -- no correlated LIMIT, so more are counted up to the largest limit there is)
          AND CASE WHEN s.concurrency_limit - COALESCE(h.n, 0) = 1
                   THEN s.id = (
                       SELECT e.id FROM jobtrail_tasks e
                       WHERE e.state = 'queued' AND e.queue = :queue AND e.tenant = s.tenant
                         AND e.ckey = s.ckey
                       ORDER BY e.run_at, e.id LIMIT 1)
                   ELSE COALESCE(h.n, 0) + (
                       SELECT COUNT(*) FROM jobtrail_tasks x WHERE x.id IN (
                           SELECT e.id FROM jobtrail_tasks e
                           WHERE e.state = 'queued' AND e.queue = :queue
                             AND e.tenant = s.tenant AND e.ckey = s.ckey
                             AND (e.run_at, e.id) < (s.run_at, s.id)
                           LIMIT 1000)) < s.concurrency_limit END
    )
    SELECT c.id FROM c LEFT JOIN json_each(:rooms) r ON r.key = c.tenant
    WHERE c.tn <= COALESCE(r.value, :default_room)
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT :limit)
RETURNING *, round((julianday('now') - 2440587.5) * 86400.0, 3) - run_at AS waited;

-- name: id_mark
-- No marks on SQLite: its readers of a time window find the tasks created in it through the
-- index of created_at (0027). Never run (Driver.id_marks is false).
SELECT 1;
