"""The plain reads of a task: ``get``, ``result`` (waiting on the store's wake-ups when given a
``timeout``), ``list``, ``transitions`` and ``explain`` (the live facts from ``ops.py``)."""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

from ..core.explain_facts import Facts
from ..model import validate
from ..model.errors import TaskFailed, TaskNotFound
from ..model.machine import TERMINAL, State
from ..model.models import Task, Transition, task_from_row
from ..store.base import Row, Tx
from .connections import dbapi_connection
from .core import RESULT_POLL, Core, Part, _unfinished

#: ``Ops.live_facts``: the live facts of a task's row (a paused queue, a full limit, …)
LiveFacts = Callable[[Tx, Row, str], Facts]


class Reads(Part):
    """The plain reads of tasks, given ``facts`` (``Ops.live_facts``: why a task is not
    running now)."""

    def __init__(self, core: Core, facts: LiveFacts) -> None:
        super().__init__(core)
        self._facts = facts

    def get(self, task_id: str | int, *, connection: Any = None) -> Task:
        """The task's current snapshot; ``TaskNotFound`` for an unknown id. With
        ``connection=`` (as ``enqueue`` takes it) it is read in the caller's open transaction,
        which sees what that transaction wrote."""
        with self._driver.transaction(write=False, connection=dbapi_connection(connection)) as tx:
            row = self._core._row(tx, task_id)
            steps = {
                r["name"]: r["result"]
                for r in self._driver.step_list(tx, id=row["id"])
                if r["status"] == "confirmed"
            }
            return task_from_row(row, steps=steps)

    def result(self, task_id: str | int, *, timeout: float | None = None) -> Any:
        """The return value of a ``succeeded`` task (``None`` when its handler returned
        nothing). A ``dead`` or ``cancelled`` task raises ``TaskFailed`` (its state,
        reason, error category and error). A task not finished yet: with ``timeout`` seconds
        this waits for it to finish — woken by the store's own wake-ups (PostgreSQL
        ``LISTEN``, SQLite's data version), re-reading at least every second — and raises
        ``TimeoutError`` when it has not finished by then; without ``timeout`` it does not
        wait: ``TimeoutError`` at once, naming the task's state. ``TaskNotFound`` for an
        unknown id."""
        if timeout is not None:
            timeout = validate.seconds(timeout, "timeout")
        task = self._core._terminal_or_none(task_id)
        if task is None and timeout:
            deadline = time.monotonic() + timeout
            with self._driver.watch_finished() as wait:
                while True:
                    task = self._core._terminal_or_none(task_id)
                    left = deadline - time.monotonic()
                    if task is not None or left <= 0:
                        break
                    wait(min(left, RESULT_POLL))
        if task is None:
            raise _unfinished(task_id, self.get(task_id).state.value, timeout)
        if task.state is State.SUCCEEDED:
            return task.result
        raise TaskFailed(task)

    def watch_finished(self) -> AbstractContextManager[Callable[[float], bool]]:
        """The store's wake-up on tasks that finish, for a caller that waits for many tasks at
        once (the HTTP server's result waits, ``web/waits.py``): inside the ``with``,
        ``wait(seconds)`` returns ``True`` when something may have finished (PostgreSQL: one
        ``LISTEN`` connection for the whole watch; SQLite: the data version) and ``False``
        after ``seconds`` of nothing. A wake-up only: re-read what you wait for."""
        return self._driver.watch_finished()

    def finished_among(self, task_ids: Iterable[str]) -> set[str]:
        """Which of ``task_ids`` are finished (terminal) or unknown, read in one transaction
        on one connection: what a shared result waiter asks at each wake-up."""
        found: set[str] = set()
        with self._driver.transaction(write=False) as tx:
            for task_id in task_ids:
                try:
                    row = self._core._row(tx, task_id)
                except (TaskNotFound, ValueError):
                    found.add(task_id)  # the caller's own read then says what it is
                    continue
                if State(row["state"]) in TERMINAL:
                    found.add(task_id)
        return found

    def list(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        queue: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
        before: str | None = None,
    ) -> list[Task]:
        """Tasks, newest first, filtered by state, kind, queue and tenant."""
        for name, value in (("state", state), ("kind", kind), ("queue", queue), ("tenant", tenant)):
            validate.filter_text(value, name)
        if state is not None:
            try:
                State(state)
            except ValueError:
                raise ValueError(
                    f"unknown state {state!r}; states are: {', '.join(s.value for s in State)}"
                ) from None
        validate.integer(limit, "limit", 1, validate.MAX_LIMIT)
        before_id = self._core._parse_id(before) if before is not None else None
        with self._driver.transaction(write=False) as tx:
            rows = self._driver.task_list(
                tx,
                state=state,
                kind=kind,
                queue=queue,
                tenant=tenant,
                limit=limit,
                before_id=before_id,
            )
        return [task_from_row(r) for r in rows]

    def transitions(
        self, task_id: str | int, *, connection: Any = None
    ) -> builtins.list[Transition]:
        """The task's transition log, in order (``connection=`` as ``get`` takes it)."""
        with self._driver.transaction(write=False, connection=dbapi_connection(connection)) as tx:
            self._core._row(tx, task_id)
            rows = self._driver.transition_list(tx, self._core._parse_id(task_id))
        return [_transition_from_row(r) for r in rows]

    def explain(self, task_id: str | int, lang: str = "en") -> str:
        """How the task got here, and why it is not running now."""
        from ..core import explain

        if lang not in explain.LANGUAGES:
            raise ValueError(
                f"unknown language {lang!r}; use one of {', '.join(explain.LANGUAGES)}"
            )
        with self._driver.transaction(write=False) as tx:
            row = self._core._row(tx, task_id)
            rows = self._driver.transition_list(tx, row["id"])
            facts = self._facts(tx, row, lang)
            confirmed = self._driver.effect_confirmed_count(tx, id=row["id"])
        text = explain.render(
            task_from_row(row),
            [_transition_from_row(r) for r in rows],
            row["db_now"],
            lang=lang,
            extra=facts.why or None,
            effect_confirmed=bool(confirmed and confirmed["n"]),
        )
        return text + "".join("\n" + line for line in facts.details)


def _transition_from_row(row: Row) -> Transition:
    return Transition(
        seq=row["seq"],
        from_state=State(row["from_state"]) if row["from_state"] else None,
        to_state=State(row["to_state"]),
        reason=row["reason"],
        error_category=row["error_category"],
        error=row["error"],
        actor=row["actor"],
        attempt=row["attempt"],
        at=row["at"],
        note=row["note"],
        corrects=row["corrects"],
        data=row["data"] or {},
        traceback=row.get("traceback"),
        error_class=row.get("error_class"),
    )
