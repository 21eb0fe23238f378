-- jobtrail schema v1 (SQLite). Times are REAL seconds since the Unix epoch, UTC, read from the
-- database clock: (julianday('now') - 2440587.5) * 86400.0.

CREATE TABLE jobtrail_tasks (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                TEXT    NOT NULL,
    queue               TEXT    NOT NULL,
    tenant              TEXT    NOT NULL DEFAULT '',
    state               TEXT    NOT NULL CHECK (state IN ('queued', 'leased', 'awaiting_receipt',
                            'cancel_requested', 'waiting', 'succeeded', 'cancelled', 'dead')),
    payload             TEXT    NOT NULL CHECK (json_valid(payload)),
    payload_hash        TEXT    NOT NULL,
    idempotency_key     TEXT,
    priority            INTEGER NOT NULL DEFAULT 0,
    attempts            INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts        INTEGER NOT NULL CHECK (max_attempts >= 1),
    lease_seconds       REAL    NOT NULL CHECK (lease_seconds > 0),
    reentrant           INTEGER NOT NULL CHECK (reentrant IN (0, 1)),
    run_at              REAL    NOT NULL,
    lease_owner         TEXT,
    lease_expires_at    REAL,
    last_reason         TEXT    NOT NULL,
    last_error_category TEXT,
    last_error          TEXT,
    replay_count        INTEGER NOT NULL DEFAULT 0,
    receipt_id          TEXT,
    receipt_deadline    REAL,
    parent_id           INTEGER REFERENCES jobtrail_tasks (id),
    seq                 INTEGER NOT NULL CHECK (seq >= 1),
    budget_started_at   REAL    NOT NULL,
    created_at          REAL    NOT NULL,
    updated_at          REAL    NOT NULL,
    finished_at         REAL,
    dismissed_at        REAL,
    -- a finish time exactly when the state is terminal
    CHECK ((state IN ('succeeded', 'cancelled', 'dead')) = (finished_at IS NOT NULL)),
    -- a lease (owner and expiry) exactly when a worker holds the task
    CHECK ((state IN ('leased', 'cancel_requested'))
           = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (receipt_deadline IS NULL OR state = 'awaiting_receipt'),
    CHECK (dismissed_at IS NULL OR state = 'dead')
);

CREATE UNIQUE INDEX jobtrail_tasks_intent_once
    ON jobtrail_tasks (tenant, kind, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobtrail_tasks_due
    ON jobtrail_tasks (queue, priority DESC, run_at, id) WHERE state = 'queued';
CREATE INDEX jobtrail_tasks_lease
    ON jobtrail_tasks (lease_expires_at) WHERE state IN ('leased', 'cancel_requested');
CREATE INDEX jobtrail_tasks_receipt
    ON jobtrail_tasks (receipt_deadline) WHERE state = 'awaiting_receipt';
CREATE INDEX jobtrail_tasks_dead
    ON jobtrail_tasks (finished_at, id) WHERE state = 'dead';
CREATE INDEX jobtrail_tasks_state_kind ON jobtrail_tasks (state, kind, id);
CREATE INDEX jobtrail_tasks_parent ON jobtrail_tasks (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE jobtrail_transitions (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id        INTEGER NOT NULL,
    seq            INTEGER NOT NULL CHECK (seq >= 1),
    from_state     TEXT CHECK (from_state IN ('queued', 'leased', 'awaiting_receipt',
                       'cancel_requested', 'waiting', 'succeeded', 'cancelled', 'dead')),
    to_state       TEXT NOT NULL CHECK (to_state IN ('queued', 'leased', 'awaiting_receipt',
                       'cancel_requested', 'waiting', 'succeeded', 'cancelled', 'dead')),
    reason         TEXT NOT NULL,
    error_category TEXT,
    error          TEXT,
    actor          TEXT NOT NULL,
    attempt        INTEGER NOT NULL,
    at             REAL NOT NULL,
    note           TEXT,
    corrects       INTEGER,
    data           TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
    UNIQUE (task_id, seq)
);
CREATE INDEX jobtrail_transitions_reason_at ON jobtrail_transitions (reason, at);

-- Pruning (the one documented exception to the append-only log) inserts a row here inside its
-- own transaction and deletes it before committing.
CREATE TABLE jobtrail_prune_guard (token INTEGER PRIMARY KEY);

CREATE TRIGGER jobtrail_transitions_no_update
BEFORE UPDATE ON jobtrail_transitions
BEGIN
    SELECT RAISE(ABORT, 'jobtrail_transitions is append-only: append a correction instead');
END;

CREATE TRIGGER jobtrail_transitions_no_delete
BEFORE DELETE ON jobtrail_transitions
WHEN NOT EXISTS (SELECT 1 FROM jobtrail_prune_guard)
BEGIN
    SELECT RAISE(ABORT, 'jobtrail_transitions is append-only: only pruning may delete');
END;
