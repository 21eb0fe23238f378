-- The log's key is (task_id, seq), the pair every reader uses, instead of a serial id no query
-- reads: one index less per transition (three per finished job). The (reason, at) index goes
-- too: the statistics read a time window through the (at) index and filter the reason there,
-- and the dead-letter versions read a task's own transitions through the key.
ALTER TABLE jobtrail_transitions DROP CONSTRAINT jobtrail_transitions_pkey;
ALTER TABLE jobtrail_transitions DROP COLUMN id;
ALTER TABLE jobtrail_transitions DROP CONSTRAINT jobtrail_transitions_task_seq;
ALTER TABLE jobtrail_transitions ADD CONSTRAINT jobtrail_transitions_pkey
    PRIMARY KEY (task_id, seq);
DROP INDEX jobtrail_transitions_reason_at;
