-- SQLite's 0027 keeps a task's enqueued transition on its row (a view of the row and the log
-- table reads as the log). PostgreSQL keeps that transition as a row of jobtrail_transitions:
-- its row would need an index on the task's created_at for the readers of a time window,
-- and on PostgreSQL every change of state writes a new entry into every index of the task
-- row (the state is indexed, so no update is HOT): that index would cost a claim and a
-- completion more than the log row it saves costs an enqueue (docs/performance.md). Nothing
-- to change here; the number is kept alike in both dialects.
SELECT 1;
