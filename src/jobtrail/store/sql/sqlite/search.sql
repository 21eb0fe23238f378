-- The dashboard's search and its bulk selections (App.search, App.search_states,
-- App.search_ids). Each search has the same filters (search_filters); ``floor_id`` bounds a
-- scan to the newest ids where no index serves the search (payload fields, error text).

-- fragment: search_filters
  AND (:state IS NULL OR state = :state)
  AND (:kind IS NULL OR kind = :kind)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant IS NULL OR tenant = :tenant)
  AND id < COALESCE(:before_id, 9223372036854775807)
  AND id > COALESCE(:floor_id, 0)

-- name: search_plan_per_call
-- SQLite plans each statement for its values already.
SELECT 1;

-- name: search_top_id
SELECT COALESCE(max(id), 0) AS id FROM jobtrail_tasks;

-- name: search_filter
SELECT * FROM jobtrail_tasks WHERE 1
-- include: search_filters
ORDER BY id DESC LIMIT :limit;

-- name: search_filter_states
SELECT id, state FROM jobtrail_tasks WHERE 1
-- include: search_filters
ORDER BY id DESC LIMIT :limit;

-- fragment: search_payload_match
WHERE CASE :jtype
    WHEN 'number' THEN json_type(payload, :path) IN ('integer', 'real')
                       AND json_extract(payload, :path) = :value
    WHEN 'text' THEN json_type(payload, :path) = 'text' AND json_extract(payload, :path) = :value
    ELSE json_type(payload, :path) = :jtype
  END

-- name: search_payload
SELECT * FROM jobtrail_tasks
-- include: search_payload_match
-- include: search_filters
ORDER BY id DESC LIMIT :limit;

-- name: search_payload_states
SELECT id, state FROM jobtrail_tasks
-- include: search_payload_match
-- include: search_filters
ORDER BY id DESC LIMIT :limit;

-- name: search_error
SELECT * FROM jobtrail_tasks WHERE last_error LIKE :pattern ESCAPE '\'
-- include: search_filters
ORDER BY id DESC LIMIT :limit;

-- name: search_error_states
SELECT id, state FROM jobtrail_tasks WHERE last_error LIKE :pattern ESCAPE '\'
-- include: search_filters
ORDER BY id DESC LIMIT :limit;

-- name: search_key
SELECT * FROM jobtrail_tasks WHERE idempotency_key = :key
-- include: search_filters
ORDER BY id DESC LIMIT :limit;

-- name: search_key_states
SELECT id, state FROM jobtrail_tasks WHERE idempotency_key = :key
-- include: search_filters
ORDER BY id DESC LIMIT :limit;
