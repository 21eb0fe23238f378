-- Bulk enqueue (issue 21): one index fewer to write per task, as SQLite did in 0012.
--
-- The one-tenant claim (claim_one_tenant_where) now names the tenant its gate found, so it
-- reads that tenant's due tasks in order from jobtrail_tasks_due_tenant (queue, tenant,
-- priority DESC, run_at, id WHERE state = 'queued'), as the fair claims and the gate already
-- did. jobtrail_tasks_due (0001) was then read by nothing (tests/integration/test_claim_plan.py
-- checks the claims' plans and queue_due_count's), yet every enqueue and requeue wrote it: a
-- sixth of the index entries of an enqueue.
DROP INDEX IF EXISTS jobtrail_tasks_due;
