-- Serial per key and per-kind rates (docs/guide.md, "Serial per key", "Rates per kind").
-- A task enqueued with a concurrency key holds it with the limit of its kind
-- (concurrency_per_key); the claim of its queue takes at most that many tasks of one
-- (queue, tenant, key) leased at once, in due order. A queue that ever held a keyed task is
-- marked keyed: its claims go through the limited claim (the queue's row locked, so claims of
-- it take turns and each counts what the last one leased).
ALTER TABLE jobtrail_tasks ADD COLUMN ckey text;
ALTER TABLE jobtrail_tasks ADD COLUMN concurrency_limit integer
    CHECK (concurrency_limit IS NULL OR concurrency_limit >= 1);
ALTER TABLE jobtrail_queues ADD COLUMN keyed boolean NOT NULL DEFAULT false;
-- a queue with a rate for one of its kinds claims through the limited claim too
ALTER TABLE jobtrail_queues ADD COLUMN kind_rated boolean NOT NULL DEFAULT false;

-- the claims of unkeyed tasks (fair_due, claim_gate, the one-tenant claim) read only unkeyed
-- tasks: their index leaves keyed ones out, so a backlog under a busy key is not read by
-- every claim of the queue's other tasks
DROP INDEX jobtrail_tasks_due_tenant;
CREATE INDEX jobtrail_tasks_due_tenant ON jobtrail_tasks (queue, tenant, priority DESC, run_at, id)
    WHERE state = 'queued' AND ckey IS NULL;
-- the keys with queued tasks of a queue (a skip scan) and each key's tasks in due order
CREATE INDEX jobtrail_tasks_keyed_due ON jobtrail_tasks (queue, tenant, ckey, run_at, id)
    WHERE state = 'queued' AND ckey IS NOT NULL;
-- the keyed tasks in the claim's order (task_claim_keyed_due)
CREATE INDEX jobtrail_tasks_keyed_order ON jobtrail_tasks (queue, priority DESC, run_at, id)
    WHERE state = 'queued' AND ckey IS NOT NULL;
-- the tasks holding a key now
CREATE INDEX jobtrail_tasks_keyed_held ON jobtrail_tasks (queue, tenant, ckey)
    WHERE state IN ('leased', 'cancel_requested') AND ckey IS NOT NULL;

-- a token bucket per (queue, kind), beside the queue's own
CREATE TABLE jobtrail_kind_rates (
    queue      text NOT NULL,
    kind       text NOT NULL,
    per_second double precision NOT NULL CHECK (per_second > 0),
    burst      integer CHECK (burst IS NULL OR burst >= 0),
    tokens     double precision,
    tokens_at  timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, kind)
);
