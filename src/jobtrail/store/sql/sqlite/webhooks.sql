-- Webhook deliveries (SQLite). See jobtrail/app_webhooks.py.

-- name: webhook_delivery_insert
INSERT INTO jobtrail_webhook_deliveries (source, delivery_id, event_type, received_at, bad_body)
VALUES (:source, :delivery_id, :event_type, ((julianday('now') - 2440587.5) * 86400.0), :bad_body)
ON CONFLICT (source, delivery_id) DO NOTHING
RETURNING source;

-- name: webhook_delivery_get
SELECT source, delivery_id, task_id, event_type, bad_body
FROM jobtrail_webhook_deliveries
WHERE source = :source AND delivery_id = :delivery_id;

-- name: webhook_delivery_set_task
UPDATE jobtrail_webhook_deliveries SET task_id = :task_id
WHERE source = :source AND delivery_id = :delivery_id;

-- name: webhook_delivery_count
SELECT COUNT(*) AS n FROM jobtrail_webhook_deliveries;
