"""The handler's ``ctx``: what an attempt may ask of the store while it runs.

Every call first checks that this attempt still holds the task; once the lease is lost (expired
and swept, taken over, force-fixed, or the attempt timed out) every call raises ``LeaseLost``
and the worker writes nothing further for the attempt.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..model import validate
from ..model.errors import Cancelled, LeaseLost, PermanentError, Snooze, TransientError
from ..model.kinds import DEFAULT_MAX_PAYLOAD, KindSpec
from ..model.machine import State
from ..model.models import Task
from . import payloads
from .decide import error_text, http_status
from .durable import Durable

if TYPE_CHECKING:
    from ..store.base import Driver, NewTask, Row, Tx


@dataclass(eq=False)
class Attempt:
    """The worker's book-keeping for one running attempt (times are local monotonic, used only
    to schedule this process's own renewals — the store decides expiry by its own clock)."""

    task: Task
    spec: KindSpec
    owner: str
    number: int
    lease_seconds: float
    started: float = field(default_factory=time.monotonic)
    next_renew: float = 0.0
    lease_deadline: float = 0.0
    lost: bool = False
    lost_why: str = ""
    timed_out: bool = False
    cancel_seen: bool = False
    closed: bool = False
    #: Handed to a handler (``started`` is reset then); its handler has returned (or was
    #: abandoned at its timeout).
    begun: bool = False
    handler_done: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Steps and effects of this task (all attempts), loaded at the first boundary.
    steps: dict[str, dict[str, Any]] | None = None
    #: Set by ``ctx.await_receipt``: (receipt id, timeout seconds), written on return.
    pending_receipt: tuple[str, float] | None = None
    #: Messages from ``ctx.emit``, committed with the completing transition.
    outbox: list[tuple[str, str]] = field(default_factory=list)
    #: The handler's return value as JSON text (``results.encode_result``), written with the
    #: completing transition; ``None`` when it returned nothing.
    result: str | None = None
    #: Traced (a recording tracer when it was claimed) and the trace context stored with the
    #: task at its enqueue (``tracing.carrier``), if any.
    traced: bool = False
    trace: dict[str, str] | None = None
    #: Durable handlers: how many recorded calls (steps, effects, sleeps, waits, spawns, ...)
    #: this run has made, and their names (unique within a task; ``core/durable.py``).
    calls: int = 0
    names: set[str] = field(default_factory=set)
    #: The recorded calls of earlier runs by their order, and whether their order is checked
    #: (the history holds a durable record); read once, at the run's first recorded call.
    history: dict[int, dict[str, Any]] | None = None
    guarded: bool = False
    #: The latest database time this run has read (a lower bound of the store's clock now): a
    #: recorded sleep whose wake time it has passed returns without reading the clock again.
    clock_seen: datetime | None = None

    @property
    def effect_confirmed(self) -> bool:
        return any(
            s["is_effect"] and s["status"] == "confirmed" for s in (self.steps or {}).values()
        )

    #: The task's id as an int (read on every step of the worker's hot path).
    task_id: int = field(init=False)

    def __post_init__(self) -> None:
        self.next_renew = self.started + self.lease_seconds / 3.0
        self.lease_deadline = self.started + self.lease_seconds
        self.task_id = int(self.task.id)

    def mark_lost(self, why: str) -> None:
        with self.lock:
            if not self.lost:
                self.lost = True
                self.lost_why = why


#: HTTP statuses that prove a provider refused a call: a client error, or 503 (the
#: service says it did not take the request). 500/502/504 prove nothing: the request may have
#: been carried out before the answer broke.
REFUSED_STATUSES = frozenset(range(400, 500)) | {503}


def refusal(exc: BaseException) -> bool:
    """Whether an effect's exception proves the provider refused it (nothing happened): a
    jobtrail ``TransientError``/``PermanentError``/``Snooze`` raised by the effect's function,
    or an HTTP status of 400-499 or 503 read off the exception as the classifier reads it
    (``status_code``, ``status`` or ``response.status_code``)."""
    if isinstance(exc, TransientError | PermanentError | Snooze):
        return True
    return http_status(exc) in REFUSED_STATUSES


class EffectUncertain(PermanentError):
    """An effect of a non-reentrant kind was started by an earlier attempt and its outcome is
    unknown (no receipt, and no ``reconcile`` hook that could tell): a person checks first."""


_UNKNOWN = object()


class Context(Durable):
    """Passed as the first argument of every handler. The durable calls (``sleep``,
    ``wait_for_event``, ``spawn``, ``join``, ``now``, ``uuid``, ``patched``) are its base's
    (``core/durable.py``). ``new_task``: how ``spawn`` builds a child (the App's enqueue
    checks); ``None`` outside a worker."""

    def __init__(
        self,
        attempt: Attempt,
        driver: Driver,
        new_task: Callable[[dict[str, Any]], NewTask] | None = None,
    ) -> None:
        self._attempt = attempt
        self._driver = driver
        self._new_task = new_task
        self._previous: Any = _UNKNOWN

    @property
    def task(self) -> Task:
        """The task as it was claimed (a snapshot)."""
        return self._attempt.task

    @property
    def task_id(self) -> str:
        return self._attempt.task.id

    @property
    def attempt(self) -> int:
        """This attempt's number (from 1): the fencing token of every write it makes."""
        return self._attempt.number

    @property
    def payload(self) -> Any:
        return self._attempt.task.payload

    @property
    def spec(self) -> KindSpec:
        """The kind's settings this attempt runs under (what the worker decides its outcome
        by: ``core.decide``)."""
        return self._attempt.spec

    @property
    def previous_result(self) -> Any:
        """In a sequential workflow (``enqueue_workflow(..., sequential=True)``): the result of
        the child before this one (None for the first child, and outside a chain). Read from
        the store when first asked."""
        if self._previous is _UNKNOWN:
            with self._driver.transaction(write=False) as tx:
                row = self._driver.task_get(tx, self._attempt.task_id)
                after = None if row is None else row.get("after_id")
                before = None if after is None else self._driver.task_get(tx, after)
            self._previous = None if before is None else before.get("result")
        return self._previous

    @property
    def cancel_requested(self) -> bool:
        """Whether a cancel was seen so far (by a renewal or a boundary check)."""
        return self._attempt.cancel_seen

    def _ensure_held(self) -> None:
        if self._attempt.timed_out:
            raise LeaseLost(f"attempt {self.attempt} of task {self.task_id} ran past its timeout")
        if self._attempt.lost:
            raise LeaseLost(
                f"attempt {self.attempt} of task {self.task_id} lost its lease: "
                f"{self._attempt.lost_why}"
            )

    def check_cancelled(self) -> None:
        """The explicit cancellation boundary: raises ``Cancelled`` if a cancel was requested
        and no effect of this task is confirmed yet (once one is, the task is past the point
        of no return and runs to its end); ``LeaseLost`` if this attempt no longer holds it."""
        self._checked_now(clock=False)

    def _checked_now(self, *, clock: bool) -> datetime | None:
        """``check_cancelled``, and with ``clock`` the database's time read with it (a durable
        sleep needs both: ``Driver.durable_look``, one round trip on PostgreSQL)."""
        self._ensure_held()
        row, now, steps = self._driver.durable_look(
            id=self._attempt.task_id, clock=clock, steps=self._attempt.steps is None
        )
        if steps is not None:
            self._attempt.steps = {r["name"]: r for r in steps}
        if now is not None:
            self._attempt.clock_seen = now
        if (
            row is None
            or row["state"] not in (State.LEASED, State.CANCEL_REQUESTED)
            or row["lease_owner"] != self._attempt.owner
            or row["attempts"] != self._attempt.number
            or not row["lease_valid"]
        ):
            self._attempt.mark_lost("the task is no longer held by this attempt")
            self._ensure_held()
        if row is not None and row["state"] == State.CANCEL_REQUESTED:
            self._attempt.cancel_seen = True
            if not self._attempt.effect_confirmed:
                raise Cancelled(f"task {self.task_id}: cancel requested")
        return now

    # -- steps and effects -----------------------------------------------------------------------
    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` once per task: a confirmed step returns its stored JSON result without
        running again, so a retry resumes after the last confirmed step. ``fn`` must be a
        plain function; an ``async def`` one goes to ``await ctx.astep(name, fn)``."""
        _refuse_coroutine(fn, "step", "astep")
        done, result = self._step_begin(name)
        if done:
            return result
        order = self._attempt.calls
        result = fn()
        _refuse_awaitable(result, "step", "astep")
        self._confirm(name, result, effect_key=None, order=order)
        return result

    async def astep(self, name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """``step`` for an ``async def`` handler: ``await ctx.astep(name, async_fn)`` awaits
        ``async_fn()`` once per task and stores its JSON result."""
        done, result = self._step_begin(name)
        if done:
            return result
        order = self._attempt.calls
        result = await _awaited(fn(), "astep", "step")
        self._confirm(name, result, effect_key=None, order=order)
        return result

    def _step_begin(self, name: str) -> tuple[bool, Any]:
        """The checks before a step runs: ``(True, result)`` when it is confirmed already."""
        _check_name(name)
        self.check_cancelled()
        self._call("step", name)
        row = self._steps().get(name)
        if row is not None:
            if row["is_effect"]:
                raise ValueError(f"{name!r} is an effect of this task, not a step")
            if row["status"] == "confirmed":
                return True, row["result"]
        return False, None

    def effect(self, name: str, fn: Callable[[str], Any]) -> Any:
        """Cross to the outside world once: ``fn(effect_key)`` gets the stable key
        ``<task id>/<name>`` to pass on as the provider's idempotency key. An intent is
        recorded before the call and the receipt (``fn``'s JSON result) after it; an earlier
        attempt's unconfirmed intent is reconciled (the kind's ``reconcile`` hook) before any
        repeat. ``fn`` raising a ``TransientError``/``PermanentError``, or an exception that
        carries an HTTP status of 400-499 or 503, means the provider refused (nothing
        happened: the intent is recorded as ``refused`` and a retry calls again); any other
        exception (a timeout, a dropped connection, 500/502/504) leaves it uncertain. ``fn``
        must be a plain function; an ``async def`` one goes to ``await ctx.aeffect(...)``."""
        _refuse_coroutine(fn, "effect", "aeffect")
        done, key, receipt = self._effect_begin(name)
        if done:
            return receipt
        order = self._attempt.calls
        try:
            receipt = fn(key)
        except BaseException as exc:
            self._effect_failed(name, exc)
            raise
        if inspect.isawaitable(receipt):  # its coroutine never ran: nothing happened
            self._effect_forget(name)
            _refuse_awaitable(receipt, "effect", "aeffect")
        self._confirm(name, receipt, effect_key=key, order=order)
        return receipt

    async def aeffect(self, name: str, fn: Callable[[str], Awaitable[Any]]) -> Any:
        """``effect`` for an ``async def`` handler: ``await ctx.aeffect(name, async_fn)``
        awaits ``async_fn(effect_key)`` at most once per confirmed receipt, with the same
        intent, receipt and reconciliation rules."""
        done, key, receipt = self._effect_begin(name)
        if done:
            return receipt
        order = self._attempt.calls
        try:
            receipt = await _awaited(fn(key), "aeffect", "effect")
        except BaseException as exc:
            self._effect_failed(name, exc)
            raise
        self._confirm(name, receipt, effect_key=key, order=order)
        return receipt

    def _effect_begin(self, name: str) -> tuple[bool, str, Any]:
        """Everything before the effect's call: ``(True, key, receipt)`` when it is confirmed
        (or reconciled) already, else the intent is recorded and ``(False, key, None)``."""
        _check_name(name)
        self.check_cancelled()
        key = f"{self.task_id}/{name}"
        row = self._steps().get(name)
        self._call("effect", name)
        if row is not None and not row["is_effect"]:
            raise ValueError(f"{name!r} is a step of this task, not an effect")
        if row is not None and row["status"] == "confirmed":
            return True, key, row["result"]
        if row is not None and row["status"] == "intent":  # started earlier, outcome unknown
            found = self._reconcile(key)
            if found is not None and found is not _UNKNOWN:
                self._confirm(name, found, effect_key=key)
                return True, key, found
            if found is _UNKNOWN and not self._attempt.spec.reentrant:
                raise EffectUncertain(
                    f"effect {key} was started by attempt {row['attempt']} and its outcome is "
                    "unknown; check the provider, then replay or force the task",
                    category="unclassified",
                )
        order = self._attempt.calls
        self._write(
            self._driver.effect_intent, {"name": name, "effect_key": key, "call_order": order}
        )
        self._steps()[name] = {
            "name": name,
            "is_effect": True,
            "status": "intent",
            "attempt": self.attempt,
            "result": None,
            "record": "effect",
            "call_order": order,
        }
        return False, key, None

    def _effect_failed(self, name: str, exc: BaseException) -> None:
        """The effect's call raised: a refusal is recorded on the intent (nothing happened,
        the next attempt calls again), anything else notes the error on it (the outcome is
        unknown)."""
        refused = refusal(exc)
        with self._driver.transaction() as tx:
            note = self._driver.effect_refuse if refused else self._driver.effect_note_error
            note(
                tx,
                id=self._attempt.task_id,
                name=name,
                error=error_text(exc),  # bounded, a NUL kept as an escape
            )
        if refused:
            self._steps()[name]["status"] = "refused"

    def _effect_forget(self, name: str) -> None:
        with self._driver.transaction() as tx:
            self._driver.effect_forget(tx, id=self._attempt.task_id, name=name)
        del self._steps()[name]

    def _reconcile(self, key: str) -> Any:
        """``reconcile(key)``: the receipt if it happened, ``None`` if it provably did not;
        no hook, or a hook that raises, means unknown."""
        hook = self._attempt.spec.reconcile
        if hook is None:
            return _UNKNOWN
        try:
            return hook(key)
        except Exception:
            return _UNKNOWN

    def _steps(self) -> dict[str, dict[str, Any]]:
        if self._attempt.steps is None:
            _, _, steps = self._driver.durable_look(
                id=self._attempt.task_id, clock=False, steps=True
            )
            self._attempt.steps = {r["name"]: r for r in steps or ()}
        return self._attempt.steps

    def _confirm(
        self, name: str, result: Any, *, effect_key: str | None, order: int | None = None
    ) -> None:
        text, _ = payloads.encode(result, DEFAULT_MAX_PAYLOAD)
        order = self._attempt.calls if order is None else order
        self._write(
            self._driver.step_confirm,
            {
                "name": name,
                "effect_key": effect_key,
                "is_effect": effect_key is not None,
                "result": text,
                "call_order": order,
            },
        )
        self._steps()[name] = {
            "name": name,
            "is_effect": effect_key is not None,
            "status": "confirmed",
            "attempt": self.attempt,
            "result": result,
            "record": "step" if effect_key is None else "effect",
            "call_order": order,
        }

    def _write(
        self, write: Callable[[Tx, dict[str, Any]], Row | None], params: dict[str, Any]
    ) -> None:
        """A holder-conditional write: nothing is written once the lease is lost."""
        self._ensure_held()
        with self._driver.transaction() as tx:
            row = write(
                tx,
                {
                    "id": self._attempt.task_id,
                    "owner": self._attempt.owner,
                    "attempt": self._attempt.number,
                    **params,
                },
            )
        if row is None:
            self._attempt.mark_lost("the task is no longer held by this attempt")
            self._ensure_held()

    # -- receipts and the outbox -------------------------------------------------------------
    def await_receipt(self, receipt_id: str, timeout: float) -> None:
        """When the handler returns, release the lease and wait in ``awaiting_receipt`` for
        ``app.confirm_receipt`` (deadline: ``timeout`` seconds, by the database clock)."""
        if isinstance(receipt_id, bool) or not isinstance(receipt_id, str | int):
            raise ValueError("await_receipt needs a non-empty receipt id")
        if not str(receipt_id) or not timeout > 0:
            raise ValueError("await_receipt needs a receipt id and a positive timeout")
        validate.filter_text(str(receipt_id), "the receipt id")  # confirm_receipt's bound
        # a deadline past what either store can hold as a time: at most 100 years
        timeout = validate.seconds(timeout, "the receipt timeout", positive=True)
        self._ensure_held()
        self._attempt.pending_receipt = (str(receipt_id), float(timeout))

    @property
    def awaited_receipt(self) -> str | None:
        """The receipt id this attempt waits for once its handler returns (``await_receipt``),
        or ``None``: then the return ends the task, else it waits in ``awaiting_receipt``."""
        pending = self._attempt.pending_receipt
        return None if pending is None else pending[0]

    def emit(self, topic: str, payload: Any = None) -> None:
        """Queue an outbox message; it commits with the completing transition (or never) and
        is delivered after the commit, at least once, to the sinks of ``topic``."""
        _check_name(topic)
        text, _ = payloads.encode(payload, DEFAULT_MAX_PAYLOAD)
        self._ensure_held()
        self._attempt.outbox.append((topic, text))

    def extend(self, seconds: float) -> None:
        """Renew the lease for ``seconds`` from now (database time); later automatic renewals
        keep that length. Raises ``LeaseLost`` when the renewal is refused."""
        if not seconds > 0 or not seconds <= validate.MAX_DURATION:
            raise ValueError("extend() needs a positive number of seconds, at most 100 years")
        self._ensure_held()
        with self._driver.transaction() as tx:
            row = self._driver.lease_extend(
                tx, self._attempt.task_id, self._attempt.owner, self._attempt.number, seconds
            )
        if row is None:
            self._attempt.mark_lost("lease renewal refused")
            self._ensure_held()
        assert row is not None
        now = time.monotonic()
        with self._attempt.lock:
            self._attempt.lease_seconds = float(seconds)
            self._attempt.lease_deadline = now + seconds
            self._attempt.next_renew = now + seconds / 3.0
            if row["state"] == State.CANCEL_REQUESTED:
                self._attempt.cancel_seen = True


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name or len(name) > 200 or "/" in name:
        raise ValueError(
            "step, effect and topic names must be non-empty text of at most 200 "
            "characters, without '/'"
        )
    validate.text(name, f"the step, effect or topic name {name!r}")


def _refuse_coroutine(fn: Any, sync: str, name: str) -> None:
    """An ``async def`` function handed to ``ctx.step``/``ctx.effect``: a ``TypeError`` naming
    the async method, before anything is stored (its coroutine would never run)."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    ):
        raise TypeError(
            f"ctx.{sync}() was given an async function ({_name(fn)}): "
            f"use `await ctx.{name}(name, fn)` in an async def handler"
        )


def _refuse_awaitable(value: Any, sync: str, name: str) -> None:
    """``fn`` returned a coroutine (a lambda around an async call): refused, never stored."""
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()  # it will never be awaited: no "never awaited" warning
        raise TypeError(
            f"the function given to ctx.{sync}() returned an awaitable: "
            f"use `await ctx.{name}(name, fn)` in an async def handler"
        )


async def _awaited(value: Any, name: str, sync: str) -> Any:
    if not inspect.isawaitable(value):
        raise TypeError(
            f"ctx.{name}() needs an async function (its call must return an awaitable); "
            f"for a plain function use ctx.{sync}()"
        )
    return await value


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)
