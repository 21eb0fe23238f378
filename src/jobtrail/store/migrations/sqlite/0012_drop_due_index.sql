-- Single enqueue (issue 21): one index fewer to write per task.
--
-- Since the fair claim (0009) every read of queued tasks by queue goes through
-- jobtrail_tasks_due_tenant (queue, tenant, priority DESC, run_at, id WHERE state = 'queued'):
-- the claims walk its tenants, and the one other reader, queue_due_count, counts the same rows
-- from it (a covering range on queue either way). jobtrail_tasks_due (0001) was read by nothing
-- else, yet every enqueue, claim and requeue wrote it: one page more per commit. SQLite only;
-- PostgreSQL keeps its index (its claim plans read it).
DROP INDEX IF EXISTS jobtrail_tasks_due;
