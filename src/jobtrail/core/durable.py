"""Durable handlers, the handler's side: ``ctx.sleep``, ``ctx.wait_for_event``, ``ctx.spawn``,
``ctx.join``, ``ctx.now``, ``ctx.uuid``, ``ctx.patched`` and the determinism guard.

A handler that must wait raises ``Suspend`` (a ``BaseException``, so a handler's own
``except Exception`` does not swallow it); the worker then releases the lease and moves the task
``leased → queued`` (``sleeping``) or ``leased → waiting`` (``waiting_for_event``,
``waiting_for_children``) without counting the attempt (``core/suspension.py``). On resume the
handler runs again from the top: every recorded call returns what it recorded, and a wait that is
satisfied returns its outcome at once.

Every recorded call (steps and effects too) takes the next number of the run's call order; once
a task's history holds a durable record, a resumed run whose calls come in another order fails
permanently (``NonDeterministic``), naming the first divergence.
"""

from __future__ import annotations

import uuid as uuidlib
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..model import validate
from ..model.enqueue_options import refuse_unknown
from ..model.errors import (
    ChildFailed,
    InvalidCall,
    NonDeterministic,
    UnknownKind,
    WaitTimedOut,
)
from ..model.kinds import DEFAULT_MAX_PAYLOAD
from ..model.machine import TERMINAL, State
from ..model.models import iso
from ..model.timeparse import parse_time
from . import payloads

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..store.base import Driver, NewTask, Row, Tx
    from .context import Attempt

#: The records of a durable handler besides steps and effects: once a task's history holds one,
#: the determinism guard compares a resumed run's calls with the recorded order.
DURABLE_RECORDS = frozenset({"sleep", "event", "join", "spawn", "now", "uuid", "patched"})
#: The longest event key (the same bound as an idempotency key).
MAX_EVENT_KEY = 255
#: What each record is called in a divergence message.
_SHOWN = {"event": "wait", "join": "join", "patched": "patch"}


class Suspend(BaseException):  # noqa: N818 - not an error: the handler's run pauses here
    """Raised by a durable call that must wait: the worker suspends the task (``kind``
    ``sleep``, ``event`` or ``children``; ``name``: the record; ``key``: the event key;
    ``until``: the wake time or deadline; ``ids``: the joined children)."""

    def __init__(
        self,
        kind: str,
        name: str,
        *,
        key: str | None = None,
        until: datetime | None = None,
        ids: list[int] | None = None,
    ) -> None:
        super().__init__(f"suspended: {kind} {name}")
        self.kind = kind
        self.name = name
        self.key = key
        self.until = until
        self.ids = ids


def record_of(row: Row | dict[str, Any]) -> str:
    """A step row's record kind (rows from before migration 0022 read as step or effect)."""
    record = row.get("record") or "step"
    if record == "step" and row.get("is_effect"):
        return "effect"
    return str(record)


def shown_name(name: str) -> str:
    """A record's name as the handler gave it (``event/k`` is the wait for ``k``)."""
    return name.split("/", 1)[1] if "/" in name else name


def describe(record: str, name: str) -> str:
    """``step 'a'``, ``wait 'verified:7'``: a recorded call for a divergence message."""
    return f"{_SHOWN.get(record, record)} {shown_name(name)!r}"


def check_name(name: Any, what: str) -> str:
    """A step, sleep or spawn name: non-empty text of at most 200 characters without '/'."""
    if not isinstance(name, str) or not name or len(name) > 200 or "/" in name:
        raise InvalidCall(
            f"{what} name must be non-empty text of at most 200 characters without '/', "
            f"not {name!r}"
        )
    try:
        validate.text(name, f"the {what} name {name!r}")
    except ValueError as exc:
        raise InvalidCall(str(exc)) from None
    return name


def check_event_key(key: Any) -> str:
    """An event key: non-empty text of at most ``MAX_EVENT_KEY`` characters (``InvalidCall``,
    a ``ValueError``, naming what is wrong)."""
    if not isinstance(key, str):
        raise InvalidCall(f"the event key must be text, not {type(key).__name__}")
    if not key:
        raise InvalidCall("the event key is empty")
    if len(key) > MAX_EVENT_KEY:
        raise InvalidCall(f"the event key is longer than {MAX_EVENT_KEY} characters")
    try:
        validate.text(key, "the event key")
    except ValueError as exc:
        raise InvalidCall(str(exc)) from None
    return key


def check_duration(value: Any, what: str, *, positive: bool = False) -> float:
    """A number of seconds from 0 (above 0 when ``positive``) to 100 years: ``InvalidCall``
    for a negative, NaN, infinite or non-numeric one."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    try:
        return validate.seconds(value, what, positive=positive)
    except ValueError as exc:
        raise InvalidCall(str(exc)) from None


def _when(value: Any) -> datetime | None:
    if value is None:
        return None
    return parse_time(value, "time")


class Durable:
    """The durable calls of ``Context`` (its base): they use the context's attempt, driver and
    recorded steps."""

    _attempt: Attempt
    _driver: Driver
    _new_task: Callable[[dict[str, Any]], NewTask] | None

    if TYPE_CHECKING:

        def _steps(self) -> dict[str, dict[str, Any]]: ...

        def check_cancelled(self) -> None: ...

        def _checked_now(self, *, clock: bool) -> datetime | None: ...

        def _ensure_held(self) -> None: ...

        @property
        def task_id(self) -> str: ...

    # -- the call order and the determinism guard ----------------------------------------------
    def _by_order(self) -> dict[int, dict[str, Any]]:
        """The calls recorded by earlier runs, by their order (read once per run, before this
        run records anything)."""
        attempt = self._attempt
        if attempt.history is None:
            rows = self._steps().values()
            attempt.history = {r["call_order"]: r for r in rows if r.get("call_order") is not None}
            attempt.guarded = any(record_of(r) in DURABLE_RECORDS for r in rows)
        return attempt.history

    def _guarded(self) -> bool:
        """Whether this task's history holds a durable record (then its order is checked)."""
        self._by_order()
        return self._attempt.guarded

    def _call(self, record: str, name: str) -> int:
        """Take the next call number for ``record`` ``name``: ``InvalidCall`` when the name was
        used already in this run; ``NonDeterministic`` when the history recorded another call
        at this point."""
        attempt = self._attempt
        if name in attempt.names:
            raise InvalidCall(
                f"{describe(record, name)} is used twice in task {self.task_id}: "
                "names are unique within a task"
            )
        number = attempt.calls + 1
        if self._guarded():
            recorded = self._by_order().get(number)
            if recorded is not None and (record_of(recorded), recorded["name"]) != (record, name):
                was = describe(record_of(recorded), recorded["name"])
                now = (
                    repr(shown_name(name))
                    if record_of(recorded) == record
                    else describe(record, name)
                )
                raise NonDeterministic(
                    f"task {self.task_id} resumed in another order: expected {was}, got {now}",
                    category="invalid_input",
                )
            row = self._steps().get(name)
            order = None if row is None else row.get("call_order")
            if recorded is None and order is not None and order != number:
                raise NonDeterministic(
                    f"task {self.task_id} resumed in another order: {describe(record, name)} "
                    f"was call {order}, now call {number}",
                    category="invalid_input",
                )
        attempt.calls = number
        attempt.names.add(name)
        return number

    def _put(
        self,
        name: str,
        record: str,
        status: str,
        result: Any,
        order: int,
        tx: Tx | None = None,
    ) -> None:
        """Write a durable record under the holder guard (``LeaseLost`` once not held)."""
        self._ensure_held()
        text, _ = payloads.encode(result, DEFAULT_MAX_PAYLOAD)
        params = {
            "id": self._attempt.task_id,
            "owner": self._attempt.owner,
            "attempt": self._attempt.number,
            "name": name,
            "record": record,
            "status": status,
            "result": text,
            "call_order": order,
        }
        if tx is None:
            with self._driver.transaction() as own:
                row = self._driver.durable_record_put(own, params)
        else:
            row = self._driver.durable_record_put(tx, params)
        if row is None:
            self._attempt.mark_lost("the task is no longer held by this attempt")
            self._ensure_held()
        self._steps()[name] = {
            "name": name,
            "is_effect": False,
            "status": status,
            "attempt": self._attempt.number,
            "result": result,
            "record": record,
            "call_order": order,
        }

    # -- sleep -----------------------------------------------------------------------------------
    def sleep(self, name: str, seconds: float | timedelta) -> None:
        """Suspend for ``seconds``: the task goes back to ``queued`` (``sleeping``) due at the
        wake time, no worker slot or lease held, the attempt not counted. The wake time is
        recorded under ``name`` (unique within the task); once resumed the call returns at
        once."""
        check_name(name, "sleep")
        delay = check_duration(seconds, "the sleep's seconds")
        self._sleep(name, lambda now: now + timedelta(seconds=delay))

    def sleep_until(self, name: str, when: datetime | str) -> None:
        """``sleep`` until ``when`` (an aware datetime or ISO 8601 text); a time past returns
        at once (recorded all the same)."""
        check_name(name, "sleep")
        try:
            until = parse_time(when, "the sleep's time")
        except (TypeError, ValueError) as exc:
            raise InvalidCall(str(exc)) from None
        self._sleep(name, lambda now: until)

    async def asleep(self, name: str, seconds: float | timedelta) -> None:
        """``sleep`` for an ``async def`` handler."""
        self.sleep(name, seconds)

    async def asleep_until(self, name: str, when: datetime | str) -> None:
        """``sleep_until`` for an ``async def`` handler."""
        self.sleep_until(name, when)

    def _sleep(self, name: str, until_of: Callable[[datetime], datetime]) -> None:
        if self._recorded_past(name):
            return  # recorded, and its wake time passed: returns at once, no store read
        now = self._checked_now(clock=True)
        assert now is not None
        order = self._call("sleep", name)
        row = self._steps().get(name)
        if row is None:
            until = until_of(now)
            if (until - now).total_seconds() > validate.MAX_DURATION:
                raise InvalidCall("a sleep may last at most 100 years (36525d)")
            self._put(name, "sleep", "confirmed", {"until": iso(until)}, order)
        else:
            until = parse_time(row["result"]["until"], "until")
        if now >= until:
            return
        raise Suspend("sleep", name, until=until)

    def _recorded_past(self, name: str) -> bool:
        """Whether the sleep ``name`` is recorded with a wake time at or before a database time
        this run has read (the clock only moves on): then it returns at once, taking its place
        in the call order, without a read of the store. Not a cancel boundary, as a call that
        returns at once is none: a cancel requested meanwhile is seen at the next step, effect,
        ``check_cancelled`` or suspension."""
        attempt = self._attempt
        row = None if attempt.steps is None else attempt.steps.get(name)
        seen = attempt.clock_seen
        if row is None or seen is None or record_of(row) != "sleep":
            return False
        if seen < parse_time(row["result"]["until"], "until"):
            return False
        self._ensure_held()
        self._call("sleep", name)
        return True

    # -- events ----------------------------------------------------------------------------------
    def wait_for_event(self, key: str, *, timeout: float | timedelta | None = None) -> Any:
        """The payload of the event ``key`` (in this task's tenant), sent before or after the
        wait began; until it is sent the task waits (``waiting``, ``waiting_for_event``) without
        a worker. Past ``timeout`` seconds the resumed call raises ``WaitTimedOut``."""
        check_event_key(key)
        span = None if timeout is None else check_duration(timeout, "timeout", positive=True)
        name = f"event/{key}"
        known = None if self._attempt.steps is None else self._attempt.steps.get(name)
        if known is None or known["status"] != "confirmed":
            self.check_cancelled()  # a wait that returns at once reads nothing: no boundary
        else:
            self._ensure_held()
        order = self._call("event", name)
        row = self._steps().get(name)
        if row is not None and row["status"] == "confirmed":
            outcome = row["result"] or {}
            if outcome.get("timed_out"):
                raise WaitTimedOut(f"the wait for event {key!r}")
            return outcome.get("payload")
        with self._driver.transaction(write=False) as tx:
            event = self._driver.durable_event_get(tx, tenant=self._attempt.task.tenant, key=key)
            now = self._driver.db_now(tx)
        if event is not None:
            self._put(name, "event", "confirmed", {"payload": event["payload"]}, order)
            return event["payload"]
        if row is None:
            deadline = None if span is None else now + timedelta(seconds=span)
            self._put(
                name,
                "event",
                "intent",
                {"key": key, "deadline": None if deadline is None else iso(deadline)},
                order,
            )
        else:
            deadline = _when((row["result"] or {}).get("deadline"))
        raise Suspend("event", name, key=key, until=deadline)

    async def await_event(self, key: str, *, timeout: float | timedelta | None = None) -> Any:
        """``wait_for_event`` for an ``async def`` handler."""
        return self.wait_for_event(key, timeout=timeout)

    # -- children --------------------------------------------------------------------------------
    def spawn(self, name: str, kind: str, payload: Any = None, **options: Any) -> str:
        """Enqueue a child of this task (``parent_id`` this task; the options of ``enqueue``)
        once per ``name``: a resumed handler gets the same child's id, never a second child.
        The child never settles this task by the workflow rule: ``join`` waits for it and this
        handler decides."""
        check_name(name, "spawn")
        try:
            refuse_unknown(options, "ctx.spawn")
        except TypeError as exc:
            raise InvalidCall(str(exc)) from None
        if "parent" in options:
            raise InvalidCall("ctx.spawn makes a child of this task: it takes no parent")
        self.check_cancelled()
        record = f"spawn/{name}"
        order = self._call("spawn", record)
        row = self._steps().get(record)
        if row is not None and row["status"] == "confirmed":
            return str(row["result"]["id"])
        if self._new_task is None:
            raise InvalidCall("ctx.spawn needs a worker's context")
        args = {"kind": kind, "payload": payload, "tenant": self._attempt.task.tenant}
        args.update(options, parent=self.task_id)
        try:
            new = self._new_task(args)
        except UnknownKind as exc:
            raise InvalidCall(f"ctx.spawn({name!r}): {exc}") from None
        except (TypeError, ValueError) as exc:
            raise InvalidCall(f"ctx.spawn({name!r}): {exc}") from None
        from . import transition  # the one transition path (imported late: it imports us)

        self._ensure_held()
        with self._driver.transaction() as tx:
            child, _ = transition.create(self._driver, tx, new)
            self._put(record, "spawn", "confirmed", {"id": child["id"], "kind": kind}, order, tx)
            self._driver.notify_queued(tx, new.queue)
        self._driver.wake()
        return str(child["id"])

    async def aspawn(self, name: str, kind: str, payload: Any = None, **options: Any) -> str:
        """``spawn`` for an ``async def`` handler."""
        return self.spawn(name, kind, payload, **options)

    def join(
        self, ids: list[str] | list[int], *, timeout: float | timedelta | None = None
    ) -> list[Any]:
        """The results of the children ``ids`` (spawned by this task), in the order given, once
        all have ended; until then the task waits (``waiting``, ``waiting_for_children``)
        without a worker. A child that ended ``dead`` or ``cancelled`` raises ``ChildFailed``;
        past ``timeout`` seconds the resumed call raises ``WaitTimedOut``."""
        wanted = _ids(ids)
        span = None if timeout is None else check_duration(timeout, "timeout", positive=True)
        self.check_cancelled()
        with self._driver.transaction(write=False) as tx:
            children = {
                c["id"]: c for c in self._driver.durable_children(tx, id=self._attempt.task_id)
            }
            now = self._driver.db_now(tx)
        strangers = [str(i) for i in wanted if i not in children]
        if strangers:
            raise InvalidCall(
                f"ctx.join: task {', '.join(strangers)} is not a child of task {self.task_id}"
            )
        name = f"join/{self._attempt.calls + 1}"
        order = self._call("join", name)
        row = self._steps().get(name)
        if (
            row is not None
            and row["status"] == "confirmed"
            and (row["result"] or {}).get("timed_out")
        ):
            raise WaitTimedOut(f"the join of {', '.join(map(str, wanted))}")
        if all(children[i]["state"] in TERMINAL for i in wanted):
            if row is None or row["status"] != "confirmed":
                self._put(name, "join", "confirmed", {"ids": wanted}, order)
            for i in wanted:
                child = children[i]
                if child["state"] != State.SUCCEEDED:
                    raise ChildFailed(str(i), State(child["state"]), child["last_reason"])
            return [children[i].get("result") for i in wanted]
        if row is None:
            deadline = None if span is None else now + timedelta(seconds=span)
            result = {"ids": wanted, "deadline": None if deadline is None else iso(deadline)}
            self._put(name, "join", "intent", result, order)
        else:
            deadline = _when((row["result"] or {}).get("deadline"))
        raise Suspend("children", name, ids=wanted, until=deadline)

    async def ajoin(
        self, ids: list[str] | list[int], *, timeout: float | timedelta | None = None
    ) -> list[Any]:
        """``join`` for an ``async def`` handler."""
        return self.join(ids, timeout=timeout)

    # -- recorded values -------------------------------------------------------------------------
    def now(self) -> datetime:
        """The database's time when this call was first made; the same on every resume."""
        name = f"now/{self._attempt.calls + 1}"
        order = self._call("now", name)
        row = self._steps().get(name)
        if row is not None:
            return parse_time(row["result"]["at"], "at")
        with self._driver.transaction() as tx:
            now = self._driver.db_now(tx)
            self._put(name, "now", "confirmed", {"at": iso(now)}, order, tx)
        return parse_time(iso(now), "at")  # what a resume reads back (milliseconds)

    def uuid(self) -> uuidlib.UUID:
        """A random UUID made when this call was first made; the same on every resume."""
        name = f"uuid/{self._attempt.calls + 1}"
        order = self._call("uuid", name)
        row = self._steps().get(name)
        if row is not None:
            return uuidlib.UUID(row["result"]["uuid"])
        value = uuidlib.uuid4()
        self._put(name, "uuid", "confirmed", {"uuid": str(value)}, order)
        return value

    def patched(self, name: str) -> bool:
        """Whether this task takes the new path at this point: true when it reaches the point
        for the first time (recorded), false when its history shows it passed here under code
        without the patch (the call then takes no place in the recorded order)."""
        check_name(name, "patch")
        record = f"patched/{name}"
        row = self._steps().get(record)
        if row is None and self._by_order().get(self._attempt.calls + 1) is not None:
            return False  # the old code recorded something else here
        order = self._call("patched", record)
        if row is None:
            self._put(record, "patched", "confirmed", {"patched": True}, order)
        return True


def _ids(ids: Any) -> list[int]:
    """The task ids a join names, as integers (``InvalidCall`` for anything else)."""
    if isinstance(ids, str | int) or not hasattr(ids, "__iter__"):
        raise InvalidCall("ctx.join takes a list of task ids")
    out: list[int] = []
    for value in ids:
        if isinstance(value, bool):
            raise InvalidCall(f"ctx.join: {value!r} is not a task id")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise InvalidCall(f"ctx.join: {value!r} is not a task id") from None
        if number in out:
            raise InvalidCall(f"ctx.join: task {number} is named twice")
        out.append(number)
    if not out:
        raise InvalidCall("ctx.join needs at least one task id")
    return out


def event_payload_text(payload: Any) -> str:
    """An event's payload as JSON text (``ValueError`` naming it when it is not JSON)."""
    try:
        text, _ = payloads.encode(payload, DEFAULT_MAX_PAYLOAD)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the event payload is not JSON: {exc}") from None
    return text


__all__ = [
    "DURABLE_RECORDS",
    "Durable",
    "Suspend",
    "check_duration",
    "check_event_key",
    "event_payload_text",
]
