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
-- The GIN index jobtrail_tasks_payload (jsonb_path_ops) serves the containment.
SELECT * FROM jobtrail_tasks WHERE payload @> %(doc)s::jsonb
-- include: search_filters
ORDER BY id DESC LIMIT %(limit)s;

-- name: search_payload_states
SELECT id, state FROM jobtrail_tasks WHERE payload @> %(doc)s::jsonb
-- include: search_filters
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
-- The index jobtrail_tasks_key serves it across tenants and kinds.
SELECT * FROM jobtrail_tasks WHERE idempotency_key = %(key)s
-- include: search_filters
ORDER BY id DESC LIMIT %(limit)s;

-- name: search_key_states
SELECT id, state FROM jobtrail_tasks WHERE idempotency_key = %(key)s
-- include: search_filters
ORDER BY id DESC LIMIT %(limit)s;
