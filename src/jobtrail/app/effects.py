"""The parts of ``App`` for work that touches the outside world (docs/reliability.md): receipts, the
outbox and its sinks, and workflows of parent and child tasks. Held by ``App``."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ..core import payloads, transition, workflow
from ..core.decide import decide_receipt_outcome
from ..model import validate
from ..model.errors import IdempotencyConflict, IllegalTransition, TaskNotFound
from ..model.machine import Reason, State
from ..model.models import Task, task_from_row
from ..services.outbox import dispatch, http_sink
from ..services.receipts import apply_outcome
from ..store.base import NewTask
from .connections import dbapi_connection
from .core import Part, _require_text

S = TypeVar("S", bound=Callable[..., Any])


class Effects(Part):
    """The outbox and its sinks, receipts, workflows of parent and child tasks."""

    # -- outbox ----------------------------------------------------------------------------------
    def sink(self, topic: str) -> Callable[[S], S]:
        """Register an in-process consumer ``fn(message_id, topic, payload)`` of a topic
        (``"*"`` for every topic). Delivery is at least once: dedup by ``message_id``."""

        def register(fn: S) -> S:
            self._core._sinks.setdefault(topic, []).append(fn)
            return fn

        return register

    def http_sink(self, topic: str, url: str, *, timeout: float = 10.0) -> None:
        """Deliver a topic's messages by HTTP POST (JSON; ``Idempotency-Key`` = message id)."""
        self._core._sinks.setdefault(topic, []).append(http_sink(url, timeout=timeout))

    def outbox(self, task_id: str | int) -> builtins.list[dict[str, Any]]:
        """The task's outbox messages: ``id``, ``topic``, ``payload``, ``state``
        (``pending`` — still delivering — or ``delivered``), ``attempts``, ``delivered_at``."""
        with self._driver.transaction(write=False) as tx:
            row = self._core._row(tx, task_id)
            rows = self._driver.outbox_list(tx, id=row["id"])
        return [
            {
                "id": r["id"],
                "topic": r["topic"],
                "payload": r["payload"],
                "state": r["state"],
                "attempts": r["attempts"],
                "delivered_at": r["delivered_at"],
                "last_error": r["last_error"],
            }
            for r in rows
        ]

    def dispatch_outbox(self, *, limit: int = 100) -> int:
        """Deliver due outbox messages now (workers also do this); returns how many."""
        return dispatch(self._driver, self._core._sinks, limit=limit)

    # -- receipts --------------------------------------------------------------------------------
    def confirm_receipt(
        self,
        task_id: str | int | None = None,
        *,
        receipt_id: str | None = None,
        kind: str | None = None,
        ok: bool = True,
        category: str | None = None,
        error: str | None = None,
        by: str = "caller",
        note: str | None = None,
        tenant: str | None = None,
    ) -> Task:
        """The outcome of a submission (edges 10, 11), by task id or by receipt id:
        ``ok=True`` → ``succeeded``; ``ok=False`` → classified like a handler's error
        (``queued`` for a retry, or ``dead``). A repeat of a confirmation that already
        happened returns the task unchanged. Receipt ids are unique per kind: pass ``kind``
        when two kinds' providers could hand out the same id.

        ``tenant`` keeps the confirmation within one tenant (docs/security.md): a task of another
        tenant is ``TaskNotFound``, as an unknown one is, and nothing moves. Whoever acts for a
        tenant passes it — a webhook source's event task passes its own; ``None`` is the
        application's own call, which may settle the receipt of a task of any tenant."""
        if (task_id is None) == (receipt_id is None):
            raise ValueError("give task_id or receipt_id (exactly one)")
        if not isinstance(ok, bool):
            raise TypeError("ok must be True or False")
        if tenant is not None and not isinstance(tenant, str):
            raise TypeError("tenant must be a string (or None for any tenant)")
        # the same refusal on both backends, before anything is read (PostgreSQL answered a
        # NUL with its own DataError; SQLite looked the NUL up, or kept it in the error)
        given = None if receipt_id is None else str(receipt_id)
        for name, value in (("receipt_id", given), ("kind", kind), ("tenant", tenant)):
            validate.filter_text(value, name, max_length=255 if name == "tenant" else 1024)
        validate.filter_text(category, "category", max_length=64)
        validate.filter_text(error, "error", max_length=validate.MAX_NOTE)
        _require_text(by, "by")
        if note is not None:
            validate.filter_text(note, "note", max_length=validate.MAX_NOTE)
        with self._driver.transaction() as tx:
            if receipt_id is not None:
                found = self._driver.task_by_receipt(
                    tx, receipt_id=str(receipt_id), kind=kind, tenant=tenant
                )
                if not found:
                    raise TaskNotFound(f"receipt {receipt_id}")
                awaiting = [f for f in found if f["state"] == State.AWAITING_RECEIPT]
                if len(awaiting) > 1:
                    raise ValueError(
                        f"receipt {receipt_id!r} is awaited by several tasks (of different "
                        "kinds or tenants); pass kind=, tenant= or the task id"
                    )
                task_id = found[0]["id"]
            assert task_id is not None
            row = self._core._row(tx, task_id)
            if tenant is not None and row["tenant"] != tenant:
                raise TaskNotFound(str(task_id))  # never say that it exists
            state = State(row["state"])
            if state is not State.AWAITING_RECEIPT:
                if ok and row["last_reason"] == Reason.RECEIPT_CONFIRMED:
                    return task_from_row(row)
                raise IllegalTransition(str(row["id"]), state, "confirm a receipt")
            decision = decide_receipt_outcome(
                ok,
                category=category,
                error=error,
                spec=self._core._kinds.get(row["kind"]),
                attempts=row["attempts"],
                max_attempts=row["max_attempts"],
            )
            if apply_outcome(self._driver, tx, row, decision, by, note) is None:
                raise IllegalTransition(str(row["id"]), state, "confirm a receipt")
            if decision.to_state is State.QUEUED:
                self._driver.notify_queued(tx, row["queue"])
            done = task_from_row(self._core._row(tx, row["id"]))
        if done.state.terminal:
            self._core._report_ended([row["id"]])
        return done

    # -- workflows -------------------------------------------------------------------------------
    def enqueue_workflow(
        self,
        kind: str,
        children: Sequence[Any],
        *,
        sequential: bool = False,
        payload: Any = None,
        idempotency_key: str | None = None,
        tenant: str = "",
        queue: str | None = None,
        priority: int = 0,
        connection: Any = None,
    ) -> Task:
        """A parent in ``waiting`` (its kind is a label) and one child task per item:
        ``(kind, payload)`` or a dict of ``enqueue`` arguments. With ``sequential`` each child
        becomes due only when the one before it succeeded. The parent's state follows the
        fixed rule of a workflow (docs/state_machine.md: it waits while a child is unfinished),
        re-derived in the same transaction as every child transition."""
        if isinstance(children, str | bytes) or not isinstance(children, Sequence) or not children:
            raise ValueError("a workflow needs a non-empty list of children")
        parent = self._core._new_task(
            dict(
                kind=kind,
                payload=payload,
                idempotency_key=idempotency_key,
                tenant=tenant,
                queue=queue,
                priority=priority,
            ),
            label=True,
        )
        parent = _with_state(parent, State.WAITING)
        # the key names the whole workflow: changed children are a changed intent too
        _, shape = payloads.encode(
            {
                "payload": payload,
                "sequential": bool(sequential),
                "children": [_child_shape(c) for c in children],
            },
            1 << 30,
        )
        parent = replace(parent, payload_hash=shape)
        items = []
        for i, child in enumerate(children):
            if isinstance(child, Mapping):
                args = dict(child)
            elif isinstance(child, tuple | builtins.list) and len(child) == 2:
                args = {"kind": child[0], "payload": child[1]}
            else:
                raise TypeError(f"workflow child {i} must be (kind, payload) or a dict")
            if "parent" in args or ("run_at" in args and sequential):
                raise ValueError(f"workflow child {i}: parent/run_at are set by the workflow")
            args.setdefault("tenant", tenant)
            if sequential and i > 0:
                args["run_at"] = workflow.NOT_YET
            try:
                items.append(self._core._new_task(args))
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"workflow child {i}: {exc}") from exc
        with self._driver.transaction(connection=dbapi_connection(connection)) as tx:
            row, created = transition.create(self._driver, tx, parent)
            if not created:
                if row["payload_hash"] != parent.payload_hash:
                    raise IdempotencyConflict(str(row["id"]), idempotency_key or "")
                return task_from_row(row)
            previous = None
            for item in items:
                child, _ = transition.create(self._driver, tx, _with_parent(item, row["id"]))
                if sequential and previous is not None:
                    self._driver.task_set_after(tx, id=child["id"], after_id=previous)
                previous = child["id"]
                self._driver.notify_queued(tx, item.queue)
        if connection is None:
            self._driver.wake()
        return task_from_row(row, created=True)

    def children(self, task_id: str | int) -> builtins.list[Task]:
        """A workflow parent's children, in order."""
        with self._driver.transaction(write=False) as tx:
            row = self._core._row(tx, task_id)
            ids = [c["id"] for c in self._driver.children_list(tx, id=row["id"])]
            return [task_from_row(self._core._row(tx, i)) for i in ids]


def _child_shape(child: Any) -> Any:
    if isinstance(child, Mapping):
        return {k: child[k] for k in sorted(child) if k in ("kind", "payload", "queue")}
    if isinstance(child, tuple | builtins.list) and len(child) == 2:
        return {"kind": child[0], "payload": child[1]}
    return repr(child)


def _with_state(new: NewTask, state: State) -> NewTask:
    from dataclasses import replace

    return replace(new, state=state, max_attempts=1)


def _with_parent(new: NewTask, parent_id: int) -> NewTask:
    from dataclasses import replace

    return replace(new, parent_id=parent_id)
