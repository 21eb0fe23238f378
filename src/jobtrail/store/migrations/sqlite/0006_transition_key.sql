-- The (reason, at) index is written for every transition and read by nothing the (at) index
-- and the (task_id, seq) key do not serve: the statistics read a time window through (at) and
-- filter the reason there; the dead-letter versions read a task's own transitions by key.
-- (The rowid id stays: in SQLite it is the table itself, not an index.)
DROP INDEX jobtrail_transitions_reason_at;
