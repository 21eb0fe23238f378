"""What every part of ``App`` shares, one floor below them all: ``Core`` holds the driver, the
settings, the registry of kinds (``App.task``), the outbox sinks and the ended-outside-run
hooks, and does what every part needs — turning ``enqueue`` arguments into a validated
``NewTask``, the checked insert, reading a task's row. ``Part`` is the base of each concern
(``enqueue``, ``reads``, ``ops``, ``rates``, ``views``, ``cron``, ``effects``, ``webhooks``,
``actions``, ``replays``, ``workers``, ``aio``): it is given the ``Core`` and reads the store
through its driver. Nothing here imports the parts or the facade."""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from ..core import payloads, transition, typed
from ..model import controls, validate
from ..model.errors import IdempotencyConflict, TaskNotFound, UnknownKind
from ..model.kinds import Classifier, KindSpec
from ..model.models import Task, task_from_row
from ..model.timeparse import parse_time
from ..services.outbox import Sink
from ..services.retention import Retention
from ..store.base import Driver, NewTask, Row, Tx
from .handles import TaskHandle

if TYPE_CHECKING:
    from .handles import _Enqueues

log = logging.getLogger("jobtrail.app")

F = TypeVar("F", bound=Callable[..., Any])
P = TypeVar("P")

WEBHOOK_PREFIX = "webhook."
#: set on the handler ``@app.webhook`` registers: only it may take a ``webhook.`` kind
WEBHOOK_HANDLER = "_jobtrail_webhook_handler"
#: ``App.result``: the longest sleep between two reads when no wake-up comes (the fallback).
RESULT_POLL = 1.0


def refuse_webhook_kind(kind: str) -> None:
    """The refusal of a webhook kind anywhere but the webhook route (a ``ValueError``: the API
    answers 422, the CLI exits 2)."""
    source = kind[len(WEBHOOK_PREFIX) :]
    raise ValueError(
        f"task kind {kind!r} is a webhook kind: webhook tasks are made only by "
        f"POST /webhooks/{source} (a delivery with a valid signature), never enqueued"
    )


class Core:
    """The driver, the settings and the registries every part of ``App`` reads, and the helpers
    they share. ``front`` is what a ``TaskHandle`` enqueues through (the ``App``)."""

    def __init__(
        self,
        driver: Driver,
        front: _Enqueues,
        *,
        url: str,
        default_queue: str,
        version: str | None,
        max_payload_bytes: int,
        result_limit: int,
        retention: Retention,
        poll_interval: float,
    ) -> None:
        self._driver = driver
        self._front = front
        self.url = url
        self.default_queue = default_queue
        self._version = version
        self.max_payload_bytes = max_payload_bytes
        self.result_limit = result_limit
        #: seconds each finished state is kept before the worker prunes it
        self.retention = retention
        self.poll_interval = poll_interval
        self._kinds: dict[str, KindSpec] = {}
        self._sinks: dict[str, builtins.list[Sink]] = {}  # topic -> sinks (app/effects.py)
        self._ended_hooks: builtins.list[Callable[[Task], None]] = []  # on_ended_outside_run

    def task(
        self,
        kind: str | None = None,
        *,
        queue: str | None = None,
        reentrant: bool = True,
        max_attempts: int = 5,
        lease_seconds: float = 30.0,
        backoff_base: float = 1.0,
        backoff_cap: float = 300.0,
        max_elapsed: float | None = None,
        retry_unclassified: bool = True,
        classify: Classifier | None = None,
        reconcile: Callable[[str], Any] | None = None,
        check_receipt: Callable[[str], Any] | None = None,
        timeout: float | None = None,
        unique_for: float | None = None,
        unique_while: str | None = None,
        concurrency_per_key: int | None = None,
    ) -> Callable[[Callable[[Any, P], Any]], TaskHandle[P]]:
        """Register a handler ``fn(ctx, payload)`` (plain or ``async def``) for a task kind
        and return its ``TaskHandle`` (callable as ``fn``; ``.kind``, ``.enqueue(...)``,
        ``.aenqueue(...)``). A payload parameter annotated with a dataclass or a pydantic model
        makes the payload typed (``core/typed.py``). ``unique_for``/``unique_while``: how long
        an idempotency key given to an enqueue of this kind stays the task's (default: for
        ever; an enqueue's own option wins)."""
        window, active = controls.kind_uniqueness(unique_for, unique_while)

        def register(fn: Callable[[Any, P], Any]) -> TaskHandle[P]:
            if isinstance(fn, TaskHandle):  # registered on another App too: its function
                fn = fn.fn
            name: str = kind or str(getattr(fn, "__name__", ""))
            if name.startswith(WEBHOOK_PREFIX) and not getattr(fn, WEBHOOK_HANDLER, False):
                raise ValueError(
                    f"task kind {name!r} is a webhook kind: register its handler with "
                    f"@app.webhook({name[len(WEBHOOK_PREFIX) :]!r}), not @app.task"
                )
            if queue is not None:
                _require_name(queue, "queue")
            spec = KindSpec(
                name=name,
                handler=fn,
                queue=queue or self.default_queue,
                reentrant=reentrant,
                max_attempts=max_attempts,
                lease_seconds=float(lease_seconds),
                backoff_base=float(backoff_base),
                backoff_cap=float(backoff_cap),
                max_elapsed=max_elapsed,
                retry_unclassified=retry_unclassified,
                classify=classify,
                reconcile=reconcile,
                check_receipt=check_receipt,
                timeout=timeout,
                payload_type=typed.payload_type(fn),
                unique_for=window,
                unique_active=active,
                concurrency_per_key=concurrency_per_key,
            )
            spec.validate()
            if name in self._kinds:
                raise ValueError(f"task kind {name!r} is already registered")
            self._kinds[name] = spec
            return TaskHandle(self._front, name, fn)

        return register

    @property
    def kinds(self) -> list[str]:
        return sorted(self._kinds)

    @property
    def version(self) -> str | None:
        """The code version recorded on every claim: the App's ``version``, else
        ``JOBTRAIL_APP_VERSION``, else the installed version of the handlers' package."""
        import importlib.metadata

        if self._version:
            return self._version
        for spec in self._kinds.values():
            module = getattr(spec.handler, "__module__", "") or ""
            top = module.split(".", 1)[0]
            if top and top not in ("__main__", "jobtrail"):
                try:
                    return importlib.metadata.version(top)
                except importlib.metadata.PackageNotFoundError:
                    continue
        return None

    def _new_task(
        self, args: dict[str, Any], *, label: bool = False, webhook_route: bool = False
    ) -> NewTask:
        """The validated ``NewTask`` of one set of ``enqueue`` arguments (nothing written).

        Every way of making a task comes through here, and a webhook kind is refused unless
        ``webhook_route``: that is passed only by ``receive_webhook`` (the route of a verified
        delivery), never by ``enqueue``, ``enqueue_many``, workflows or cron — and no public
        method takes it, so no caller's arguments can reach it (docs/security.md)."""
        kind = args["kind"]
        if not isinstance(kind, str) or not kind:
            raise TypeError("kind must be a non-empty string")
        if kind.startswith(WEBHOOK_PREFIX) and not webhook_route:
            refuse_webhook_kind(kind)
        spec = self._kinds.get(kind)
        if spec is None:
            if not label:
                raise UnknownKind(kind, list(self._kinds))
            # a workflow parent's kind is a label, never registered: checked as text here
            # (PostgreSQL refused a NUL in it with its own error; SQLite stored it)
            validate.filter_text(kind, "kind", max_length=255)
        payload = args.get("payload")
        if spec is not None and spec.payload_type is not None:
            payload = typed.dump(kind, spec.payload_type, {} if payload is None else payload)
        payload_json, payload_hash = payloads.encode(payload, self.max_payload_bytes)
        key = args.get("idempotency_key")
        if key is not None and (not isinstance(key, str) or not key or len(key) > 255):
            raise ValueError("idempotency_key must be a non-empty string of at most 255 chars")
        tenant = args.get("tenant") or ""
        if not isinstance(tenant, str) or len(tenant) > 255:
            raise TypeError("tenant must be a string of at most 255 characters")
        if key is not None:
            _refuse_nul(key, "idempotency_key")
        _refuse_nul(tenant, "tenant")
        queue = args.get("queue") or (spec.queue if spec else self.default_queue)
        _require_name(queue, "queue")
        priority, top = args.get("priority", 0) or 0, validate.MAX_PRIORITY
        if not isinstance(priority, int) or isinstance(priority, bool) or abs(priority) > top:
            # a TypeError out of range too, as since the first release
            raise TypeError(f"priority must be an integer from -{top} to {top} (higher runs first)")
        run_at = args.get("run_at")
        delay = args.get("delay")
        if run_at is not None and delay is not None:
            raise ValueError("give run_at or delay, not both")
        if run_at is not None:
            run_at = parse_time(run_at, "run_at")
        if delay is not None:
            if isinstance(delay, timedelta):
                delay = delay.total_seconds()
            if (
                isinstance(delay, bool)
                or not isinstance(delay, int | float)
                or delay != delay
                or delay < 0
                or delay > 10 * 365 * 86400
            ):
                raise ValueError("delay must be a number of seconds between 0 and 10 years")
            delay = float(delay)
        max_attempts = args.get("max_attempts")
        if max_attempts is None:
            max_attempts = spec.max_attempts if spec else 1
        if (
            isinstance(max_attempts, bool)
            or not isinstance(max_attempts, int)
            or not 1 <= max_attempts <= validate.MAX_ATTEMPTS
        ):
            raise ValueError(
                f"max_attempts must be a positive integer (at most {validate.MAX_ATTEMPTS})"
            )
        parent = args.get("parent")
        parent_id = self._parse_id(parent) if parent is not None else None
        limits = controls.Controls.of(
            args,
            has_key=key is not None,
            kind_unique_for=spec.unique_for if spec else None,
            kind_unique_active=spec.unique_active if spec else False,
        )
        if limits is not None and limits.debounce_key is not None:
            if run_at is not None or delay is not None:
                name = "run_at" if run_at is not None else "delay"
                raise ValueError(f"give {name} or debounce, not both (debounce sets the run time)")
            if parent_id is not None:
                raise ValueError("debounce_key is not for a workflow's children")
        concurrency_key = args.get("concurrency_key")
        if concurrency_key is not None:
            validate.concurrency_key(concurrency_key)
        new = NewTask(
            kind=kind,
            queue=queue,
            tenant=tenant,
            payload_json=payload_json,
            payload_hash=payload_hash,
            idempotency_key=key,
            priority=priority,
            max_attempts=max_attempts,
            lease_seconds=spec.lease_seconds if spec else 30.0,
            reentrant=spec.reentrant if spec else True,
            run_at=run_at,
            delay=delay,
            parent_id=parent_id,
            controls=limits,
        )
        if concurrency_key is not None:
            new.concurrency_key = concurrency_key
            new.concurrency_limit = spec.concurrency_per_key if spec else None
        return new

    def _insert(self, tx: Tx, new: NewTask) -> Task:
        if new.parent_id is not None and self._driver.task_get(tx, new.parent_id) is None:
            raise TaskNotFound(str(new.parent_id))
        row, created = transition.create(self._driver, tx, new)
        if not created and row["payload_hash"] != new.payload_hash and not row.get("debounced"):
            raise IdempotencyConflict(str(row["id"]), new.idempotency_key or "")
        if created:
            self._driver.notify_queued(tx, new.queue)
        return task_from_row(row, created=created)

    def on_ended_outside_run(self, fn: Callable[[Task], None]) -> Callable[[Task], None]:
        """Call ``fn(task)`` after this App ends a task outside its handler's run: a
        receipt's outcome (``confirm_receipt``, a webhook's confirmation, a receipt deadline in
        this App's sweep or its workers') or an expired lease (``sweep``, the workers' sweep)
        moved it to ``succeeded``, ``dead`` or ``cancelled``. Called after the commit, in the
        process and thread that made the move, with the task as stored then; an exception is
        logged (its class, never the task's data) and the move stands. A handler's own end
        is its return or raise, which calls nothing here. Returns ``fn`` (a decorator)."""
        if not callable(fn):
            raise TypeError(f"on_ended_outside_run takes a callable, not {fn!r}")
        self._ended_hooks.append(fn)
        return fn

    def _report_ended(self, task_ids: Sequence[int]) -> None:
        """Hand the tasks just ended outside a run to each ``on_ended_outside_run`` hook."""
        if not self._ended_hooks:
            return
        try:
            with self._driver.transaction(write=False) as tx:
                rows = [self._driver.task_get(tx, i) for i in task_ids]
        except Exception as exc:  # the move is committed; the store went away since
            log.error(
                "on_ended_outside_run: could not read tasks %s (%s)",
                ",".join(map(str, task_ids)),
                type(exc).__name__,
            )
            return
        for row in rows:
            if row is None:  # pruned meanwhile
                continue
            task = task_from_row(row)
            for hook in builtins.list(self._ended_hooks):
                try:
                    hook(task)
                except Exception as exc:
                    log.error(
                        "on_ended_outside_run hook %s raised %s for task %s",
                        getattr(hook, "__qualname__", hook),
                        type(exc).__name__,
                        task.id,
                    )

    def _row(self, tx: Tx, task_id: str | int) -> Row:
        row = self._driver.task_get(tx, self._parse_id(task_id))
        if row is None:
            raise TaskNotFound(str(task_id))
        return row

    def _terminal_or_none(self, task_id: str | int) -> Task | None:
        with self._driver.transaction(write=False) as tx:
            row = self._row(tx, task_id)
        task = task_from_row(row)
        return task if task.terminal else None

    @staticmethod
    def _task_from_row(
        row: Row, *, created: bool = False, steps: dict[str, Any] | None = None
    ) -> Task:
        """``models.task_from_row`` under its old private name (tests build attempts with it)."""
        return task_from_row(row, created=created, steps=steps)

    @staticmethod
    def _parse_id(task_id: str | int) -> int:
        text = str(task_id).strip()
        if not text.isdigit() or len(text) > 18:
            raise TaskNotFound(str(task_id))
        return int(text)


class Part:
    """One concern of ``App``: given the ``Core`` (the registry, the settings, the shared
    helpers), it reads and writes the store through ``core``'s driver. A part that uses another
    is given it in its constructor."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._driver = core._driver


def _require_text(value: Any, name: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} is required (who did it / why) and must be non-empty text")
    validate.filter_text(value, name, max_length=validate.MAX_NOTE)


def _require_name(value: Any, name: str) -> None:
    if not isinstance(value, str) or not value or len(value) > 128 or value != value.strip():
        raise ValueError(f"{name} must be a non-empty name of at most 128 characters")
    _refuse_nul(value, name)


def _refuse_nul(text: str, name: str) -> None:
    # PostgreSQL text cannot hold a NUL, neither backend can encode a lone surrogate: refused
    # on every backend alike (the plain-ASCII case, almost every call, costs one scan)
    if "\x00" in text or not text.isascii():
        validate.text(text, name)


def _unfinished(task_id: str | int, state: str, timeout: float | None) -> TimeoutError:
    """The ``TimeoutError`` of ``result``/``aresult`` for a task that has not finished."""
    if timeout:
        return TimeoutError(f"task {task_id} did not finish within {timeout:g}s (it is {state})")
    return TimeoutError(
        f"task {task_id} has not finished (it is {state}); pass timeout= to wait for it"
    )
