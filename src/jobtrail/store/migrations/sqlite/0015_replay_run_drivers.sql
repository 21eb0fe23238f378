-- Who drives a replay run, and whether it is still being driven (see PostgreSQL's 0015 for
-- what each column means). SQLite: one column per ALTER TABLE; times are epoch seconds (REAL).
ALTER TABLE jobtrail_replay_runs ADD COLUMN driver TEXT;
ALTER TABLE jobtrail_replay_runs ADD COLUMN detached INTEGER NOT NULL DEFAULT 0
    CHECK (detached IN (0, 1));
ALTER TABLE jobtrail_replay_runs ADD COLUMN heartbeat_at REAL;
ALTER TABLE jobtrail_replay_runs ADD COLUMN batch_at REAL;
ALTER TABLE jobtrail_replay_runs ADD COLUMN stopped_by TEXT;

UPDATE jobtrail_replay_runs SET heartbeat_at = updated_at WHERE state = 'running';

CREATE INDEX jobtrail_replay_runs_running ON jobtrail_replay_runs (id) WHERE state = 'running';
