-- Webhooks: one row per (source, delivery id) ever received with a valid signature.
-- The primary key is the dedupe: the row and the event task are written in one transaction,
-- so a repeat delivery finds the row and answers with the same task id, changing nothing.
-- task_id is NULL for a verified body that was not JSON; bad_body then keeps it (for a person
-- to inspect). task_id is not a foreign key: pruning a finished task keeps the delivery record.
CREATE TABLE jobtrail_webhook_deliveries (
    source      TEXT        NOT NULL,
    delivery_id TEXT        NOT NULL,
    task_id     BIGINT,
    event_type  TEXT,
    received_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    bad_body    TEXT,
    PRIMARY KEY (source, delivery_id)
);
