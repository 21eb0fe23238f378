-- Reads that stay fast on a large store (issue 21, growth: 1,000,000 queued tasks and
-- 10,000,000 transitions).
--
-- Queued tasks by queue, kind and due time: stats reads each (queue, kind) group's oldest due
-- task and counts its queued tasks up to a bound from this index alone, instead of grouping
-- every queued row. Partial: a claim moves the row out of it, so the hot path pays for it only
-- when a task enters the queue.
--
-- Its predicate also says kind <> '' (every kind is a non-empty name, so no queued task is left
-- out), which only the stats statements state: the claim and its gate cannot prove it, so the
-- planner never offers them this index. On a table without statistics yet (a new store filling
-- up) it chose this index for the claim, and sorted the whole queue on every claim: 58 ms a
-- claim at 65,000 queued, and a worker fell to a tenth of its rate under steady arrival.
CREATE INDEX jobtrail_tasks_queued_kind ON jobtrail_tasks (queue, kind, run_at)
    WHERE state = 'queued' AND kind <> '';
