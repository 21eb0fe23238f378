-- A task's first transition (enqueued) is kept on its row; the rest of its log stays in the
-- log table. Each single enqueue then commits the task row and its index entries only: the
-- log's row with its two indexes and its sqlite_sequence entry were half the pages a single
-- enqueue wrote (docs/performance.md, "SQLite enqueue").
--
-- jobtrail_transitions becomes a view: the enqueued entry of every task that has one on its row
-- (enq_actor set: tasks enqueued from this version on), then the log table's rows. Every reader
-- reads the view, so what a reader sees is what it saw before: the log's first entry, seq 1,
-- at the task's created_at. The entry cannot change: a trigger refuses an update of those
-- columns, and the view refuses updates and deletes as the log table does.
ALTER TABLE jobtrail_tasks ADD COLUMN enq_state TEXT
    CHECK (enq_state IN ('queued', 'leased', 'awaiting_receipt', 'cancel_requested',
                         'waiting', 'succeeded', 'cancelled', 'dead'));
ALTER TABLE jobtrail_tasks ADD COLUMN enq_actor TEXT;
ALTER TABLE jobtrail_tasks ADD COLUMN enq_data TEXT CHECK (enq_data IS NULL OR json_valid(enq_data));

-- the readers of a time window (stats, /metrics, the charts) find the enqueued entries by it
CREATE INDEX jobtrail_tasks_created ON jobtrail_tasks (created_at) WHERE enq_actor IS NOT NULL;

ALTER TABLE jobtrail_transitions RENAME TO jobtrail_transition_log;

CREATE VIEW jobtrail_transitions AS
SELECT NULL AS id, t.id AS task_id, 1 AS seq, NULL AS from_state, t.enq_state AS to_state,
       'enqueued' AS reason, NULL AS error_category, NULL AS error, t.enq_actor AS actor,
       0 AS attempt, t.created_at AS at, NULL AS note, NULL AS corrects,
       COALESCE(t.enq_data, '{}') AS data, NULL AS traceback, NULL AS error_class
FROM jobtrail_tasks t
WHERE t.enq_actor IS NOT NULL
UNION ALL
SELECT id, task_id, seq, from_state, to_state, reason, error_category, error, actor, attempt,
       at, note, corrects, data, traceback, error_class
FROM jobtrail_transition_log;

-- written to directly, the view appends to the log table (a correction, a repair by hand)
CREATE TRIGGER jobtrail_transitions_append
INSTEAD OF INSERT ON jobtrail_transitions
BEGIN
    INSERT INTO jobtrail_transition_log (
        task_id, seq, from_state, to_state, reason, error_category, error, actor, attempt, at,
        note, corrects, data, traceback, error_class)
    VALUES (NEW.task_id, NEW.seq, NEW.from_state, NEW.to_state, NEW.reason, NEW.error_category,
            NEW.error, NEW.actor, NEW.attempt, NEW.at, NEW.note, NEW.corrects,
            COALESCE(NEW.data, '{}'), NEW.traceback, NEW.error_class);
END;

CREATE TRIGGER jobtrail_transitions_view_no_update
INSTEAD OF UPDATE ON jobtrail_transitions
BEGIN
    SELECT RAISE(ABORT, 'jobtrail_transitions is append-only: append a correction instead');
END;

CREATE TRIGGER jobtrail_transitions_view_no_delete
INSTEAD OF DELETE ON jobtrail_transitions
BEGIN
    SELECT RAISE(ABORT, 'jobtrail_transitions is append-only: only pruning may delete');
END;

CREATE TRIGGER jobtrail_tasks_enqueued_fixed
BEFORE UPDATE OF enq_state, enq_actor, enq_data, created_at ON jobtrail_tasks
WHEN NEW.enq_state IS NOT OLD.enq_state OR NEW.enq_actor IS NOT OLD.enq_actor
     OR NEW.enq_data IS NOT OLD.enq_data
     OR (OLD.enq_actor IS NOT NULL AND NEW.created_at IS NOT OLD.created_at)
BEGIN
    SELECT RAISE(ABORT, 'jobtrail_transitions is append-only: append a correction instead');
END;
