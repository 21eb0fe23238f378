"""The single enqueue with ``wait_for_disk=False`` on PostgreSQL, in one round trip.

``task_insert`` (and ``task_insert_handoff``) with one more column at the end of its last
SELECT: ``skip_flush_wait``'s ``set_config('synchronous_commit', 'off', true)``
(sql/postgres/unflushed.sql). The statement runs on an autocommit connection, as the durable
single enqueue does (through libpq directly on the express connection, direct.py): it is its own
transaction, and that transaction's commit, after the statement, reads the setting the
statement made, so it returns without waiting for the WAL flush. Derived from the loaded
statements rather than copied, so both follow any change to ``task_insert``.
"""

from __future__ import annotations

#: The statements of the single enqueue and the names of their unflushed twins.
UNFLUSHED = {
    "task_insert": "task_insert_unflushed",
    "task_insert_handoff": "task_insert_handoff_unflushed",
}

_LAST_FROM = "\nFROM ins"


def unflushed_insert(sql: str, skip_flush_wait: str) -> str:
    """``sql`` with ``skip_flush_wait``'s column added last to its final SELECT (the others keep
    their positions: the driver reads them by position)."""
    column = skip_flush_wait.removeprefix("SELECT ")
    head, found, tail = sql.rpartition(_LAST_FROM)
    if not found or "\n" in tail or column == skip_flush_wait or "\n" in column:
        # the statements changed: this must follow them
        raise RuntimeError("task_insert no longer ends as postgres/unflushed.py expects")
    return f"{head},\n{column}{found}{tail}"


def unflushed_statements(sql: dict[str, str]) -> dict[str, str]:
    """The unflushed twins of the single enqueue's statements of ``sql``, by name."""
    return {
        twin: unflushed_insert(sql[name], sql["skip_flush_wait"])
        for name, twin in UNFLUSHED.items()
    }
