-- Fewer index entries per task write (issue 45, performance): (state, kind, id) was the one
-- non-partial index of the tasks besides the primary key, written at enqueue, claim and
-- completion. It now holds the settled tasks (every state but queued and leased: one entry per
-- task, at its end); queued and leased tasks are read through their own partial indexes.
DROP INDEX jobtrail_tasks_state_kind;
CREATE INDEX jobtrail_tasks_settled_kind ON jobtrail_tasks (state, kind, id)
    WHERE state IN ('succeeded', 'cancelled', 'dead', 'waiting', 'awaiting_receipt',
                    'cancel_requested');
