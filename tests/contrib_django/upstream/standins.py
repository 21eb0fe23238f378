"""jobtrail's stand-ins for the two backends Django's task tests configure: where those tests
name ``django.tasks.backends.dummy.DummyBackend`` or ``...immediate.ImmediateBackend`` (in
``TASKS`` settings, ``isinstance`` checks, ``override_settings`` inside a test), ``run.py``
makes the name mean these classes, so every enqueue, lookup, signal and log of the run goes
through ``JobtrailBackend`` on the database under test.

- ``Recording`` (for ``DummyBackend``): jobtrail's backend with the two test helpers the dummy
  backend has: ``results`` (the results it returned from ``enqueue``, in order) and
  ``clear()`` (forgets them; the tasks stay in the store).
- ``Burst`` (for ``ImmediateBackend``, which runs a task in ``enqueue``): jobtrail's backend
  whose ``enqueue`` runs a burst worker in this process once the task is committed, and
  returns the result as the store then has it. A task runs once there (``max_attempts=1``):
  the immediate backend never retries.

Both keep jobtrail's tables in a Django database (``OPTIONS["DATABASE"]``, transactional
enqueue): ``Recording`` in ``"default"``, ``Burst`` in ``"burst"``, so the tasks a recording
test leaves queued are never run by a burst test's worker."""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections

from jobtrail.contrib.django.backend import JobtrailBackend


class Recording(JobtrailBackend):
    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.results: list[Any] = []

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        result = super().enqueue(task, args, kwargs)
        self.results.append(result)
        return result

    def clear(self) -> None:
        self.results.clear()


class Burst(JobtrailBackend):
    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.database = "burst"  # not in OPTIONS: a test checks that they are empty

    def register(self, task: Any) -> str:
        self.task_settings.setdefault(task.module_path, {"max_attempts": 1})
        return super().register(task)

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        result = super().enqueue(task, args, kwargs)
        if connections[self.database].in_atomic_block:
            return result  # no worker can see it before the commit
        self._work()
        return self.get_result(result.id)

    async def aenqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        # the worker off Django's thread-sensitive executor: an async task's handler sends
        # its signals through that executor (asend), which must not be waiting on the worker
        result = await sync_to_async(super().enqueue)(task, args, kwargs)
        await asyncio.to_thread(self._work)
        return await self.aget_result(result.id)

    def _work(self) -> None:
        self.app.run_worker(burst=True, concurrency=1, sweep_interval=60)
