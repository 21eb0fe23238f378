-- Replay runs: each replay_dead call is a run, recorded with its operator, note,
-- filter (data), progress and how it ended. A run replays batch by batch; between batches it
-- observes its replayed tasks (jobtrail_replay_run_tasks) and stops once stop_after_failures of
-- them have gone dead again, or when a batch has not settled within the run's batch timeout.

CREATE TABLE jobtrail_replay_runs (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    actor               TEXT    NOT NULL,
    note                TEXT    NOT NULL,
    data                TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
    batch_size          INTEGER CHECK (batch_size IS NULL OR batch_size >= 1),
    stop_after_failures INTEGER CHECK (stop_after_failures IS NULL OR stop_after_failures >= 1),
    total               INTEGER NOT NULL CHECK (total >= 0),
    replayed            INTEGER NOT NULL DEFAULT 0 CHECK (replayed >= 0),
    skipped             INTEGER NOT NULL DEFAULT 0 CHECK (skipped >= 0),
    batches             INTEGER NOT NULL DEFAULT 0 CHECK (batches >= 0),
    died_again          INTEGER NOT NULL DEFAULT 0 CHECK (died_again >= 0),
    state               TEXT    NOT NULL CHECK (state IN ('running', 'completed', 'stopped')),
    stop_code           TEXT CHECK (stop_code IS NULL
                            OR stop_code IN ('died_again', 'not_settled', 'interrupted')),
    created_at          REAL    NOT NULL,
    updated_at          REAL    NOT NULL,
    finished_at         REAL,
    CHECK ((state = 'running') = (finished_at IS NULL)),
    CHECK ((state = 'stopped') = (stop_code IS NOT NULL)),
    CHECK (replayed + skipped <= total)
);

-- The tasks a run selected, in the order it replays them. replayed_seq is the seq of the run's
-- own `replayed` transition (NULL until replayed): the task "died again" when a later
-- transition of it moved it to dead. No foreign key to jobtrail_tasks: pruning may delete a
-- replayed task that later succeeded, and the run keeps its record.
CREATE TABLE jobtrail_replay_run_tasks (
    run_id       INTEGER NOT NULL REFERENCES jobtrail_replay_runs (id),
    task_id      INTEGER NOT NULL,
    position     INTEGER NOT NULL,
    replayed_seq INTEGER,
    PRIMARY KEY (run_id, position)
);
