"""Running the synchronous store code over an asynchronous driver, without a thread.

The async API (``App.aenqueue`` and the others) reuses the very code of the sync methods (the
validation, the one transition path, the driver's named statements) instead of a second copy
of it. ``run_bridged`` runs that code in a greenlet; when it reaches a round trip to the
database, the driver (PostgreSQL's async connections, ``postgres/aio.py``) hands the awaitable
to ``await_``, which switches back to the caller's coroutine; the coroutine awaits it on the
event loop and switches back in with the result. So the event loop runs other tasks while the
query is in flight, and only the CPU work between round trips runs on it (SQLAlchemy's asyncio
support works the same way). No thread is started and none is handed the call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import greenlet

T = TypeVar("T")


class _Bridged(greenlet.greenlet):  # type: ignore[misc]
    """The greenlet of one bridged call; ``in_bridge`` recognises it."""


def in_bridge() -> bool:
    """Whether the running code is a bridged call (its driver must await, not block)."""
    return isinstance(greenlet.getcurrent(), _Bridged)


def await_(awaitable: Awaitable[T]) -> T:
    """The result of ``awaitable``, awaited by the coroutine that started this bridged call
    (the greenlet waits, the event loop does not)."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Bridged):
        raise RuntimeError("await_() outside a bridged call (jobtrail.store.bridge)")
    result: T = current.parent.switch(awaitable)
    return result


async def run_bridged(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` with every ``await_`` inside it awaited here, on the loop."""
    runner = _Bridged(fn)
    request = runner.switch(*args, **kwargs)
    while not runner.dead:
        try:
            value = await request
        except BaseException as exc:  # noqa: BLE001 - raised where the code awaited it
            request = runner.throw(exc)
        else:
            request = runner.switch(value)
    result: T = request
    return result
