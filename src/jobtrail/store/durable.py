"""The named statements of durable handlers (migration 0022): a handler's records beyond steps
and effects, the task's current wait, events and the tasks waiting for them, and the sweeper's
wait deadlines. Mixed into ``Driver`` like ``Statements``; ``core/durable.py`` (the handler's
``ctx``), ``core/events.py`` (``send_event``) and the sweeper call them."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .types import Row, Tx


class DurableStatements:
    """Mixed into ``Driver``: each method runs its statement from the dialect's ``durable.sql``."""

    dialect: str

    if TYPE_CHECKING:

        def transaction(
            self, *, write: bool = True, connection: Any = None
        ) -> AbstractContextManager[Tx]: ...

        def _list(self, values: list[Any]) -> Any: ...

    def durable_look(
        self, *, id: int, clock: bool, steps: bool
    ) -> tuple[Row | None, datetime | None, list[Row] | None]:
        """What ``ctx`` reads at a cancel check: the task's holder (``task_holder``'s
        columns, None when the task is gone), with ``clock`` the database's time, with
        ``steps`` the task's records (``step_list``'s rows). One read transaction here; one
        autocommit statement on PostgreSQL (one round trip, not BEGIN, three and COMMIT)."""
        with self.transaction(write=False) as tx:
            holder = tx.one("task_holder", {"id": id})
            now = tx.one("db_now") if clock else None
            rows = tx.all("step_list", {"id": id}) if steps else None
        return holder, None if now is None else now["now"], rows

    def _when(self, value: datetime | None) -> Any:
        """A time parameter: a datetime on PostgreSQL, seconds since the epoch on SQLite."""
        if value is None or self.dialect == "postgres":
            return value
        return value.timestamp()

    def durable_record_put(self, tx: Tx, params: dict[str, Any]) -> Row | None:
        """Record a sleep, wait, join, spawn, now, uuid or patched call (``name``, ``record``,
        ``status`` 'intent' or 'confirmed', ``result`` JSON text, ``call_order``) only while the
        caller (``owner``, ``attempt``) holds the task; ``None`` when it no longer does, or the
        record is confirmed already. ``ctx``."""
        return tx.one("durable_record_put", params)

    def durable_records(self, *, ids: list[int]) -> list[Row]:
        """The records of the tasks ``ids`` (``step_list``'s rows, by task, each task's in
        ``step_list``'s order), in one read: the worker reads those of the resumed handlers a
        claim gave it at once, not each handler its own."""
        with self.transaction(write=False) as tx:
            return tx.all("durable_records", {"ids": self._list(ids)})

    def durable_wait_set(
        self,
        tx: Tx,
        *,
        id: int,
        kind: str,
        name: str,
        key: str | None,
        until: datetime | None,
        ids: str | None,
    ) -> Row | None:
        """Store what the task's handler now waits for (a sleep's wake time becomes its
        ``run_at``), in the transaction of its suspending move; the worker."""
        return tx.one(
            "durable_wait_set",
            {
                "id": id,
                "kind": kind,
                "name": name,
                "key": key,
                "until": self._when(until),
                "ids": ids,
            },
        )

    def durable_wait_get(self, tx: Tx, *, id: int) -> Row | None:
        """The task's state, reason and latest wait (``wait_*``); workflow, cancel."""
        return tx.one("durable_wait_get", {"id": id})

    def durable_event_lock(self, tx: Tx, *, tenant: str, key: str) -> None:
        """Serialise a send of ``(tenant, key)`` with a suspension on it until ``tx`` ends (a
        transaction-scoped advisory lock on PostgreSQL; SQLite's writers are serial anyway);
        ``send_event`` and the worker."""
        tx.one("durable_event_lock", {"tenant": tenant, "key": key})

    def durable_event_put(self, tx: Tx, *, tenant: str, key: str, payload: str) -> bool:
        """Store an event; False when the key was sent before (the first payload wins);
        ``send_event``."""
        return (
            tx.one("durable_event_put", {"tenant": tenant, "key": key, "payload": payload})
            is not None
        )

    def durable_event_get(self, tx: Tx, *, tenant: str, key: str) -> Row | None:
        """The event ``(tenant, key)`` (``payload``, ``created_at``), or None if never sent;
        ``ctx.wait_for_event`` and the worker."""
        return tx.one("durable_event_get", {"tenant": tenant, "key": key})

    def durable_event_waiters(self, tx: Tx, *, tenant: str, key: str) -> list[Row]:
        """The tasks waiting for ``(tenant, key)`` (``id``, ``queue``), locked on PostgreSQL;
        ``send_event``."""
        return tx.all("durable_event_waiters", {"tenant": tenant, "key": key})

    def durable_wait_expired(self, tx: Tx, *, limit: int) -> list[Row]:
        """Up to ``limit`` waiting tasks whose wait deadline has passed (``id``, ``queue``,
        ``wait_kind``, ``wait_name``), locked and skipped by other sweepers on PostgreSQL; the
        sweeper."""
        return tx.all("durable_wait_expired", {"limit": limit})

    def durable_record_time_out(self, tx: Tx, *, id: int, name: str) -> int:
        """Mark the wait record ``name`` of task ``id`` timed out (the resumed call raises
        ``WaitTimedOut``); the sweeper."""
        return tx.run("durable_record_time_out", {"id": id, "name": name})

    def durable_children(self, tx: Tx, *, id: int) -> list[Row]:
        """The children of task ``id`` with their states, last reasons and results, by id;
        ``ctx.join`` and the children's wake-up of their parent."""
        return tx.all("durable_children", {"id": id})

    def durable_record_event(self, tx: Tx, *, id: int, name: str, tenant: str, key: str) -> int:
        """Confirm the wait record ``name`` of task ``id`` with the payload of the event
        ``(tenant, key)``, in the transaction that wakes it; ``send_event`` and the worker."""
        return tx.run(
            "durable_record_event", {"id": id, "name": name, "tenant": tenant, "key": key}
        )

    def prune_events(self, tx: Tx, *, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` events older than ``older_than`` seconds that no waiting task
        waits for; the number deleted. Retention."""
        return tx.run("prune_events", {"older_than": older_than, "limit": limit})
