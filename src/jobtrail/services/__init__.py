"""The moving parts beside the worker: the sweeper (expired leases, receipt deadlines), the cron
scheduler, the outbox relay, the invariant checker and the statistics. They write state only
through ``jobtrail.core.transition``."""
