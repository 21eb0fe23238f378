-- Receipt ids are unique per (kind, tenant) among awaiting tasks, not per kind across tenants:
-- one tenant's receipt id must not collide with another's (a receipt belongs to the
-- tenant of its task). Two tenants of one provider may be handed the same id.
DROP INDEX jobtrail_tasks_receipt_id;
CREATE UNIQUE INDEX jobtrail_tasks_receipt_id
    ON jobtrail_tasks (kind, tenant, receipt_id) WHERE state = 'awaiting_receipt';
