"""The driver seam's reads of tasks and their logs: one task, a page of tasks, a task's
transitions, the expired leases, the dead tasks a replay would touch, the invariant view.
Mixed into ``Driver`` (``base.py``); each runs its statement from the dialect's ``sql/``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .types import Row, Tx


class Reads:
    def encode_time(self, value: datetime) -> Any:
        raise NotImplementedError  # the dialect's (Driver.encode_time)

    def task_get(self, tx: Tx, task_id: int) -> Row | None:
        return tx.one("task_get", {"id": task_id})

    def task_list(
        self,
        tx: Tx,
        *,
        state: str | None = None,
        kind: str | None = None,
        queue: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[Row]:
        # one state: its own statement, whose state is an index condition in any plan
        return tx.all(
            "task_list" if state is None else "view_task_list_state",
            {
                "state": state,
                "kind": kind,
                "queue": queue,
                "tenant": tenant,
                "limit": limit,
                "before_id": before_id,
            },
        )

    def transition_list(self, tx: Tx, task_id: int) -> list[Row]:
        return tx.all("transition_list", {"id": task_id})

    def task_expired(self, tx: Tx, limit: int) -> list[Row]:
        return tx.all("task_expired", {"limit": limit})

    def task_dead_select(
        self,
        tx: Tx,
        *,
        reason: str | None,
        kind: str | None,
        since: datetime | None,
        until: datetime | None,
        limit: int | None,
    ) -> list[Row]:
        return tx.all(
            "task_dead_select",
            {
                "reason": reason,
                "kind": kind,
                "since": self.encode_time(since) if since else None,
                "until": self.encode_time(until) if until else None,
                "limit": limit if limit is not None else -1,
            },
        )

    def invariant_violations(self, tx: Tx) -> list[Row]:
        return tx.all("invariant_violations")
