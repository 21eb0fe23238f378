-- jobtrail schema v1 (PostgreSQL >= 13). Times are timestamptz from the database clock (now()).

CREATE TABLE jobtrail_tasks (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind                TEXT        NOT NULL,
    queue               TEXT        NOT NULL,
    tenant              TEXT        NOT NULL DEFAULT '',
    state               TEXT        NOT NULL CHECK (state IN ('queued', 'leased',
                            'awaiting_receipt', 'cancel_requested', 'waiting', 'succeeded',
                            'cancelled', 'dead')),
    payload             JSONB       NOT NULL,
    payload_hash        TEXT        NOT NULL,
    idempotency_key     TEXT,
    priority            INTEGER     NOT NULL DEFAULT 0,
    attempts            INTEGER     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts        INTEGER     NOT NULL CHECK (max_attempts >= 1),
    lease_seconds       DOUBLE PRECISION NOT NULL CHECK (lease_seconds > 0),
    reentrant           BOOLEAN     NOT NULL,
    run_at              TIMESTAMPTZ NOT NULL,
    lease_owner         TEXT,
    lease_expires_at    TIMESTAMPTZ,
    last_reason         TEXT        NOT NULL,
    last_error_category TEXT,
    last_error          TEXT,
    replay_count        INTEGER     NOT NULL DEFAULT 0,
    receipt_id          TEXT,
    receipt_deadline    TIMESTAMPTZ,
    parent_id           BIGINT REFERENCES jobtrail_tasks (id),
    seq                 INTEGER     NOT NULL CHECK (seq >= 1),
    budget_started_at   TIMESTAMPTZ NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    finished_at         TIMESTAMPTZ,
    dismissed_at        TIMESTAMPTZ,
    CONSTRAINT jobtrail_tasks_finished_iff_terminal
        CHECK ((state IN ('succeeded', 'cancelled', 'dead')) = (finished_at IS NOT NULL)),
    CONSTRAINT jobtrail_tasks_lease_iff_held
        CHECK ((state IN ('leased', 'cancel_requested'))
               = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT jobtrail_tasks_receipt_deadline
        CHECK (receipt_deadline IS NULL OR state = 'awaiting_receipt'),
    CONSTRAINT jobtrail_tasks_dismissed_dead CHECK (dismissed_at IS NULL OR state = 'dead')
);

CREATE UNIQUE INDEX jobtrail_tasks_intent_once
    ON jobtrail_tasks (tenant, kind, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobtrail_tasks_due
    ON jobtrail_tasks (queue, priority DESC, run_at, id) WHERE state = 'queued';
CREATE INDEX jobtrail_tasks_lease
    ON jobtrail_tasks (lease_expires_at) WHERE state IN ('leased', 'cancel_requested');
CREATE INDEX jobtrail_tasks_receipt
    ON jobtrail_tasks (receipt_deadline) WHERE state = 'awaiting_receipt';
CREATE INDEX jobtrail_tasks_dead ON jobtrail_tasks (finished_at, id) WHERE state = 'dead';
CREATE INDEX jobtrail_tasks_state_kind ON jobtrail_tasks (state, kind, id);
CREATE INDEX jobtrail_tasks_parent ON jobtrail_tasks (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE jobtrail_transitions (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id        BIGINT      NOT NULL,
    seq            INTEGER     NOT NULL CHECK (seq >= 1),
    from_state     TEXT CHECK (from_state IN ('queued', 'leased', 'awaiting_receipt',
                       'cancel_requested', 'waiting', 'succeeded', 'cancelled', 'dead')),
    to_state       TEXT        NOT NULL CHECK (to_state IN ('queued', 'leased',
                       'awaiting_receipt', 'cancel_requested', 'waiting', 'succeeded',
                       'cancelled', 'dead')),
    reason         TEXT        NOT NULL,
    error_category TEXT,
    error          TEXT,
    actor          TEXT        NOT NULL,
    attempt        INTEGER     NOT NULL,
    at             TIMESTAMPTZ NOT NULL,
    note           TEXT,
    corrects       INTEGER,
    data           JSONB       NOT NULL DEFAULT '{}',
    CONSTRAINT jobtrail_transitions_task_seq UNIQUE (task_id, seq)
);
CREATE INDEX jobtrail_transitions_reason_at ON jobtrail_transitions (reason, at);

-- The log is append-only. Pruning old finished tasks (``jobtrail prune``) is the one documented exception:
-- it runs with SET LOCAL jobtrail.pruning = 'on' inside its own transaction.
CREATE FUNCTION jobtrail_transitions_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('jobtrail.pruning', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'jobtrail_transitions is append-only (%): append a correction instead',
        TG_OP USING ERRCODE = 'restrict_violation';
END;
$$;

CREATE TRIGGER jobtrail_transitions_no_update
    BEFORE UPDATE ON jobtrail_transitions
    FOR EACH ROW EXECUTE FUNCTION jobtrail_transitions_append_only();
CREATE TRIGGER jobtrail_transitions_no_delete
    BEFORE DELETE ON jobtrail_transitions
    FOR EACH ROW EXECUTE FUNCTION jobtrail_transitions_append_only();
