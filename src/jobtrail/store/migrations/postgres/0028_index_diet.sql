-- Fewer index entries per task write (issue 45, performance). A change of state is not a HOT
-- update (state is indexed), so every index whose predicate the new row meets gets an entry:
-- a non-partial index one at enqueue, claim and completion alike. These two were the only
-- non-partial ones besides the primary key.
--
-- The search by payload field reads this GIN index for the settled tasks (every state but
-- queued and leased: one set of entries per task, at its end) and the queued and leased tasks
-- through their own partial indexes (jobtrail_tasks_queued_kind, jobtrail_tasks_held).
DROP INDEX jobtrail_tasks_payload;
CREATE INDEX jobtrail_tasks_payload_settled ON jobtrail_tasks USING gin (payload jsonb_path_ops)
    WHERE state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                    'cancel_requested');
-- A page of one state newest first, kind by kind, and the kinds of one state, for the same
-- states; queued and leased tasks are read through their own partial indexes.
DROP INDEX jobtrail_tasks_state_kind;
CREATE INDEX jobtrail_tasks_settled_kind ON jobtrail_tasks (state, kind, id)
    WHERE state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                    'cancel_requested');
