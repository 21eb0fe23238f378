"""Task handles (SPEC §16.2): what ``@app.task(...)`` returns. Still the handler (calling it
calls the function, for tests), plus ``.kind`` and the kind's own ``enqueue``,
``enqueue_many``, ``aenqueue`` and ``aenqueue_many``. Generic in the payload type, so mypy
checks ``handle.enqueue(Note(...))`` against the handler's annotation."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from ..model.models import Task

P = TypeVar("P")

#: What ``handle.enqueue(..., **options)`` passes on to ``App.enqueue`` by name.
OPTIONS = (
    "idempotency_key",
    "tenant",
    "queue",
    "priority",
    "run_at",
    "delay",
    "max_attempts",
    "parent",
)


class _Enqueues(Protocol):
    """The part of ``App`` a handle uses (the facade, one floor up, is never imported)."""

    def enqueue(self, kind: str, payload: Any = ..., **options: Any) -> Task: ...

    def enqueue_many(self, items: Iterable[Any], *, connection: Any = ...) -> list[Task]: ...

    async def aenqueue(self, kind: str, payload: Any = ..., **options: Any) -> Task: ...

    async def aenqueue_many(self, items: Iterable[Any], *, connection: Any = ...) -> list[Task]: ...


class TaskHandle(Generic[P]):
    """A registered task kind. ``handle(ctx, payload)`` runs the handler itself;
    ``handle.enqueue(payload, **options)`` is ``app.enqueue(handle.kind, payload, **options)``
    with the options of ``app.enqueue`` (``idempotency_key``, ``tenant``, ``queue``,
    ``priority``, ``run_at``, ``delay``, ``max_attempts``, ``parent``, ``connection``)."""

    def __init__(self, app: _Enqueues, kind: str, fn: Callable[..., Any]) -> None:
        self._app = app
        self.kind = kind
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, ctx: Any, payload: P, /) -> Any:
        return self.fn(ctx, payload)

    def __repr__(self) -> str:
        return f"<TaskHandle {self.kind!r} of {getattr(self.fn, '__qualname__', self.fn)!r}>"

    def enqueue(
        self,
        payload: P | None = None,
        *,
        idempotency_key: str | None = None,
        tenant: str = "",
        queue: str | None = None,
        priority: int = 0,
        run_at: datetime | str | None = None,
        delay: float | None = None,
        max_attempts: int | None = None,
        parent: str | None = None,
        connection: Any = None,
    ) -> Task:
        """Store one task of this kind (``App.enqueue``)."""
        return self._app.enqueue(
            self.kind,
            payload,
            idempotency_key=idempotency_key,
            tenant=tenant,
            queue=queue,
            priority=priority,
            run_at=run_at,
            delay=delay,
            max_attempts=max_attempts,
            parent=parent,
            connection=connection,
        )

    def enqueue_many(
        self, payloads: Iterable[P], *, connection: Any = None, **options: Any
    ) -> list[Task]:
        """Store one task of this kind per payload, all or nothing (``App.enqueue_many``);
        ``options`` (those of ``enqueue``) apply to every one."""
        return self._app.enqueue_many(self._items(payloads, options), connection=connection)

    async def aenqueue(
        self,
        payload: P | None = None,
        *,
        idempotency_key: str | None = None,
        tenant: str = "",
        queue: str | None = None,
        priority: int = 0,
        run_at: datetime | str | None = None,
        delay: float | None = None,
        max_attempts: int | None = None,
        parent: str | None = None,
        connection: Any = None,
    ) -> Task:
        """``enqueue`` without blocking the event loop (``App.aenqueue``)."""
        return await self._app.aenqueue(
            self.kind,
            payload,
            idempotency_key=idempotency_key,
            tenant=tenant,
            queue=queue,
            priority=priority,
            run_at=run_at,
            delay=delay,
            max_attempts=max_attempts,
            parent=parent,
            connection=connection,
        )

    async def aenqueue_many(
        self, payloads: Iterable[P], *, connection: Any = None, **options: Any
    ) -> list[Task]:
        """``enqueue_many`` without blocking the event loop (``App.aenqueue_many``)."""
        return await self._app.aenqueue_many(self._items(payloads, options), connection=connection)

    def _items(self, payloads: Iterable[P], options: dict[str, Any]) -> list[dict[str, Any]]:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"unknown enqueue options {unknown}; they are: {', '.join(OPTIONS)}")
        return [{"kind": self.kind, "payload": p, **options} for p in payloads]
