"""``durable_look`` on PostgreSQL: a durable call's cancel check, the clock and the task's
records in one autocommit statement (``durable.sql``), where the other drivers make a read
transaction of three. A resumed handler makes one at each sleep and wait: on PostgreSQL the
transaction's BEGIN and COMMIT were two round trips more, and each statement one."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING

from ..types import Row, Tx

_HOLDER = {
    "holder_state": "state",
    "holder_owner": "lease_owner",
    "holder_attempts": "attempts",
    "holder_valid": "lease_valid",
}


class DurableLook:
    """Mixed into ``PostgresDriver`` before ``Driver``."""

    if TYPE_CHECKING:

        def single_statement(self, *, pinned: bool = False) -> AbstractContextManager[Tx]: ...

    def durable_look(
        self, *, id: int, clock: bool, steps: bool
    ) -> tuple[Row | None, datetime | None, list[Row] | None]:
        with self.single_statement() as tx:
            rows = tx.all("durable_look", {"id": id, "steps": steps})
        first = rows[0]
        now = first["holder_now"]
        holder = None
        if first["holder_state"] is not None:
            holder = {column: first[key] for key, column in _HOLDER.items()}
        records: list[Row] | None = None
        if steps:
            records = [_record(r) for r in rows if r["name"] is not None]
        return holder, now if clock else None, records


def _record(row: Row) -> Row:
    """A step row as ``step_list`` returns it (the holder's columns dropped)."""
    return {k: v for k, v in row.items() if not k.startswith("holder_")}


__all__ = ["DurableLook"]
