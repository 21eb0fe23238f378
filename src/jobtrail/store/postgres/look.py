"""``durable_look`` and ``durable_records`` on PostgreSQL, each one autocommit statement
(``durable.sql``) where the other drivers make a read transaction: a durable call's cancel
check, the clock and the task's records (BEGIN, three statements and COMMIT were five round
trips), and the records of the resumed handlers of a claim."""

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

    def durable_records(self, *, ids: list[int]) -> list[Row]:
        with self.single_statement() as tx:
            return tx.all("durable_records", {"ids": ids})


def _record(row: Row) -> Row:
    """A step row as ``step_list`` returns it (the holder's columns dropped)."""
    return {k: v for k, v in row.items() if not k.startswith("holder_")}


__all__ = ["DurableLook"]
