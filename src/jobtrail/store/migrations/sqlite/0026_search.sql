-- The dashboard's search: an idempotency key across tenants and kinds (the unique index leads
-- with tenant and kind). Payload fields and error text are a bounded scan of the newest tasks.
CREATE INDEX jobtrail_tasks_key ON jobtrail_tasks (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
