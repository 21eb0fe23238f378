-- wait_for_disk=False on PostgreSQL: a commit that returns before its WAL reaches the disk.

-- name: skip_flush_wait
-- synchronous_commit off for the current transaction only (set_config's third argument is
-- SET LOCAL's), so never another's, behind a transaction pooler too. A statement of its own in
-- a transaction of several. The single enqueue's statements (task_insert, task_insert_handoff)
-- end their last SELECT with this column instead (postgres/unflushed.py): an autocommit
-- statement is its own transaction, which commits after the statement has run, so its commit
-- skips the flush wait and the enqueue stays one round trip. The column must be evaluated to
-- take effect (PostgreSQL skips a SELECT in WITH that nothing reads): a row of the last SELECT
-- evaluates it, and an insert that returns no row (an existing idempotency key) wrote nothing
-- to flush. Returns the setting now in effect ('off').
SELECT set_config('synchronous_commit', 'off', true) AS synchronous_commit
