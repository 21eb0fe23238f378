-- The dead-letter view's evidence kept on the task row (issue 21: /dead read every dead task's
-- transitions; 3.6 s with a cold cache at 15,000 dead tasks among 10,000,000 transitions).
--
-- claimed_version: the code version of the task's last claim (the claim writes it, as its
-- transition's data does). first_failure_at: the time of its first failure, a transition that
-- changed state with an error category or into dead (task_move writes it once). Its last
-- failure is its death: finished_at.
--
-- evidence_on_row says the two are complete: a task created before this migration may have
-- failed or been claimed before it, so its rows keep false (the value ADD COLUMN gives the
-- rows that exist, without rewriting them) and the readers read its transitions as before;
-- every task inserted from now on gets true (the default set after).
ALTER TABLE jobtrail_tasks
    ADD COLUMN claimed_version  TEXT,
    ADD COLUMN first_failure_at TIMESTAMPTZ,
    ADD COLUMN evidence_on_row  BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE jobtrail_tasks ALTER COLUMN evidence_on_row SET DEFAULT true;

-- The dead index carries what the dead-letter groups read (the evidence above, the reason,
-- kind, attempts, final error category, dismissal), so with the table's pages all-visible
-- (vacuumed) the groups are an index-only scan of the dead tasks: measured on the grown store
-- (15,000 dead among 4,000,000 tasks) with a cold cache, 1.5 s reading the rows, 0.3 s through
-- this index (most of it JIT compilation, which our sessions no longer do: 0.05-0.08 s). Its
-- key is unchanged: retention and the dead lists read it as before.
DROP INDEX jobtrail_tasks_dead;
CREATE INDEX jobtrail_tasks_dead ON jobtrail_tasks (finished_at, id)
    INCLUDE (last_reason, kind, attempts, last_error_category, claimed_version,
             first_failure_at, evidence_on_row, dismissed_at)
    WHERE state = 'dead';
