-- PostgreSQL's 0014 registers result waiters so that completions notify only while someone
-- waits. SQLite has no notifications (a waiter watches the file's data version): nothing to
-- add; the version is kept in step with PostgreSQL's.
SELECT 1;
