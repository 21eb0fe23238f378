"""Read-only snapshots handed to users: ``Task``, ``Transition``, ``CancelResult``,
``Worker``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .machine import STATE_OF, State


@dataclass(frozen=True)
class Task:
    """A snapshot of one task row; it does not follow the row: call ``app.get`` again."""

    id: str
    kind: str
    queue: str
    tenant: str
    state: State
    payload: Any
    priority: int
    attempts: int
    max_attempts: int
    run_at: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    last_reason: str | None
    last_error_category: str | None
    last_error: str | None
    replay_count: int
    receipt_id: str | None
    parent_id: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None
    idempotency_key: str | None = None
    receipt_deadline: datetime | None = None
    dismissed: bool = False
    created: bool = False
    steps: dict[str, Any] = field(default_factory=dict)
    #: The handler's return value (decoded JSON), stored with its success; ``None``
    #: when the handler returned nothing or the task has not succeeded
    result: Any = None
    #: What the task's suspended handler waits for, or ``None`` when it is not suspended:
    #: ``{"kind": "sleep", "name": ..., "until": ...}``, ``{"kind": "event", "key": ...,
    #: "deadline": ... or None}`` or ``{"kind": "children", "ids": [...], "deadline": ...}``
    #: (times as datetimes; ``to_dict`` writes them in ISO 8601)
    waiting_for: dict[str, Any] | None = None
    #: This enqueue folded into the open task of its ``debounce_key`` (``created`` False)
    debounced: bool = False
    #: ``expires_in``/``expires_at``: still queued then, it is cancelled (``expired``)
    expires_at: datetime | None = None

    @property
    def terminal(self) -> bool:
        return self.state.terminal

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with these field names (times as ISO 8601 UTC)."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, datetime):
                value = iso(value)
            elif name == "waiting_for" and value is not None:
                value = {k: iso(v) if isinstance(v, datetime) else v for k, v in value.items()}
            elif isinstance(value, State):
                value = value.value
            out[name] = value
        return out


def task_from_fields(fields: dict[str, Any]) -> Task:
    """``Task(**fields)`` without the frozen dataclass's ``object.__setattr__`` per field (a
    tenth of the time; tasks are built per row read, in bulk by ``enqueue_many`` and
    ``list``). ``fields`` must hold every field of ``Task`` (checked by the unit tests); the
    result is the same object ``Task(**fields)`` makes (``Task`` has no ``__post_init__``)."""
    task = object.__new__(Task)
    task.__dict__.update(fields)
    return task


@dataclass(frozen=True)
class Transition:
    """One row of the append-only transition log."""

    seq: int
    from_state: State | None
    to_state: State
    reason: str
    error_category: str | None
    error: str | None
    actor: str
    attempt: int
    at: datetime
    note: str | None = None
    corrects: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    #: A failed attempt's formatted traceback (frames only, the last 16 KiB) and its
    #: exception's class path (``builtins.KeyError``); ``None`` on every other transition
    traceback: str | None = None
    error_class: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "from_state": self.from_state.value if self.from_state else None,
            "to_state": self.to_state.value,
            "reason": self.reason,
            "error_category": self.error_category,
            "error": self.error,
            "actor": self.actor,
            "attempt": self.attempt,
            "at": iso(self.at),
            "note": self.note,
            "corrects": self.corrects,
            "data": self.data,
            "traceback": self.traceback,
            "error_class": self.error_class,
        }


@dataclass(frozen=True)
class CancelResult:
    """What ``app.cancel`` did: ``outcome`` is ``cancelled``, ``cancel_requested``,
    ``already_terminal`` or ``too_late``; ``state`` and ``reason`` are the task's afterwards."""

    task_id: str
    outcome: str
    state: State
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "outcome": self.outcome,
            "state": self.state.value,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Worker:
    """A live worker process as its heartbeat row shows it (``app.workers()``).

    Not the worker itself (``jobtrail.worker.Worker`` runs one): a snapshot of one, read from
    the store. ``id`` is its owner id ``host:pid:boot``, the ``lease_owner`` of the tasks it
    holds; ``queues`` and ``kinds`` are what it claims from; ``last_seen_at`` its latest
    heartbeat (every few seconds while it runs); ``tasks`` the ids of the tasks leased to it
    now (for a tenant's reader, only that tenant's)."""

    id: str
    host: str
    pid: int
    version: str | None
    queues: list[str]
    kinds: list[str]
    concurrency: int
    started_at: datetime
    last_seen_at: datetime
    tasks: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (times as ISO 8601 UTC)."""
        return {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "version": self.version,
            "queues": list(self.queues),
            "kinds": list(self.kinds),
            "concurrency": self.concurrency,
            "started_at": iso(self.started_at),
            "last_seen_at": iso(self.last_seen_at),
            "tasks": list(self.tasks),
        }


def iso(value: datetime) -> str:
    """``2026-11-29T10:00:00.120Z``: UTC with milliseconds, the form every output uses."""
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def task_from_row(
    row: Mapping[str, Any], *, created: bool = False, steps: dict[str, Any] | None = None
) -> Task:
    """The ``Task`` snapshot of a task row as the store returns it (every reader: the facade,
    the worker, the dashboard)."""
    parent_id = row["parent_id"]
    return task_from_fields(
        {
            "id": str(row["id"]),
            "kind": row["kind"],
            "queue": row["queue"],
            "tenant": row["tenant"],
            "state": STATE_OF[row["state"]],
            "payload": row["payload"],
            "priority": row["priority"],
            "attempts": row["attempts"],
            "max_attempts": row["max_attempts"],
            "run_at": row["run_at"],
            "lease_owner": row["lease_owner"],
            "lease_expires_at": row["lease_expires_at"],
            "last_reason": row["last_reason"],
            "last_error_category": row["last_error_category"],
            "last_error": row["last_error"],
            "replay_count": row["replay_count"],
            "receipt_id": row["receipt_id"],
            "parent_id": str(parent_id) if parent_id is not None else None,
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "finished_at": row["finished_at"],
            "idempotency_key": row["idempotency_key"],
            "receipt_deadline": row["receipt_deadline"],
            "dismissed": row["dismissed_at"] is not None,
            "created": created,
            "steps": steps or {},
            "result": row.get("result"),
            "waiting_for": waiting_for(row),
            "debounced": row.get("debounced", False),
            "expires_at": row.get("expires_at"),
        }
    )


#: The reasons a task's handler suspends with, by the wait kind they record.
_SUSPENDED = {
    ("queued", "sleeping"),
    ("waiting", "waiting_for_event"),
    ("waiting", "waiting_for_children"),
}


def waiting_for(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """``Task.waiting_for`` of a task row: what its suspended handler waits for, or ``None``
    (the row's ``wait_*`` columns, migration 0022, hold the latest suspension; they count only
    while the state and reason still say the handler is suspended)."""
    kind = row.get("wait_kind")
    if kind is None or (row["state"], row["last_reason"]) not in _SUSPENDED:
        return None
    if kind == "sleep":
        return {"kind": "sleep", "name": row["wait_name"], "until": row["wait_until"]}
    if kind == "event":
        return {"kind": "event", "key": row["wait_key"], "deadline": row["wait_until"]}
    return {
        "kind": "children",
        "ids": [str(i) for i in row.get("wait_ids") or []],
        "deadline": row["wait_until"],
    }
