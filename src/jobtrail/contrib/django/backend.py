"""``JobtrailBackend``: Django's task framework (``django.tasks``, or the ``django-tasks``
backport) on a jobtrail store (SPEC §16.4).

Each Django task is a jobtrail kind named by its module path (``myapp.tasks.send_email``), so
``jobtrail explain``, the dashboard and the CLI show Django tasks like any other. The payload is
``{"args": [...], "kwargs": {...}}``. Without ``OPTIONS["DATABASE_URL"]`` the tables live in the
Django database ``OPTIONS["DATABASE"]`` (default ``"default"``) and an enqueue inside
``transaction.atomic()`` is written on that transaction's own connection.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from django.db import connections, transaction
from django.utils.module_loading import import_string

from ...app import App
from ...model.errors import TaskNotFound
from ...model.machine import State
from ...model.models import Task, Transition
from .compat import (
    SUCCESSFUL,
    BaseTaskBackend,
    DjangoTask,
    InvalidTask,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
    task_finished,
)
from .settings import database_url, kind_settings

#: SPEC §16.4's status mapping.
STATUS: dict[State, Any] = {
    State.QUEUED: TaskResultStatus.READY,
    State.WAITING: TaskResultStatus.READY,
    State.LEASED: TaskResultStatus.RUNNING,
    State.AWAITING_RECEIPT: TaskResultStatus.RUNNING,
    State.CANCEL_REQUESTED: TaskResultStatus.RUNNING,
    State.SUCCEEDED: SUCCESSFUL,
    State.DEAD: TaskResultStatus.FAILED,
    State.CANCELLED: TaskResultStatus.FAILED,
}

_OPTION_KEYS = frozenset({"DATABASE", "DATABASE_URL", "TASKS", "MODULES", "APP_OPTIONS"})


class JobtrailBackend(BaseTaskBackend):  # type: ignore[misc]
    """A Django task backend whose tasks are jobtrail tasks: durable, leased with fencing,
    retried by policy, explained by ``jobtrail explain``.

    ``OPTIONS``: ``DATABASE`` (a Django database alias, default ``"default"``),
    ``DATABASE_URL`` (a jobtrail URL: the tables live there instead, and an enqueue commits on
    its own), ``TASKS`` (``{"app.tasks.fn": {"max_attempts": 3, ...}}``: jobtrail kind settings
    per task path), ``MODULES`` (modules the worker imports to find tasks, besides every
    installed app's ``tasks``), ``APP_OPTIONS`` (keyword arguments for ``jobtrail.App``)."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: Mapping[str, Any]) -> None:
        super().__init__(alias, params)
        options = dict(self.options or {})
        unknown = set(options) - _OPTION_KEYS
        if unknown:
            raise InvalidTask(
                f"TASKS[{alias!r}]['OPTIONS'] has unknown keys {sorted(unknown)}; "
                f"known: {sorted(_OPTION_KEYS)}"
            )
        self.database: str = options.get("DATABASE", "default")
        self.database_url: str | None = options.get("DATABASE_URL")
        self.task_settings: dict[str, dict[str, Any]] = dict(options.get("TASKS") or {})
        self.app_options: dict[str, Any] = dict(options.get("APP_OPTIONS") or {})
        self.modules: list[str] = list(options.get("MODULES") or [])
        self._app: App | None = None
        self._registered: set[str] = set()
        self._lock = threading.Lock()

    # -- the jobtrail App behind the backend ---------------------------------------------------
    @property
    def app(self) -> App:
        """The ``jobtrail.App`` this backend enqueues to (made on first use)."""
        with self._lock:
            if self._app is None:
                url = self.database_url or database_url(self.database)
                self._app = App(url, **self.app_options)
                self._app.on_ended_outside_run(self._finished_outside_run)
            return self._app

    def _finished_outside_run(self, stored: Task) -> None:
        """``task_finished`` for a Django task that a receipt's outcome or an expired lease
        ended, sent in the process that moved it (a handler's own end sends it from its run:
        ``runner.py``). A task of a kind that is not a Django task sends nothing."""
        try:
            task = self._task_of(stored)
        except TaskResultDoesNotExist:
            return
        result = self._result(task, stored, self.app.transitions(stored.id))
        task_finished.send(type(self), task_result=result)

    @property
    def in_django_database(self) -> bool:
        """True when the tables live in a Django database (enqueues join its transactions)."""
        return self.database_url is None

    def register(self, task: Any) -> str:
        """Make the task's module path a kind of the App (idempotent); returns the kind."""
        from .runner import handler_for

        kind: str = task.module_path
        app = self.app
        with self._lock:
            if kind not in self._registered:
                settings = kind_settings(kind, task.func, self.task_settings)
                app.task(kind, queue=task.queue_name, **settings)(handler_for(self, kind, task))
                self._registered.add(kind)
        return kind

    def discover(self) -> list[str]:
        """Register every task the worker can find: the module-level tasks of each installed
        app's ``tasks`` module, of ``MODULES`` and of the paths in ``TASKS`` become kinds
        (any task may be sent here with ``.using(backend=...)``). Returns the kinds."""
        import importlib
        import sys

        from django.utils.module_loading import autodiscover_modules

        autodiscover_modules("tasks")
        names = set(self.modules)
        for name in self.modules:
            importlib.import_module(name)
        for path in self.task_settings:
            names.add(import_string(path).func.__module__)
        kinds = []
        for name, module in list(sys.modules.items()):
            if name not in names and name != "tasks" and not name.endswith(".tasks"):
                continue
            for value in list(getattr(module, "__dict__", {}).values()):
                # type(), not isinstance(): a lazy object's __class__ would set itself up
                if issubclass(type(value), DjangoTask):
                    kinds.append(self.register(value))
        return sorted(set(kinds))

    # -- the framework's contract --------------------------------------------------------------
    def validate_task(self, task: Any) -> None:
        super().validate_task(task)
        kind_settings(task.module_path, task.func, self.task_settings)  # bad settings: refused

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        self.validate_task(task)
        kind = self.register(task)
        payload = {"args": list(args), "kwargs": dict(kwargs)}
        connection = None
        django_conn = None
        if self.in_django_database:
            django_conn = connections[self.database]
            if django_conn.in_atomic_block:
                django_conn.ensure_connection()
                connection = unwrap_django(django_conn)
        try:
            stored = self.app.enqueue(
                kind,
                payload,
                queue=task.queue_name,
                priority=int(task.priority),
                run_at=task.run_after,
                connection=connection,
            )
        except (TypeError, ValueError) as exc:
            raise InvalidTask(f"{kind}: {exc}") from exc
        result = self._result(task, stored, [])

        def announce() -> None:
            task_enqueued.send(type(self), task_result=result)

        if django_conn is not None:
            transaction.on_commit(announce, using=self.database)
        else:
            announce()
        return result

    async def aenqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """With the tables in a Django database: the framework's own way, ``enqueue`` on
        Django's thread-sensitive executor. Django's connections are sync-only and live on
        that thread, so that is where a ``transaction.atomic()`` the caller holds is open, and
        where the enqueue must be written to belong to it. With ``OPTIONS["DATABASE_URL"]``
        there is no Django transaction to join: jobtrail's own ``App.aenqueue`` writes it (on
        PostgreSQL on this loop's async connections, no thread; on SQLite on a thread of the
        driver's), without waiting for that executor, which serves every sync ORM call."""
        if self.in_django_database:
            return await super().aenqueue(task, args, kwargs)
        self.validate_task(task)
        kind = self.register(task)
        try:
            stored = await self.app.aenqueue(
                kind,
                {"args": list(args), "kwargs": dict(kwargs)},
                queue=task.queue_name,
                priority=int(task.priority),
                run_at=task.run_after,
            )
        except (TypeError, ValueError) as exc:
            raise InvalidTask(f"{kind}: {exc}") from exc
        result = self._result(task, stored, [])
        await task_enqueued.asend(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> Any:
        app = self.app
        try:
            stored = app.get(result_id)
            log = app.transitions(result_id)
        except TaskNotFound:
            raise TaskResultDoesNotExist(result_id) from None
        task = self._task_of(stored)
        return self._result(task, stored, log)

    async def aget_result(self, result_id: str) -> Any:
        """``get_result`` through jobtrail's async API, wherever the tables are: the read never
        used Django's connection (it goes through the App's own), so it has no transaction of
        Django's to join and need not queue on Django's thread-sensitive executor."""
        app = self.app
        try:
            stored = await app.aget(result_id)
            log = await app.atransitions(result_id)
        except TaskNotFound:
            raise TaskResultDoesNotExist(result_id) from None
        task = self._task_of(stored)
        return self._result(task, stored, log)

    # -- building results ----------------------------------------------------------------------
    def _task_of(self, stored: Task) -> Any:
        try:
            found = import_string(stored.kind)
        except ImportError:
            raise TaskResultDoesNotExist(
                f"task {stored.id} is of kind {stored.kind!r}, which is not an importable "
                "Django task"
            ) from None
        if not isinstance(found, DjangoTask):
            raise TaskResultDoesNotExist(
                f"task {stored.id} is of kind {stored.kind!r}, which is not a Django task"
            )
        return found.using(
            queue_name=stored.queue,
            priority=stored.priority,
            backend=self.alias,
            run_after=stored.run_at if stored.state is State.QUEUED else None,
        )

    def _result(self, task: Any, stored: Task, log: list[Transition]) -> Any:
        claims = [t for t in log if t.reason == "claimed"]
        payload = stored.payload if isinstance(stored.payload, dict) else {}
        result = TaskResult(
            task=task,
            id=stored.id,
            status=STATUS[stored.state],
            enqueued_at=stored.created_at,
            started_at=claims[0].at if claims else None,
            finished_at=stored.finished_at,
            last_attempted_at=claims[-1].at if claims else None,
            args=list(payload.get("args", [])),
            kwargs=dict(payload.get("kwargs", {})),
            backend=self.alias,
            errors=errors_of(log),
            worker_ids=[t.actor for t in claims],
        )
        object.__setattr__(result, "_return_value", getattr(stored, "result", None))
        return result

    def close(self) -> None:
        """Release the App's connections (tests and the management command call it)."""
        with self._lock:
            if self._app is not None:
                self._app.close()
                self._app = None
                self._registered.clear()


def errors_of(log: list[Transition]) -> list[Any]:
    """One ``TaskError`` per attempt that raised: the exception's class path and traceback
    (SPEC §16.1 stores them with the failing transition). An attempt that ended without an
    exception (a lease that expired with its worker) has none to show."""
    out = []
    for t in log:
        path = getattr(t, "error_class", None)
        if not path or t.attempt < 1 or t.from_state not in _RUNNING:
            continue
        out.append(
            TaskError(exception_class_path=path, traceback=getattr(t, "traceback", None) or "")
        )
    return out


_RUNNING = frozenset({State.LEASED, State.CANCEL_REQUESTED, State.AWAITING_RECEIPT})


def unwrap_django(conn: Any) -> Any:
    """The DBAPI connection under a Django connection (sqlite3 or psycopg 3)."""
    raw = conn.connection
    if raw is None:  # pragma: no cover - ensure_connection was called
        raise RuntimeError(f"Django database {conn.alias!r} has no open connection")
    return raw
