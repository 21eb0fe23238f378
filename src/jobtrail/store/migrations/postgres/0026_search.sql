-- The dashboard's search: a payload field (payload @> '{"order_id": 17}') through a GIN index
-- of the payloads (jsonb_path_ops: containment only, a third of a default GIN's size), and an
-- idempotency key across tenants and kinds (the unique index leads with tenant and kind).
CREATE INDEX jobtrail_tasks_payload ON jobtrail_tasks USING gin (payload jsonb_path_ops);
CREATE INDEX jobtrail_tasks_key ON jobtrail_tasks (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
