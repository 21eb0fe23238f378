-- Live workers (see PostgreSQL's 0020 for what each column means). Times are
-- epoch seconds (REAL); queues and kinds are JSON arrays of names.
CREATE TABLE jobtrail_workers (
    id           TEXT    PRIMARY KEY,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    version      TEXT,
    queues       TEXT    NOT NULL CHECK (json_valid(queues)),
    kinds        TEXT    NOT NULL CHECK (json_valid(kinds)),
    concurrency  INTEGER NOT NULL CHECK (concurrency >= 1),
    started_at   REAL    NOT NULL,
    last_seen_at REAL    NOT NULL,
    stale_after  REAL    NOT NULL CHECK (stale_after > 0)
);
