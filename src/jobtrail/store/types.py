"""The small values that cross the driver seam: ``Row``, the ``Tx`` protocol, ``NewTask``,
``Claim`` (what a claim asks for), ``Move`` (one guarded state change), and JSON encoding."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from ..model.controls import Controls
from ..model.machine import State

Row = dict[str, Any]
T = TypeVar("T")

#: A time as a statement takes it: what ``Driver.encode_time`` makes of an aware datetime
#: (epoch seconds on SQLite, the datetime itself on PostgreSQL).
Stamp = float | datetime
#: Task ids as a statement's array parameter: what ``Driver._list`` makes of them (a JSON
#: array's text on SQLite, the list itself on PostgreSQL). Statements that read a JSON array
#: on both dialects take its text (``str``) instead.
IdList = str | list[int]
#: Names (outbox topics) as a statement's array parameter, as ``Driver._list`` makes them.
NameList = str | list[str]

#: Columns (and query aliases) that hold times; drivers hand them out as aware UTC datetimes.
TIME_COLUMNS = frozenset(
    {
        "run_at",
        "wait_until",
        "lease_expires_at",
        "receipt_deadline",
        "budget_started_at",
        "created_at",
        "updated_at",
        "finished_at",
        "dismissed_at",
        "at",
        "now",
        "db_now",
        "confirmed_at",
        "next_at",
        "locked_until",
        "delivered_at",
        "paused_at",
        "tokens_at",
        "ramp_started_at",
        "rate_until",
        "oldest",
        "oldest_due",
        "first_failure",
        "last_failure",
        "first_failure_at",
        "log_first_failure",
        "heartbeat_at",
        "batch_at",
        "started_at",
        "last_seen_at",
        "superseded_at",
        "debounce_until",
        "unique_until",
        "expires_at",
    }
)


class Tx(Protocol):
    """One open transaction. ``one``/``all``/``run`` execute a named query of the dialect."""

    def one(self, name: str, params: dict[str, Any] | None = None) -> Row | None: ...

    def all(self, name: str, params: dict[str, Any] | None = None) -> list[Row]: ...

    def run(self, name: str, params: dict[str, Any] | None = None) -> int: ...

    def many(self, name: str, params: Sequence[dict[str, Any]]) -> None: ...


@dataclass(slots=True)  # not frozen: built per enqueued task, and frozen setup costs
class NewTask:
    kind: str
    queue: str
    tenant: str
    payload_json: str
    payload_hash: str
    idempotency_key: str | None
    priority: int
    max_attempts: int
    lease_seconds: float
    reentrant: bool
    run_at: datetime | None
    delay: float | None
    parent_id: int | None
    state: State = State.QUEUED
    actor: str = "caller"
    data: dict[str, Any] = field(default_factory=dict)
    #: debounce, uniqueness window, expiry (model/controls.py); None for a plain task
    controls: Controls | None = None
    #: serial per key: at most ``concurrency_limit`` tasks of (queue, tenant, key) leased
    concurrency_key: str | None = None
    concurrency_limit: int | None = None

    def with_payload(self, payload_json: str, payload_hash: str) -> NewTask:
        """This task with another payload (its JSON text and hash): a bulk enqueue builds its
        items of one kind from the kind's task this way, checked once."""
        return NewTask(
            self.kind,
            self.queue,
            self.tenant,
            payload_json,
            payload_hash,
            self.idempotency_key,
            self.priority,
            self.max_attempts,
            self.lease_seconds,
            self.reentrant,
            self.run_at,
            self.delay,
            self.parent_id,
            self.state,
            self.actor,
            self.data,
            controls=self.controls,
            concurrency_key=self.concurrency_key,
            concurrency_limit=self.concurrency_limit,
        )


def loads_payload(text: str) -> Any:
    """A payload's JSON text decoded (most payloads are ``{}`` or none)."""
    if text == "{}":
        return {}
    return None if text == "null" else json.loads(text)


#: What a new task row holds in the columns its insert does not set (``Task`` fields of the
#: same names take the same values: ``app._task_from_new``).
NEW_TASK_DEFAULTS: dict[str, Any] = {
    "attempts": 0,
    "lease_owner": None,
    "lease_expires_at": None,
    "last_reason": "enqueued",
    "last_error_category": None,
    "last_error": None,
    "replay_count": 0,
    "receipt_id": None,
    "receipt_deadline": None,
    "finished_at": None,
    "result": None,
}


def inserted_row(
    new: NewTask, task_id: int, created_at: datetime, run_at: datetime, payload: Any
) -> Row:
    """The row a task insert stores for ``new``, from what the database generated (the id, the
    creation time, the due time): every other column is the value the insert wrote or the
    column's default, so the row need not be read back (``RETURNING *`` costs more than the
    insert on a bulk enqueue). ``payload`` is ``new.payload_json`` decoded (``loads_payload``:
    equal to what the store reads back; PostgreSQL's jsonb reads an object's keys back in its
    own order, shortest first)."""
    return {
        **NEW_TASK_DEFAULTS,
        "id": task_id,
        "kind": new.kind,
        "queue": new.queue,
        "tenant": new.tenant,
        "state": new.state,  # a StrEnum: the text itself
        "payload": payload,
        "payload_hash": new.payload_hash,
        "idempotency_key": new.idempotency_key,
        "priority": new.priority,
        "max_attempts": new.max_attempts,
        "lease_seconds": new.lease_seconds,
        "reentrant": new.reentrant,
        "run_at": run_at,
        "parent_id": new.parent_id,
        "seq": 1,
        "budget_started_at": created_at,
        "created_at": created_at,
        "updated_at": created_at,
        "dismissed_at": None,
        "after_id": None,
    }


@dataclass(frozen=True)
class Claim:
    owner: str
    queues: list[str]
    kinds: list[str]
    limit: int
    version: str | None
    #: Leave queues with concurrency limits alone (the caller claims them on their own).
    skip_limited: bool = False
    #: Filled by the claim: seconds until a rate-limited queue of this claim that had due work
    #: but no token has its next slot (so the worker looks again then, not a poll later).
    slots: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Move:
    """One conditional update along one edge, with the transition it appends.

    Guards: the task must be in ``from_state``; with ``owner`` it must also be held by that owner
    at ``attempt`` with an unexpired lease (worker edges); with ``expired_owner`` the same holder
    whose lease has expired (sweeper edges).
    """

    task_id: int
    from_state: State
    to_state: State
    reason: str
    actor: str
    owner: str | None = None
    expired_owner: str | None = None
    attempt: int | None = None
    run_in: float | None = None
    reset_attempts: bool = False
    uncount_attempt: bool = False
    replay: bool = False
    set_error: bool = False
    error_category: str | None = None
    error: str | None = None
    receipt_id: str | None = None
    receipt_in: float | None = None
    note: str | None = None
    corrects: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    #: The handler's return value as JSON text, stored with a success (``set_result``;
    #: ``None`` for a handler that returned nothing)
    set_result: bool = False
    result: str | None = None
    #: A failed attempt's formatted traceback and its exception's class path
    traceback: str | None = None
    error_class: str | None = None

    @property
    def annotation(self) -> bool:
        return self.from_state == self.to_state and self.reason != "manual_fix"


#: json.dumps with these arguments would build a new encoder on every call
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def claimed_rows(rows: list[Row]) -> list[Row]:
    """The claimed rows of an unlimited claim's result (which is one row of NULLs when it
    claimed nothing), without the columns that are not the task's."""
    out = [r for r in rows if r["id"] is not None]
    for row in out:
        for extra in ("fair", "completed_ids", "notified"):
            row.pop(extra, None)
    return out


def dumps(value: Any) -> str:
    """Compact JSON text (``json.dumps`` with ``ensure_ascii=False``, no spaces, no NaN)."""
    if type(value) is dict and not value:
        return "{}"  # most transitions carry no data
    return _ENCODER.encode(value)


def iter_chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
