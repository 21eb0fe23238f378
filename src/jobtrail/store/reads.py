"""The driver seam's reads of tasks and their logs: one task, a page of tasks, a task's
transitions, the expired leases, the dead tasks a replay would touch, the invariant view.
Mixed into ``Driver`` (``base.py``); each runs its statement from the dialect's ``sql/``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .types import Row, Stamp, Tx

#: the newest ids a page of queued tasks reads before it reads every queued task
QUEUED_WINDOW = 10_000


class Reads:
    def encode_time(self, value: datetime) -> Stamp:
        """``value`` as this dialect stores a time (PostgreSQL: as is; SQLite: epoch seconds); every
        caller that passes a time to a statement."""
        raise NotImplementedError  # the dialect's (Driver.encode_time)

    def task_get(self, tx: Tx, task_id: int) -> Row | None:
        """One task's row, or None; App.get and every reader of one task (explain, outcomes,
        receipts, replays)."""
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
        """A page of tasks newest first, filtered (``before_id``: older than it); App.list, the
        dashboard."""
        params = {
            "state": state,
            "kind": kind,
            "queue": queue,
            "tenant": tenant,
            "limit": limit,
            "before_id": before_id,
        }
        if state is None:
            return tx.all("task_list", params)
        if state == "leased":
            return tx.all("view_task_list_leased", params)  # few: the workers' concurrency
        if state == "queued":
            return self._queued_page(tx, params)
        # One settled state: the newest page of each of its kinds through the partial (state,
        # kind, id) index, merged — the newest tasks of a large store may all be in another
        # state (a million queued), which a newest-first walk would read before these.
        kinds = (
            [kind]
            if kind is not None
            else [r["kind"] for r in tx.all("view_state_kinds", {"state": state})]
        )
        rows: list[Row] = []
        for name in kinds:
            rows += tx.all("view_task_list_state_kind", {**params, "kind": name})
        rows.sort(key=lambda r: -int(r["id"]))
        return rows[:limit]

    def _queued_page(self, tx: Tx, params: dict[str, Any]) -> list[Row]:
        """A page of queued tasks, which no (state, kind, id) index holds (every enqueue and
        claim would write it): the newest ``QUEUED_WINDOW`` ids first (a backlog is there),
        else every queued task through their own index."""
        top = params["before_id"]
        if top is None:
            row = tx.one("search_top_id", {})
            top = (int(row["id"]) if row else 0) + 1
        floor = max(0, top - QUEUED_WINDOW)
        rows = tx.all("view_task_list_queued", {**params, "floor_id": floor})
        if len(rows) >= params["limit"] or floor == 0:
            return rows
        return tx.all("view_task_list_queued_all", params)

    def transition_list(self, tx: Tx, task_id: int) -> list[Row]:
        """A task's transition log in ``seq`` order; App.transitions (explain, the dashboard, the
        CLI)."""
        return tx.all("transition_list", {"id": task_id})

    def task_expired(self, tx: Tx, limit: int) -> list[Row]:
        """Up to ``limit`` held tasks past their lease, locked (SKIP LOCKED) for the sweeper to
        move."""
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
        """Ids of the undismissed dead tasks a replay filter matches, oldest finish first; App's
        replay and its preview."""
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
        """Tasks whose state is not their log's last ``to_state`` (empty when sound); the driver
        tests."""
        return tx.all("invariant_violations")
