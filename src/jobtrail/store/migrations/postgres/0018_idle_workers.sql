-- Workers waiting for work, which a single enqueue may hand a task to (the hand-off, issue
-- 21's idle latency: docs/design_idle_handoff.md). A worker's pump inserts its row when it is
-- idle (nothing running, its last claim found nothing) and deletes it before it claims again;
-- the enqueue of a task that would be claimed at once inserts it already leased to the
-- longest-idle live worker serving its queue and kind, logs `enqueued` and `claimed` in the
-- same statement, marks the row `handed` and notifies the worker's own channel. A worker is
-- live while its LISTEN connection holds the session advisory lock `lock_key`: the enqueue
-- skips a row whose lock it could take. Unlogged: after a crash of the server there is no
-- idle worker to remember, and its rows cost no WAL flush.
CREATE UNLOGGED TABLE jobtrail_idle_workers (
    owner    text        PRIMARY KEY,
    queues   text[]      NOT NULL,
    kinds    text[]      NOT NULL,
    channel  text        NOT NULL,
    lock_key bigint      NOT NULL,
    version  text,
    handed   bigint,
    since    timestamptz NOT NULL DEFAULT now()
);
