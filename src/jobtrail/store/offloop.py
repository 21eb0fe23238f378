"""The async API on a driver without async connections (SQLite): each call runs on one of the
driver's own threads, so the event loop is never blocked by the database (only by the Python
work of the call's first and last microseconds, and by the GIL while that thread runs Python)."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

#: Threads per driver for the async API: SQLite serialises writers anyway; a few let reads
#: overlap a write (WAL).
THREADS = 4


class OffLoop:
    """``run_async`` on a small thread pool of the driver's own, opened on first use."""

    _offloop: ThreadPoolExecutor | None = None
    _offloop_lock = threading.Lock()

    async def run_async(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        if self._offloop is None:
            with self._offloop_lock:
                if self._offloop is None:
                    self._offloop = ThreadPoolExecutor(THREADS, "jobtrail-async")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._offloop, functools.partial(fn, *args, **kwargs))

    def close_offloop(self) -> None:
        pool, self._offloop = self._offloop, None
        if pool is not None:
            pool.shutdown(wait=True)
