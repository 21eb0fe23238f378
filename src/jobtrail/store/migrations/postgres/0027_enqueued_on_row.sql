-- A task's first transition (enqueued) is kept on its row; the rest of its log stays in the
-- log table. An enqueue then writes the task row and its index entries only: the log row and
-- its two index entries were a third of the server's work per task in a bulk enqueue
-- (docs/performance.md).
--
-- jobtrail_transitions becomes a view: the enqueued entry of every task that has one on its row
-- (enq_actor set: tasks enqueued from this version on), then the log table's rows. Every reader
-- reads the view (or, for a time window, both parts through their own keys: jobtrail_id_marks
-- below), so what a reader sees is what it saw before: the log's first entry, seq 1, at the
-- task's created_at. The entry cannot change: a trigger refuses an update of those columns,
-- and the view refuses updates and deletes as the log table does.
ALTER TABLE jobtrail_tasks
    ADD COLUMN enq_state TEXT CHECK (enq_state IN ('queued', 'leased', 'awaiting_receipt',
        'cancel_requested', 'waiting', 'succeeded', 'cancelled', 'dead')),
    ADD COLUMN enq_actor TEXT,
    ADD COLUMN enq_data  JSONB;

ALTER TABLE jobtrail_transitions RENAME TO jobtrail_transition_log;
ALTER INDEX jobtrail_transitions_pkey RENAME TO jobtrail_transition_log_pkey;
ALTER INDEX jobtrail_transitions_at RENAME TO jobtrail_transition_log_at;

CREATE VIEW jobtrail_transitions AS
SELECT t.id AS task_id, 1 AS seq, NULL::text AS from_state, t.enq_state AS to_state,
       'enqueued'::text AS reason, NULL::text AS error_category, NULL::text AS error,
       t.enq_actor AS actor, 0 AS attempt, t.created_at AS at, NULL::text AS note,
       NULL::integer AS corrects, COALESCE(t.enq_data, '{}'::jsonb) AS data,
       NULL::text AS traceback, NULL::text AS error_class
FROM jobtrail_tasks t
WHERE t.enq_actor IS NOT NULL
UNION ALL
SELECT task_id, seq, from_state, to_state, reason, error_category, error, actor, attempt, at,
       note, corrects, data, traceback, error_class
FROM jobtrail_transition_log;

-- written to directly, the view appends to the log table (a correction, a repair by hand);
-- it refuses updates and deletes (pruning deletes from the log table)
CREATE FUNCTION jobtrail_transitions_view_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO jobtrail_transition_log (
            task_id, seq, from_state, to_state, reason, error_category, error, actor, attempt,
            at, note, corrects, data, traceback, error_class)
        VALUES (NEW.task_id, NEW.seq, NEW.from_state, NEW.to_state, NEW.reason,
                NEW.error_category, NEW.error, NEW.actor, NEW.attempt, NEW.at, NEW.note,
                NEW.corrects, COALESCE(NEW.data, '{}'::jsonb), NEW.traceback, NEW.error_class);
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'jobtrail_transitions is append-only (%): append a correction instead',
        TG_OP USING ERRCODE = 'restrict_violation';
END;
$$;

CREATE TRIGGER jobtrail_transitions_view_write
INSTEAD OF INSERT OR UPDATE OR DELETE ON jobtrail_transitions
FOR EACH ROW EXECUTE FUNCTION jobtrail_transitions_view_write();

CREATE TRIGGER jobtrail_tasks_enqueued_fixed
BEFORE UPDATE OF enq_state, enq_actor, enq_data, created_at ON jobtrail_tasks
FOR EACH ROW
WHEN (NEW.enq_state IS DISTINCT FROM OLD.enq_state
      OR NEW.enq_actor IS DISTINCT FROM OLD.enq_actor
      OR NEW.enq_data IS DISTINCT FROM OLD.enq_data
      OR (OLD.enq_actor IS NOT NULL AND NEW.created_at IS DISTINCT FROM OLD.created_at))
EXECUTE FUNCTION jobtrail_transitions_append_only();

-- The id marks: at time `at`, every task id handed out so far was <= last_id. A task created at
-- or after `at` began its transaction then (created_at is its transaction's start) and took its
-- id later, from the identity sequence (CACHE 1): its id is > last_id. So the readers of a time
-- window find the enqueued entries of tasks created since T among the ids above the last mark
-- at or before T, through the primary key, instead of an index of created_at that every change
-- of state would write (no update of a task's state is HOT). The worker's sweep adds a mark
-- every minute; retention drops those older than eight days.
CREATE TABLE jobtrail_id_marks (
    at      TIMESTAMPTZ PRIMARY KEY,
    last_id BIGINT      NOT NULL
);
INSERT INTO jobtrail_id_marks (at, last_id)
SELECT clock_timestamp(), CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END
FROM (SELECT last_value, is_called FROM jobtrail_tasks_id_seq) s;
