"""Search for people on call (the dashboard's search box and its bulk selections): tasks by a
payload field, error text, idempotency key, tenant or id, within the task list's filters; the
states of a bounded selection (its preview before a bulk action); and what replaying chosen
dead tasks would do to their effects. Held by ``App``.

A payload field is found through an index on PostgreSQL (the whole store); SQLite, which has
none for it, and error text on either backend are a scan bounded to the newest ``SCAN`` tasks,
and every answer says whether it was bounded.
"""

from __future__ import annotations

import builtins
import json
from collections import Counter
from typing import Any

from ..core import replays
from ..model import search as terms
from ..model import validate
from ..model.errors import TaskNotFound
from ..model.machine import State
from ..model.models import Task, task_from_row
from .core import Part

#: the newest tasks a search without an index reads (payload fields on SQLite, error text)
SCAN = 100_000
#: the most tasks one bulk selection ("all matching the filter") holds
SELECTION_MAX = 10_000


class Search(Part):
    def _plan(
        self,
        tx: Any,
        term: terms.Term | None,
        filters: dict[str, Any],
        limit: int,
        before: str | None,
    ) -> tuple[str, dict[str, Any], int | None]:
        """The search mode, its parameters and the scan's bound (``None``: not bounded)."""
        for name in ("state", "kind", "queue", "tenant"):
            validate.filter_text(filters.get(name), name)
        state = filters.get("state")
        if state is not None and state not in {s.value for s in State}:
            raise ValueError(f"unknown state {state!r}")
        validate.integer(limit, "limit", 1, SELECTION_MAX + 1)
        params: dict[str, Any] = {
            "state": state,
            "kind": filters.get("kind"),
            "queue": filters.get("queue"),
            "tenant": filters.get("tenant"),
            "before_id": self._core._parse_id(before) if before is not None else None,
            "floor_id": None,
            "limit": limit,
        }
        mode, bounded = "filter", False
        if term is not None and term.field == "tenant":
            if params["tenant"] is not None and params["tenant"] != term.value:
                params["floor_id"] = 2**62  # another tenant than the caller's: nothing
            params["tenant"] = term.value
        elif term is not None and term.field == "payload":
            mode = "payload"
            if self._driver.dialect == "postgres":
                params["doc"] = json.dumps(term.document())
            else:
                params["path"] = term.json_path()
                params["jtype"] = terms.json_type(term.value)
                params["value"] = term.value
                bounded = True
        elif term is not None and term.field == "error":
            mode, bounded = "error", True
            escaped = term.value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            params["pattern"] = f"%{escaped}%"
        elif term is not None and term.field == "key":
            mode = "key"
            params["key"] = term.value
        floor = None
        if bounded:
            floor = max(0, self._driver.search_top_id(tx) - SCAN)
            params["floor_id"] = floor
        return mode, params, floor

    def search(
        self,
        query: str,
        *,
        state: str | None = None,
        kind: str | None = None,
        queue: str | None = None,
        tenant: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> dict[str, Any]:
        """Tasks newest first matching ``query`` (see ``jobtrail.model.search``) and the
        filters: ``{"tasks": [...], "term": Term | None, "scanned_from": id | None}``;
        ``scanned_from`` is set when the search read only tasks newer than that id."""
        term = terms.parse(query)
        filters = {"state": state, "kind": kind, "queue": queue, "tenant": tenant}
        if term is not None and term.field in ("id", "text"):
            return {"tasks": self._by_id_or_key(term, filters), "term": term, "scanned_from": None}
        with self._driver.transaction(write=False) as tx:
            mode, params, floor = self._plan(tx, term, filters, limit, before)
            rows = self._driver.search_tasks(tx, mode, params)
        return {"tasks": [task_from_row(r) for r in rows], "term": term, "scanned_from": floor}

    def _by_id_or_key(self, term: terms.Term, filters: dict[str, Any]) -> builtins.list[Task]:
        found: builtins.list[Task] = []
        text = str(term.value)
        if text.isdigit() and len(text) <= 18:
            try:
                found.append(self._core_get(text))
            except TaskNotFound:
                pass
        if term.field == "text":
            with self._driver.transaction(write=False) as tx:
                _, params, _ = self._plan(tx, terms.Term("key", text), filters, 50, None)
                found += [task_from_row(r) for r in self._driver.search_tasks(tx, "key", params)]
        return [
            t
            for t in found
            if all(
                filters.get(name) in (None, getattr(t, name) if name != "state" else t.state.value)
                for name in ("state", "kind", "queue", "tenant")
            )
        ]

    def _core_get(self, task_id: str) -> Task:
        with self._driver.transaction(write=False) as tx:
            return task_from_row(self._core._row(tx, task_id))

    def search_states(
        self,
        query: str,
        *,
        state: str | None = None,
        kind: str | None = None,
        queue: str | None = None,
        tenant: str | None = None,
        cap: int = SELECTION_MAX,
    ) -> dict[str, Any]:
        """The selection "all matching" would act on: ``ids`` (newest first, at most ``cap``),
        ``states`` (how many in each state), ``more`` (true when more than ``cap`` match)
        and ``scanned_from`` (as ``search``)."""
        validate.integer(cap, "cap", 1, SELECTION_MAX)
        term = terms.parse(query)
        filters = {"state": state, "kind": kind, "queue": queue, "tenant": tenant}
        if term is not None and term.field in ("id", "text"):
            tasks = self._by_id_or_key(term, filters)
            pairs = [(t.id, t.state.value) for t in tasks]
            floor = None
        else:
            with self._driver.transaction(write=False) as tx:
                mode, params, floor = self._plan(tx, term, filters, cap + 1, None)
                rows = self._driver.search_tasks(tx, mode, params, states_only=True)
            pairs = [(str(r["id"]), str(r["state"])) for r in rows]
        chosen = pairs[:cap]
        return {
            "ids": [i for i, _ in chosen],
            "states": dict(Counter(s for _, s in chosen).most_common()),
            "more": len(pairs) > cap,
            "scanned_from": floor,
        }

    def replay_effects(self, task_ids: builtins.list[str]) -> dict[str, Any]:
        """What replaying the dead tasks among ``task_ids`` would do to their effects (as
        ``dead_preview``): ``tasks`` (the dead ones), ``effects`` (per id ``again``/``skip``)
        and ``not_dead`` (the ids that are not dead: a replay leaves them alone)."""
        ids = [self._core._parse_id(i) for i in task_ids]
        with self._driver.transaction(write=False) as tx:
            rows = {r["id"]: r for r in self._driver.view_tasks_by_ids(tx, ids=json.dumps(ids))}
            dead = [i for i in ids if i in rows and rows[i]["state"] == State.DEAD]
            recorded = self._driver.effect_list_for_tasks(tx, ids=json.dumps(dead)) if dead else []
        split = replays.split_effects(recorded)
        tasks = [task_from_row(rows[i]) for i in dead]
        return {
            "tasks": tasks,
            "effects": {t.id: split.get(t.id, {"again": [], "skip": []}) for t in tasks},
            "not_dead": [str(i) for i in ids if i not in dead],
        }
