-- Live workers: one row per running worker process, written by its own sweep.
--
-- id:          the worker's owner id, host:pid:boot (the lease_owner of the tasks it holds).
-- queues, kinds: what it claims from (JSON arrays of names): explain and doctor compare a due
--              task's queue and kind with them.
-- stale_after: seconds after its last beat at which a silent worker (SIGKILL, power loss) is
--              forgotten: readers skip it and the next beat of any worker deletes its row.
--              Written by the worker (60 s by default), so no reader needs its settings.
-- A worker inserts its row at start, moves last_seen_at every few seconds and deletes the
-- row when it stops. The tasks it holds are read from jobtrail_tasks (lease_owner), never
-- copied here. Unlogged: a beat costs no WAL flush, and after a server crash the next beat
-- of each live worker writes its row again.
CREATE UNLOGGED TABLE jobtrail_workers (
    id           text             PRIMARY KEY,
    host         text             NOT NULL,
    pid          integer          NOT NULL,
    version      text,
    queues       jsonb            NOT NULL,
    kinds        jsonb            NOT NULL,
    concurrency  integer          NOT NULL CHECK (concurrency >= 1),
    started_at   timestamptz      NOT NULL DEFAULT now(),
    last_seen_at timestamptz      NOT NULL DEFAULT now(),
    stale_after  double precision NOT NULL CHECK (stale_after > 0)
);
