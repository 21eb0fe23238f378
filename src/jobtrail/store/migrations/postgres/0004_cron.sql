-- Cron: the schedules of periodic kinds and every window recorded for them.

-- One row per periodic kind, written by the schedulers when they first see it (or its
-- definition changes). anchor_at: only windows after this time are considered — the time the
-- schedule was first seen, or its expression or time zone last changed (no backfill).
CREATE TABLE jobtrail_cron_schedules (
    kind       TEXT        PRIMARY KEY,
    cron       TEXT        NOT NULL,
    tz         TEXT        NOT NULL,
    queue      TEXT        NOT NULL,
    catch_up   INTEGER     NOT NULL CHECK (catch_up >= 0),
    on_paused  TEXT        NOT NULL CHECK (on_paused IN ('run', 'skip')),
    anchor_at  TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- One row per window of a schedule, ever: the primary key is the uniqueness of
-- (kind, scheduled window) that makes racing schedulers collapse into one task per window.
-- earlier_skipped: on the oldest skipped row of a catch-up, how many earlier missed windows
-- were skipped too without a row of their own (counted up to the scan bound, 1000).
-- task_id is not a foreign key: pruning a finished task keeps its window's record.
CREATE TABLE jobtrail_cron_windows (
    kind            TEXT        NOT NULL,
    window_at       TIMESTAMPTZ NOT NULL,
    state           TEXT        NOT NULL CHECK (state IN ('enqueued', 'skipped')),
    reason          TEXT,
    task_id         BIGINT,
    earlier_skipped INTEGER     NOT NULL DEFAULT 0 CHECK (earlier_skipped >= 0),
    recorded_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (kind, window_at),
    CHECK ((state = 'skipped') = (reason IS NOT NULL))
);
