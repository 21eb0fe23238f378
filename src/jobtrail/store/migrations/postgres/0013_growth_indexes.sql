-- Reads that stay fast on a large store (issue 21, growth: 1,000,000 queued tasks and
-- 10,000,000 transitions).
--
-- Queued tasks by queue, kind and due time: stats reads each (queue, kind) group's oldest due
-- task and counts its queued tasks up to a bound from this index alone, instead of grouping
-- every queued row. Partial: a claim moves the row out of it, so the hot path pays for it only
-- when a task enters the queue.
CREATE INDEX jobtrail_tasks_queued_kind ON jobtrail_tasks (queue, kind, run_at)
    WHERE state = 'queued';
