-- The dashboard's search and its bulk selections (App.search, App.search_states,
-- App.search_ids). Each search has the same filters (search_filters); ``floor_id`` bounds a
-- scan to the newest ids where no index serves the search (error text).

-- fragment: search_filters
  AND (%(state)s::text IS NULL OR state = %(state)s::text)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
  AND id > COALESCE(%(floor_id)s::bigint, 0)

-- name: search_plan_per_call
-- A search's filters are optional (``%(x)s IS NULL OR ...``): a plan made once for every value
-- (psycopg prepares a statement on its fifth run, and the server then may keep one generic
-- plan) walks the primary key past a million rows where a plan for these values takes the
-- index (1.5 s against 4 ms). For this transaction only, plan each search for its values.
SET LOCAL plan_cache_mode = force_custom_plan;

-- name: search_top_id
SELECT COALESCE(max(id), 0) AS id FROM jobtrail_tasks;

-- name: search_filter
SELECT * FROM jobtrail_tasks WHERE TRUE
-- include: search_filters
ORDER BY id DESC LIMIT %(limit)s;

-- name: search_filter_states
SELECT id, state FROM jobtrail_tasks WHERE TRUE
-- include: search_filters
ORDER BY id DESC LIMIT %(limit)s;

-- name: search_payload
-- Three parts, each through an index that holds only its tasks, merged newest first: the
-- settled tasks (every state but queued and leased) through the GIN index
-- jobtrail_tasks_payload_settled (jsonb_path_ops), the queued ones through
-- jobtrail_tasks_queued_kind (every kind is a non-empty name), the leased ones through
-- jobtrail_tasks_held; no index of the payloads is written by an enqueue or a claim. Each
-- part's predicate is written out so that the partial index serves it. ``id + 0``: the
-- planner, which cannot estimate a containment, would otherwise walk the primary key newest
-- first looking for the first matches, reading the whole table when there are few or none
-- (0.9 s on a million tasks); the matches are sorted instead.
SELECT * FROM (
    (SELECT * FROM jobtrail_tasks WHERE payload @> %(doc)s::jsonb
       AND state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                     'cancel_requested')
-- include: search_filters
     ORDER BY id + 0 DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM jobtrail_tasks WHERE payload @> %(doc)s::jsonb
       AND state = 'queued' AND kind <> ''
-- include: search_filters
     ORDER BY id + 0 DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM jobtrail_tasks WHERE payload @> %(doc)s::jsonb AND state = 'leased'
-- include: search_filters
     ORDER BY id + 0 DESC LIMIT %(limit)s)
) t
ORDER BY id DESC LIMIT %(limit)s;

-- name: search_payload_states
SELECT id, state FROM (
    (SELECT id, state FROM jobtrail_tasks WHERE payload @> %(doc)s::jsonb
       AND state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                     'cancel_requested')
-- include: search_filters
     ORDER BY id + 0 DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT id, state FROM jobtrail_tasks WHERE payload @> %(doc)s::jsonb
       AND state = 'queued' AND kind <> ''
-- include: search_filters
     ORDER BY id + 0 DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT id, state FROM jobtrail_tasks WHERE payload @> %(doc)s::jsonb AND state = 'leased'
-- include: search_filters
     ORDER BY id + 0 DESC LIMIT %(limit)s)
) t
ORDER BY id DESC LIMIT %(limit)s;

-- name: search_error
SELECT * FROM jobtrail_tasks WHERE last_error ILIKE %(pattern)s ESCAPE '\'
-- include: search_filters
ORDER BY id DESC LIMIT %(limit)s;

-- name: search_error_states
SELECT id, state FROM jobtrail_tasks WHERE last_error ILIKE %(pattern)s ESCAPE '\'
-- include: search_filters
ORDER BY id DESC LIMIT %(limit)s;

-- name: search_key
-- The index jobtrail_tasks_key serves it across tenants and kinds (``id + 0`` as above).
SELECT * FROM jobtrail_tasks WHERE idempotency_key = %(key)s
-- include: search_filters
ORDER BY id + 0 DESC LIMIT %(limit)s;

-- name: search_key_states
SELECT id, state FROM jobtrail_tasks WHERE idempotency_key = %(key)s
-- include: search_filters
ORDER BY id + 0 DESC LIMIT %(limit)s;
