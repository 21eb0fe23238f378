"""``JobtrailBackend``: Django's task framework (``django.tasks``, or the ``django-tasks``
backport) on a jobtrail store (docs/django.md).

Each Django task is a jobtrail kind named by its module path (``myapp.tasks.send_email``), so
``jobtrail explain``, the dashboard and the CLI show Django tasks like any other. The payload is
``{"args": [...], "kwargs": {...}}``. Without ``OPTIONS["DATABASE_URL"]`` the tables live in the
Django database ``OPTIONS["DATABASE"]`` (default ``"default"``) and an enqueue inside
``transaction.atomic()`` is written on that transaction's own connection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import connections, transaction
from django.utils.module_loading import import_string

from ...app import App
from ...model.errors import SchemaMissing, TaskNotFound
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
    normalize_json,
    task_enqueued,
    task_finished,
)
from .settings import database_url, kind_settings
from .shared import Shared, connect_signals, shared_app
from .shared import close as close_shared

connect_signals()

#: The Django status of each jobtrail state.
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


def status_of(task: Task) -> Any:
    """The Django status of a jobtrail task: ``STATUS`` of its state, except that a task whose
    durable handler is suspended in ``waiting`` (for an event or for the children it spawned)
    is ``RUNNING``: its run began and has not finished, and no worker takes it until it is
    woken (``READY`` says it may run now). A sleeping handler is ``queued`` and ``READY``, as a
    task waiting for its retry is: it runs again at its wake time."""
    if task.state is State.WAITING and task.waiting_for is not None:
        return TaskResultStatus.RUNNING
    return STATUS[task.state]


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

    # -- the jobtrail App behind the backend ---------------------------------------------------
    @property
    def app(self) -> App:
        """The ``jobtrail.App`` this backend enqueues to: one per alias and database in the
        process, shared by every instance of this backend (``shared.py``), made on first use."""
        return self._shared().app

    def _url(self) -> str:
        return self.database_url or database_url(self.database)

    def _shared(self) -> Shared:
        url = self._url()

        def make() -> App:
            app = App(url, **self.app_options)
            app.on_ended_outside_run(lambda stored: found.backend._finished_outside_run(stored))
            return app

        found = shared_app(self.alias, url, self.app_options, self, make)
        return found

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
        shared = self._shared()
        with shared.lock:
            # the first instance to register a kind on the shared App sets its settings
            if kind not in shared.registered:
                settings = kind_settings(kind, task.func, self.task_settings)
                handler = handler_for(self, kind, task)
                shared.app.task(kind, queue=task.queue_name, **settings)(handler)
                shared.registered.add(kind)
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
        payload = payload_of(task, args, kwargs)
        kind = self.register(task)
        # Django's connection only inside its atomic() block: outside one the App's own
        # connection writes (and a SimpleTestCase, where Django's is forbidden, can enqueue)
        connection = self._atomic_connection()
        try:
            stored = self.app.enqueue(
                kind,
                payload,
                queue=task.queue_name,
                priority=int(task.priority),
                run_at=task.run_after,
                connection=connection,
            )
        except SchemaMissing as exc:
            raise self.schema_missing(exc) from exc
        except (TypeError, ValueError) as exc:
            raise InvalidTask(f"{kind}: {exc}") from exc
        result = self._result(task, stored, [])

        def announce() -> None:
            task_enqueued.send(type(self), task_result=result)

        if connection is not None:
            transaction.on_commit(announce, using=self.database)
        else:
            announce()
        return result

    def _atomic_connection(self) -> Any:
        """The DBAPI connection of Django's open ``atomic()`` block on the backend's database,
        or ``None`` outside one (or with ``DATABASE_URL``). Reading ``in_atomic_block`` does
        not touch the database."""
        if not self.in_django_database:
            return None
        django_conn = connections[self.database]
        if not django_conn.in_atomic_block:
            return None
        django_conn.ensure_connection()
        return unwrap_django(django_conn)

    def schema_missing(self, exc: SchemaMissing) -> SchemaMissing:
        """``exc`` naming the command a Django project runs: ``python manage.py jobtrail
        migrate`` (with ``--backend`` for another alias than ``"default"``)."""
        command = "python manage.py jobtrail migrate" + (
            f" --backend {self.alias}" if self.alias != "default" else ""
        )
        named = SchemaMissing(exc.url)
        named.command = command
        named.args = (f"the database {exc.url} has no jobtrail schema; run `{command}` first",)
        return named

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
        payload = payload_of(task, args, kwargs)
        kind = self.register(task)
        try:
            stored = await self.app.aenqueue(
                kind,
                payload,
                queue=task.queue_name,
                priority=int(task.priority),
                run_at=task.run_after,
            )
        except SchemaMissing as exc:
            raise self.schema_missing(exc) from exc
        except (TypeError, ValueError) as exc:
            raise InvalidTask(f"{kind}: {exc}") from exc
        result = self._result(task, stored, [])
        await task_enqueued.asend(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> Any:
        """The task's result as the store has it; inside Django's ``atomic()`` block on the
        backend's database it is read on that block's connection, so a task enqueued in the
        block is found there (it exists nowhere else until the commit)."""
        app = self.app
        connection = self._atomic_connection()
        try:
            stored = app.get(result_id, connection=connection)
            log = app.transitions(result_id, connection=connection)
        except TaskNotFound:
            raise TaskResultDoesNotExist(result_id) from None
        except SchemaMissing as exc:
            raise self.schema_missing(exc) from exc
        task = self._task_of(stored)
        return self._result(task, stored, log)

    async def aget_result(self, result_id: str) -> Any:
        """With the tables in a Django database: the framework's own way, as ``aenqueue``,
        ``get_result`` on Django's thread-sensitive executor, where an ``atomic()`` block the
        caller holds is open: a task enqueued in it is found there. With
        ``OPTIONS["DATABASE_URL"]`` there is no Django transaction to read in, and jobtrail's
        own async API reads it (``App.aget``, ``App.atransitions``)."""
        if self.in_django_database:
            return await super().aget_result(result_id)
        app = self.app
        try:
            stored = await app.aget(result_id)
            log = await app.atransitions(result_id)
        except TaskNotFound:
            raise TaskResultDoesNotExist(result_id) from None
        except SchemaMissing as exc:
            raise self.schema_missing(exc) from exc
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
        # the Task it was enqueued for (Django's TaskResult.task): run_after as given, or None
        payload, _ = stored_json(stored)
        run_after = payload.get(RUN_AFTER)
        return found.using(
            queue_name=stored.queue,
            priority=stored.priority,
            backend=self.alias,
            run_after=datetime.fromisoformat(run_after) if isinstance(run_after, str) else None,
        )

    def _result(self, task: Any, stored: Task, log: list[Transition]) -> Any:
        claims = [t for t in log if t.reason == "claimed"]
        payload, value = stored_json(stored)
        result = TaskResult(
            task=task,
            id=stored.id,
            status=status_of(stored),
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
        object.__setattr__(result, "_return_value", value)
        return result

    def close(self) -> None:
        """Close this backend's App (shared with the other instances of its alias on its
        database: they get a new one on their next use). The management command calls it
        when its verb ends; ``shared.close_all()`` closes every backend's."""
        close_shared(self.alias, self._url(), self.app_options)


#: The payload key of ``run_after`` when the enqueue gave one (ISO 8601): what the fetched
#: result's ``task.run_after`` says. Absent when none was given (the task was due at once).
RUN_AFTER = "run_after"


def stored_json(stored: Task) -> tuple[dict[str, Any], Any]:
    """The task's payload and result. Read on Django's own PostgreSQL connection (inside
    ``atomic()``) they come as JSON text, since Django loads ``jsonb`` as text; decoded here
    (a Django task's payload is always an object, so text means "not decoded")."""
    payload, value = stored.payload, getattr(stored, "result", None)
    if isinstance(payload, str):
        payload = json.loads(payload)
        value = json.loads(value) if isinstance(value, str) else value
    return (payload if isinstance(payload, dict) else {}), value


def payload_of(task: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    """The jobtrail payload of an enqueue: the arguments normalised as Django's task framework
    normalises them (``normalize_json``: tuples become lists, bytes UTF-8 text; a value it
    cannot hold raises its ``TypeError``, "Unsupported type", and nothing is written), then
    as JSON holds them (a dict's non-text keys become text, as in any JSON store)."""
    body: dict[str, Any] = json.loads(
        json.dumps({"args": normalize_json(list(args)), "kwargs": normalize_json(dict(kwargs))})
    )
    if task.run_after is not None:
        body[RUN_AFTER] = task.run_after.isoformat()
    return body


def errors_of(log: list[Transition]) -> list[Any]:
    """One ``TaskError`` per attempt that raised: the exception's class path and traceback
    (each failing transition stores them). An attempt that ended without an
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
