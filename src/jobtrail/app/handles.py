"""Task handles: what ``@app.task(...)`` returns. Still the handler (calling it
calls the function, for tests), plus ``.kind`` and the kind's own ``enqueue``,
``enqueue_many``, ``aenqueue`` and ``aenqueue_many``. Generic in the payload type, so mypy
checks ``handle.enqueue(Note(...))`` against the handler's annotation."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, Unpack

from ..model.enqueue_options import NAMES, EnqueueOptions, spelled_out

if TYPE_CHECKING:
    from ..model.models import Task

P = TypeVar("P")


class _Enqueues(Protocol):
    """The part of ``App`` a handle uses (the facade, one floor up, is never imported)."""

    def enqueue(
        self,
        kind: str,
        payload: Any = ...,
        *,
        connection: Any = ...,
        **options: Unpack[EnqueueOptions],
    ) -> Task: ...

    def enqueue_many(self, items: Iterable[Any], *, connection: Any = ...) -> list[Task]: ...

    async def aenqueue(
        self,
        kind: str,
        payload: Any = ...,
        *,
        connection: Any = ...,
        **options: Unpack[EnqueueOptions],
    ) -> Task: ...

    async def aenqueue_many(self, items: Iterable[Any], *, connection: Any = ...) -> list[Task]: ...


class TaskHandle(Generic[P]):
    """A registered task kind. ``handle(ctx, payload)`` runs the handler itself;
    ``handle.enqueue(payload, **options)`` is ``app.enqueue(handle.kind, payload, **options)``
    with the options of ``app.enqueue`` (``EnqueueOptions``, and ``connection``)."""

    def __init__(self, app: _Enqueues, kind: str, fn: Callable[..., Any]) -> None:
        self._app = app
        self.kind = kind
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, ctx: Any, payload: P, /) -> Any:
        return self.fn(ctx, payload)

    def __repr__(self) -> str:
        return f"<TaskHandle {self.kind!r} of {getattr(self.fn, '__qualname__', self.fn)!r}>"

    @spelled_out
    def enqueue(
        self,
        payload: P | None = None,
        *,
        connection: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> Task:
        """Store one task of this kind (``App.enqueue``)."""
        return self._app.enqueue(self.kind, payload, connection=connection, **options)

    @spelled_out
    def enqueue_many(
        self,
        payloads: Iterable[P],
        *,
        connection: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> list[Task]:
        """Store one task of this kind per payload, all or nothing (``App.enqueue_many``);
        ``options`` (those of ``enqueue``) apply to every one."""
        return self._app.enqueue_many(self._items(payloads, options), connection=connection)

    @spelled_out
    async def aenqueue(
        self,
        payload: P | None = None,
        *,
        connection: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> Task:
        """``enqueue`` without blocking the event loop (``App.aenqueue``)."""
        return await self._app.aenqueue(self.kind, payload, connection=connection, **options)

    @spelled_out
    async def aenqueue_many(
        self,
        payloads: Iterable[P],
        *,
        connection: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> list[Task]:
        """``enqueue_many`` without blocking the event loop (``App.aenqueue_many``)."""
        return await self._app.aenqueue_many(self._items(payloads, options), connection=connection)

    def _items(self, payloads: Iterable[P], options: EnqueueOptions) -> list[dict[str, Any]]:
        unknown = sorted(set(options) - set(NAMES))
        if unknown:
            raise TypeError(f"unknown enqueue options {unknown}; they are: {', '.join(NAMES)}")
        return [{"kind": self.kind, "payload": p, **options} for p in payloads]
