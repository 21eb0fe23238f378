"""Enqueue and bulk enqueue (edge 1): ``App.enqueue`` and ``App.enqueue_many``. The arguments
become a ``NewTask`` through ``Core._new_task`` (core.py); a task of its own goes in alone
(``transition.create_alone``: one statement on PostgreSQL), plain bulk items in pipelined
batches, anything with a key or a parent through the checked insert."""

from __future__ import annotations

import builtins
import gc
import itertools
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Unpack

from ..core import payloads, tracing, transition
from ..model import controls
from ..model.enqueue_options import ITEM_KEYS, EnqueueOptions, refuse_unknown, spelled_out
from ..model.errors import IdempotencyConflict, UnknownKind
from ..model.models import Task, task_from_fields, task_from_row
from ..store.base import NEW_TASK_DEFAULTS, NewTask
from .connections import dbapi_connection
from .core import Part

_KIND_AND_PAYLOAD = frozenset({"kind", "payload"})
#: The options that make a task with controls (never a plain bulk insert)
_CONTROLS = frozenset(controls.NAMES)


class Enqueue(Part):
    """Enqueue and bulk enqueue: ``App.enqueue`` and ``App.enqueue_many``."""

    @spelled_out
    def enqueue(
        self,
        kind: str,
        payload: Any = None,
        *,
        connection: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> Task:
        """Store one task (edge 1) with the ``options`` of ``EnqueueOptions``
        (model/enqueue_options.py, their defaults in ``DEFAULTS``). With ``idempotency_key`` a
        repeat returns the existing task (``created`` False); a changed payload raises
        ``IdempotencyConflict``. With ``connection=`` the task is written in the caller's open
        transaction and exists if and only if the caller commits (a ``sqlite3``/psycopg
        connection, or a SQLAlchemy 2 ``Connection`` or ``Session`` on one)."""
        refuse_unknown(options, "enqueue")
        connection = dbapi_connection(connection)
        wait = _wait_for_disk(options.get("wait_for_disk", True), connection, "enqueue")
        new = self._core._new_task({"kind": kind, "payload": payload, **options})
        with tracing.send(new.queue) as span:
            if span is not None:
                _traced(new)
            if connection is None and new.parent_id is None and new.controls is None:
                # its own transaction: one statement on PostgreSQL (insert, log, wake-up)
                row, created = transition.create_alone(self._driver, new, wait_for_disk=wait)
                if not created and row["payload_hash"] != new.payload_hash:
                    raise IdempotencyConflict(str(row["id"]), new.idempotency_key or "")
                task = task_from_row(row, created=created)
            else:
                with self._driver.transaction(connection=connection) as tx:
                    if not wait:
                        self._driver.skip_flush_wait(tx)
                    task = self._core._insert(tx, new)
                if connection is None and task.debounced:
                    self._driver.wake()  # its run time moved (a worker may wait for it)
            tracing.sent(span, task.id, task.kind)
        if connection is None and task.created:
            self._driver.wake()
        return task

    def enqueue_many(
        self, items: Iterable[Mapping[str, Any]], *, connection: Any = None
    ) -> list[Task]:
        """Store several tasks in one transaction: all or nothing. Each item is a dict of
        ``enqueue``'s keyword arguments (``{"kind": ..., "payload": ...}``)."""
        connection = dbapi_connection(connection)
        items = items if isinstance(items, builtins.list) else builtins.list(items)
        if not items:
            return []
        wait, items = _items_wait_for_disk(items, connection)
        with tracing.send(self._first_queue(items[0]), count=len(items)) as span:
            if all(
                type(item) is dict
                and item.get("idempotency_key") is None
                and item.get("parent") is None
                and (len(item) <= 2 or _CONTROLS.isdisjoint(item))
                for item in items
            ):
                with _collector_paused():
                    tasks = self._insert_plain(
                        items, connection, traced=span is not None, wait=wait
                    )
            else:
                news = [self._item_task(i, item) for i, item in enumerate(items)]
                with self._driver.transaction(connection=connection) as tx:
                    if not wait:
                        self._driver.skip_flush_wait(tx)
                    tasks = [self._core._insert(tx, _traced(n) if span else n) for n in news]
            tracing.sent(span, tasks[0].id, tasks[0].kind)
        if connection is None and any(t.created for t in tasks):
            self._driver.wake()
        return tasks

    def _item_task(self, i: int, item: Any) -> NewTask:
        """``_new_task`` for item ``i`` of ``enqueue_many``, errors naming the item."""
        if not isinstance(item, Mapping):
            raise TypeError(f"enqueue_many item {i} is a {type(item).__name__}, not a dict")
        if not ITEM_KEYS.issuperset(item):
            unknown = set(item) - ITEM_KEYS
            raise TypeError(f"enqueue_many item {i} has unknown keys: {sorted(unknown)}")
        if "kind" not in item:
            raise TypeError(f"enqueue_many item {i} has no 'kind'")
        try:
            # _new_task only reads its argument: a plain dict need not be copied
            return self._core._new_task(item if type(item) is dict else dict(item))
        except (TypeError, ValueError, UnknownKind) as exc:
            raise _naming_item(exc, i) from exc

    def _first_queue(self, item: Any) -> str:
        """The queue the first item of ``enqueue_many`` names (its span's name)."""
        if isinstance(item, Mapping):
            queue = item.get("queue")
            if isinstance(queue, str) and queue:
                return queue
            spec = self._core._kinds.get(item.get("kind"))  # type: ignore[arg-type]
            if spec is not None:
                return spec.queue
        return self._core.default_queue

    def _insert_plain(
        self,
        items: builtins.list[Any],
        connection: Any,
        *,
        traced: bool = False,
        wait: bool = True,
    ) -> builtins.list[Task]:
        """Items without idempotency keys or parents: nothing can conflict and no parent needs
        checking, so they go in batches (``Driver.task_insert_batches``: pipelined statements
        on PostgreSQL, so the database inserts one batch while the next is validated). The first
        batch is validated before the transaction opens; an error in a later one rolls back."""
        news: builtins.list[NewTask] = []
        size = self._driver.insert_batch
        # the usual bulk item holds only a kind and a payload: everything else is what the
        # kind alone makes, checked once per kind (an error still names the item)
        alone: dict[str, NewTask] = {}

        def typed_kind(kind: str) -> bool:
            spec = self._core._kinds.get(kind)
            return spec is not None and spec.payload_type is not None

        def one(i: int, item: Any) -> NewTask:
            kind = item.get("kind") if type(item) is dict else None
            if type(kind) is not str or not _KIND_AND_PAYLOAD.issuperset(item) or typed_kind(kind):
                return self._item_task(i, item)  # typed payloads are checked by _new_task
            base = alone.get(kind)
            if base is None:
                base = alone[kind] = self._item_task(i, {"kind": kind})
                if traced:
                    _traced(base)  # with_payload copies it to each item of the kind
            try:
                text, digest = payloads.encode(item.get("payload"), self._core.max_payload_bytes)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"enqueue_many item {i}: {exc}") from exc
            return base.with_payload(text, digest)

        def batches() -> Iterator[builtins.list[NewTask]]:
            for lo in range(0, len(items), size):
                batch = [one(i, items[i]) for i in range(lo, min(lo + size, len(items)))]
                if traced:
                    batch = [_traced(n) for n in batch]
                news.extend(batch)
                yield batch

        stream = batches()
        first = next(stream)
        with self._driver.batch_transaction(connection=connection) as tx:
            if not wait:
                self._driver.skip_flush_wait(tx)
            tasks = transition.create_batches(
                self._driver, tx, itertools.chain([first], stream), _task_from_new
            )
            for queue in dict.fromkeys(n.queue for n in news):
                self._driver.notify_queued(tx, queue)
        return tasks


#: What every task just created holds in the fields its insert did not set (``_task_from_new``)
_NEW_TASK_FIELDS: dict[str, Any] = {
    **NEW_TASK_DEFAULTS,
    "dismissed": False,
    "created": True,
    "waiting_for": None,
    "debounced": False,
    "expires_at": None,
}


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while a bulk enqueue builds its tasks.
    Everything such a call allocates lives until it returns, so a collection every 700
    allocations only rescans it (16% of the client's time in a 1,000-task call), and the
    collections it counts bring on a full one every few calls (~10 ms); paused, the call
    leaves one young collection behind it. Left alone if something else paused it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _task_from_new(
    new: NewTask, task_id: int, created_at: datetime, run_at: datetime, payload: Any
) -> Task:
    """The task just stored for ``new`` (``Driver.task_insert_batches``' ``made``): the columns
    it inserted, the ones the database generated, the rest at their defaults (as
    ``store.base.inserted_row``, without a row in between). Built per task of a bulk enqueue:
    the fields are written into the new object's own dict, as ``task_from_fields`` does, with
    no dict built in between (0.8 instead of 1.3 µs)."""
    task = task_from_fields(_NEW_TASK_FIELDS)
    fields = task.__dict__
    fields["id"] = str(task_id)
    fields["kind"] = new.kind
    fields["queue"] = new.queue
    fields["tenant"] = new.tenant
    fields["state"] = new.state
    fields["payload"] = payload
    fields["priority"] = new.priority
    fields["max_attempts"] = new.max_attempts
    fields["run_at"] = run_at
    fields["parent_id"] = None if new.parent_id is None else str(new.parent_id)
    fields["created_at"] = fields["updated_at"] = created_at
    fields["idempotency_key"] = new.idempotency_key
    fields["steps"] = {}
    return task


def _traced(new: NewTask) -> NewTask:
    """``new`` carrying the current span's context (``tracing.carrier``) in the data of its
    creating transition: stored in the insert itself."""
    headers = tracing.carrier()
    if headers is not None and new.data.get(tracing.KEY) != headers:
        new.data = {**new.data, tracing.KEY: headers}
    return new


def _naming_item(exc: Exception, i: int) -> Exception:
    """``exc`` with its message led by the index of the ``enqueue_many`` item it is about: the
    same class and attributes, made without its constructor (``UnknownKind`` takes the kind,
    not a message: called with the message it named the message as the kind)."""
    named = type(exc).__new__(type(exc))
    named.__dict__.update(exc.__dict__)
    named.args = (f"enqueue_many item {i}: {exc}",)
    return named


def _wait_for_disk(value: object, connection: Any, where: str) -> bool:
    """``wait_for_disk`` checked: a bool, and False only in a transaction of jobtrail's own
    (a caller's commit is the caller's: its other writes would lose their flush too)."""
    if type(value) is not bool:
        raise TypeError(f"{where}: wait_for_disk must be True or False")
    if not value and connection is not None:
        raise ValueError(
            f"{where}: wait_for_disk=False is for jobtrail's own transaction; with"
            " connection= the commit is yours (SET LOCAL synchronous_commit = off in it)"
        )
    return value


def _items_wait_for_disk(
    items: builtins.list[Any], connection: Any
) -> tuple[bool, builtins.list[Any]]:
    """Whether ``enqueue_many``'s one commit waits for the disk (unless every item says
    ``wait_for_disk=False``), and the items without that key (so plain items stay plain)."""
    said = [
        _wait_for_disk(item["wait_for_disk"], connection, f"enqueue_many item {i}")
        for i, item in enumerate(items)
        if isinstance(item, Mapping) and "wait_for_disk" in item
    ]
    if not said:
        return True, items
    wait = len(said) < len(items) or any(said)
    plain = [
        {k: v for k, v in item.items() if k != "wait_for_disk"}
        if isinstance(item, Mapping)
        else item
        for item in items
    ]
    return wait, plain
