"""The driver seam's searches for the dashboard: a page of tasks (or the ids and states of a
bounded selection) matching one search term and the list's filters. Mixed into ``Driver``
(``base.py``); each runs its statement from the dialect's ``sql/search.sql``."""

from __future__ import annotations

from typing import Any

from .types import Row, Tx

#: the searches by a term (``search_<mode>`` and ``search_<mode>_states``)
MODES = frozenset({"filter", "payload", "error", "key"})


class Search:
    def search_top_id(self, tx: Tx) -> int:
        """The newest task id (0 in an empty store); App.search bounds a scan below it."""
        row = tx.one("search_top_id", {})
        return int(row["id"]) if row else 0

    def search_tasks(
        self, tx: Tx, mode: str, params: dict[str, Any], *, states_only: bool = False
    ) -> list[Row]:
        """Tasks newest first matching ``mode`` (``filter``: the filters alone; ``payload``:
        ``doc`` on PostgreSQL, ``path``/``value``/``jtype`` on SQLite; ``error``: ``pattern``,
        a LIKE pattern; ``key``: ``key``) and the filters in ``params`` (``state``, ``kind``,
        ``queue``, ``tenant``, ``before_id``, ``floor_id``, ``limit``). ``states_only``: rows
        of ``id`` and ``state`` only (a bulk selection, its preview). App.search."""
        if mode not in MODES:
            raise ValueError(f"unknown search mode {mode!r}")
        tx.run("search_plan_per_call", {})
        return tx.all(f"search_{mode}_states" if states_only else f"search_{mode}", params)
