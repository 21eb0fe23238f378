-- Steps and effects, the outbox, and sequential workflow children.

-- A sequential child waits for the sibling before it: it stays queued with a far-future run_at
-- until that sibling succeeds (then run_at = now(), in the same transaction).
ALTER TABLE jobtrail_tasks ADD COLUMN after_id BIGINT REFERENCES jobtrail_tasks (id);

-- Receipt ids are the provider's: unique per kind among tasks awaiting one.
CREATE UNIQUE INDEX jobtrail_tasks_receipt_id
    ON jobtrail_tasks (kind, receipt_id) WHERE state = 'awaiting_receipt';

CREATE TABLE jobtrail_steps (
    task_id      BIGINT      NOT NULL REFERENCES jobtrail_tasks (id),
    name         TEXT        NOT NULL,
    is_effect    BOOLEAN     NOT NULL,
    status       TEXT        NOT NULL CHECK (status IN ('intent', 'confirmed')),
    effect_key   TEXT UNIQUE,
    result       JSONB,
    attempt      INTEGER     NOT NULL,
    error        TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    confirmed_at TIMESTAMPTZ,
    PRIMARY KEY (task_id, name),
    CHECK ((status = 'confirmed') = (confirmed_at IS NOT NULL)),
    CHECK (is_effect = (effect_key IS NOT NULL))
);

CREATE TABLE jobtrail_outbox (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id      BIGINT      NOT NULL REFERENCES jobtrail_tasks (id),
    topic        TEXT        NOT NULL,
    payload      JSONB       NOT NULL,
    state        TEXT        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered')),
    attempts     INTEGER     NOT NULL DEFAULT 0,
    next_at      TIMESTAMPTZ NOT NULL,
    locked_until TIMESTAMPTZ,
    last_error   TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    delivered_at TIMESTAMPTZ,
    CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
);
CREATE INDEX jobtrail_outbox_pending ON jobtrail_outbox (next_at, id) WHERE state = 'pending';
CREATE INDEX jobtrail_outbox_task ON jobtrail_outbox (task_id);
CREATE INDEX jobtrail_tasks_receipt_lookup ON jobtrail_tasks (receipt_id)
    WHERE receipt_id IS NOT NULL;
CREATE INDEX jobtrail_tasks_after ON jobtrail_tasks (after_id) WHERE after_id IS NOT NULL;
