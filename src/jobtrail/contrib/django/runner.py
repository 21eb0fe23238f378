"""What a jobtrail worker runs for a Django task: the task function with its arguments (and a
context when ``takes_context``), between the framework's ``task_started`` and ``task_finished``
signals, sent from the worker process."""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from inspect import iscoroutinefunction
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections
from django.utils import timezone

from ...core.context import Context
from ...core.decide import decide_failure
from ...core.durable import Suspend
from ...model.errors import LeaseLost
from ...model.machine import TERMINAL, Reason
from .compat import (
    SUCCESSFUL,
    TaskContext,
    TaskError,
    TaskResultStatus,
    normalize_json,
    task_finished,
    task_started,
)

if TYPE_CHECKING:
    from .backend import JobtrailBackend


@dataclass(frozen=True, kw_only=True)
class JobtrailTaskContext(TaskContext):  # type: ignore[misc]
    """The framework's ``TaskContext`` (``task_result``, ``attempt``) with jobtrail's handler
    context under ``jobtrail``, and its durable helpers at hand: ``step``, ``effect``,
    ``check_cancelled`` and ``extend``."""

    jobtrail: Context

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` once per task: a retry gets the recorded result instead."""
        return self.jobtrail.step(name, fn)

    def effect(self, name: str, fn: Callable[[str], Any]) -> Any:
        """An external effect with an idempotency key and a receipt."""
        return self.jobtrail.effect(name, fn)

    def check_cancelled(self) -> None:
        self.jobtrail.check_cancelled()

    def extend(self, seconds: float) -> None:
        self.jobtrail.extend(seconds)


def handler_for(backend: JobtrailBackend, kind: str, task: Any) -> Callable[..., Any]:
    """The jobtrail handler of a Django task (``async def`` for a coroutine function)."""
    sender = type(backend)

    if iscoroutinefunction(task.func):

        async def run_async(ctx: Context, payload: Any) -> Any:
            result = await asyncio.to_thread(backend.get_result, ctx.task_id)
            await task_started.asend(sender, task_result=result)
            args, kwargs = _arguments(result, ctx)
            try:
                value = _json(await result.task.func(*args, **kwargs))
            except BaseException as exc:
                # off the loop: with max_elapsed it reads the task's log
                if await asyncio.to_thread(_final, backend, ctx, exc):
                    _failed(result, exc)
                    await task_finished.asend(sender, task_result=result)
                raise
            if ctx.awaited_receipt is None:  # else RUNNING until the receipt ends it
                _succeeded(result, value)
                await task_finished.asend(sender, task_result=result)
            return value

        run_async.__qualname__ = run_async.__name__ = f"django:{kind}"
        return run_async

    def run(ctx: Context, payload: Any) -> Any:
        close_old_connections()
        try:
            result = backend.get_result(ctx.task_id)
            task_started.send(sender, task_result=result)
            args, kwargs = _arguments(result, ctx)
            try:
                value = _json(result.task.func(*args, **kwargs))
            except BaseException as exc:
                if _final(backend, ctx, exc):
                    _failed(result, exc)
                    task_finished.send(sender, task_result=result)
                raise
            if ctx.awaited_receipt is None:  # else RUNNING until the receipt ends it
                _succeeded(result, value)
                task_finished.send(sender, task_result=result)
            return value
        finally:
            close_old_connections()

    run.__qualname__ = run.__name__ = f"django:{kind}"
    return run


def _arguments(result: Any, ctx: Context) -> tuple[list[Any], dict[str, Any]]:
    args = list(result.args)
    if result.task.takes_context:
        args.insert(0, JobtrailTaskContext(task_result=result, jobtrail=ctx))
    return args, dict(result.kwargs)


def _json(value: Any) -> Any:
    """The return value as the framework keeps it (``normalize_json``: tuples become lists,
    bytes UTF-8 text; a value it cannot hold fails the attempt with its ``TypeError``,
    "Unsupported type: …"), then as JSON holds it (non-text dict keys become text)."""
    import json

    return json.loads(json.dumps(normalize_json(value)))


def _final(backend: JobtrailBackend, ctx: Context, exc: BaseException) -> bool:
    """Whether the worker will end the task on this failure (so ``task_finished`` is due):
    the worker's own decision, ``decide_failure``, on what the handler knows — the kind's
    settings, this attempt, the cancel seen so far and the age of the retry budget (from the
    enqueue or the last replay). A lost lease writes nothing and is not an end; neither is an
    interrupt (``KeyboardInterrupt``, a cancelled coroutine), nor a durable handler's
    suspension (``Suspend``). Any other ``BaseException``
    (``SystemExit`` from ``exit()``, say) is a failure the worker records like any other, and
    ends the task as the framework's own backends end it."""
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError | LeaseLost):
        return False
    if isinstance(exc, Suspend):  # a durable handler paused (sleep, wait_for_event, join)
        return False
    elapsed = 0.0
    if ctx.spec.max_elapsed is not None:  # only then does the budget's age matter
        log = backend.app.transitions(ctx.task_id)
        starts = [t.at for t in log if t.reason == Reason.REPLAYED.value] or [ctx.task.created_at]
        elapsed = (timezone.now() - starts[-1]).total_seconds()
    decision = decide_failure(
        exc,
        spec=ctx.spec,
        attempt=ctx.attempt,
        max_attempts=ctx.task.max_attempts,
        elapsed=elapsed,
        cancel_requested=ctx.cancel_requested,
    )
    return decision.to_state in TERMINAL


def _failed(result: Any, exc: BaseException) -> None:
    cls = type(exc)
    result.errors.append(
        TaskError(
            exception_class_path=f"{cls.__module__}.{cls.__qualname__}",
            traceback="".join(traceback.format_exception(exc)),
        )
    )
    object.__setattr__(result, "status", TaskResultStatus.FAILED)
    object.__setattr__(result, "finished_at", timezone.now())


def _succeeded(result: Any, value: Any) -> None:
    object.__setattr__(result, "status", SUCCESSFUL)
    object.__setattr__(result, "finished_at", timezone.now())
    object.__setattr__(result, "_return_value", value)
