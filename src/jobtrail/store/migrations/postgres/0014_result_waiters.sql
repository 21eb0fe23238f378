-- Who waits for a result (app.result with a timeout): the backend pid of each
-- waiter's LISTEN connection, registered while it waits. A move to a terminal state notifies
-- jobtrail_finished only while a row exists: PostgreSQL serializes the commits of all
-- transactions that NOTIFY, cluster-wide, through the WAL flush, and one notification in
-- every completing round trip made 16 worker processes wait on that lock for a quarter to
-- nearly half of their time (docs/performance.md, Many workers). Unlogged: nothing of it has
-- to survive a crash (the waiters' connections do not either); a waiter that vanished
-- without deleting its row only costs notifications until the next waiter clears it.
CREATE UNLOGGED TABLE jobtrail_result_waiters (
    pid   integer     PRIMARY KEY,
    since timestamptz NOT NULL DEFAULT now()
);
