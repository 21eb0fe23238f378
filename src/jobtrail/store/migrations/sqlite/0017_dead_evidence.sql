-- The dead-letter view's evidence kept on the task row, as PostgreSQL's 0017 does (see it for
-- what each column means): /dead and app.dead() probed every dead task's transitions twice
-- (~200 ms at 15,000 dead tasks). SQLite: one column per ALTER TABLE; times are epoch seconds.
--
-- evidence_on_row: the rows that exist keep 0 (ADD COLUMN gives them the default without a
-- rewrite) and their readers read their transitions as before; SQLite cannot change a column's
-- default afterwards, so the task inserts write 1 themselves (tasks.sql task_insert and
-- task_insert_many). Migration 16 (PostgreSQL's dropped due index) was SQLite's 12.
ALTER TABLE jobtrail_tasks ADD COLUMN claimed_version TEXT;
ALTER TABLE jobtrail_tasks ADD COLUMN first_failure_at REAL;
ALTER TABLE jobtrail_tasks ADD COLUMN evidence_on_row INTEGER NOT NULL DEFAULT 0
    CHECK (evidence_on_row IN (0, 1));
