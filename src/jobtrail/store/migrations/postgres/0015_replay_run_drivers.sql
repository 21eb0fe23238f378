-- Who drives a replay run, and whether it is still being driven (issue 19).
--
-- driver:       the process that drives the run now ("host:pid:token"): the CLI or App call
--               that started it, or, for a detached run, the sweeper taking its current step
--               (NULL between steps). Kept when the run ends: the last one that drove it.
-- detached:     the run was started from the dashboard (or with replay_dead(detach=True)): it
--               has no process of its own, the sweep of every worker process advances it a
--               step at a time, and any of them takes it over when its step's driver stops.
-- heartbeat_at: the driver's last sign of life (it beats at least once a second while it
--               waits for a batch to settle). An attached run whose driver stopped beating
--               (SIGKILL, power loss) is stopped as `interrupted` by the sweeper or a reader.
-- batch_at:     when the run finished replaying its latest batch: the batch timeout counts
--               from here, on the database clock, whoever looks.
-- stopped_by:   who ended the run: its driver, or the sweeper (or reader) that found its
--               driver no longer beating.
ALTER TABLE jobtrail_replay_runs
    ADD COLUMN driver       TEXT,
    ADD COLUMN detached     BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN heartbeat_at TIMESTAMPTZ,
    ADD COLUMN batch_at     TIMESTAMPTZ,
    ADD COLUMN stopped_by   TEXT;

-- A run left `running` by a process that died before this migration last lived at its last
-- progress: it is found stale like any other.
UPDATE jobtrail_replay_runs SET heartbeat_at = updated_at WHERE state = 'running';

-- The sweeper's look at running runs, every second in every worker: a handful of rows.
CREATE INDEX jobtrail_replay_runs_running ON jobtrail_replay_runs (id) WHERE state = 'running';
