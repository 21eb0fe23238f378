"""``task_from_fields`` builds ``Task`` rows in bulk without the frozen dataclass's
``__init__``: it must make exactly what ``Task(**fields)`` makes, from every field."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, datetime

import pytest

from jobtrail.model.machine import State
from jobtrail.model.models import Task, task_from_fields

NOW = datetime(2026, 11, 30, 1, 2, 3, 456000, tzinfo=UTC)
FIELDS = {
    "id": "7",
    "kind": "k",
    "queue": "default",
    "tenant": "t",
    "state": State.LEASED,
    "payload": {"a": [1, 2.5]},
    "priority": 3,
    "attempts": 1,
    "max_attempts": 5,
    "run_at": NOW,
    "lease_owner": "host:1:ab",
    "lease_expires_at": NOW,
    "last_reason": "claimed",
    "last_error_category": None,
    "last_error": None,
    "replay_count": 0,
    "receipt_id": None,
    "parent_id": None,
    "created_at": NOW,
    "updated_at": NOW,
    "finished_at": None,
    "idempotency_key": "key",
    "receipt_deadline": None,
    "dismissed": False,
    "created": True,
    "steps": {"s": 1},
    "result": {"r": [1, "x"]},
    "waiting_for": {"kind": "sleep", "name": "cool_off", "until": NOW},
    "debounced": False,
    "expires_at": None,
}


def test_every_field_is_given() -> None:
    assert set(FIELDS) == {f.name for f in dataclasses.fields(Task)}
    assert not hasattr(Task, "__post_init__")


def test_same_object_as_the_dataclass_makes() -> None:
    fast, slow = task_from_fields(dict(FIELDS)), Task(**FIELDS)  # type: ignore[arg-type]
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.to_dict() == slow.to_dict() and fast.terminal is slow.terminal
    assert dataclasses.replace(fast, created=False) == dataclasses.replace(slow, created=False)
    assert pickle.loads(pickle.dumps(fast)) == slow
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.kind = "other"  # type: ignore[misc]


def test_app_builds_tasks_with_every_field(tmp_path) -> None:
    import jobtrail

    app = jobtrail.App(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        app.migrate()
        app.task("k")(lambda ctx, p: None)
        task = app.enqueue_many([{"kind": "k", "payload": {"n": 1}}] * 2)[1]
        assert set(task.__dict__) == set(FIELDS)
        again = app.get(task.id)
        assert dataclasses.replace(task, created=False) == again
    finally:
        app.close()


def test_a_new_task_with_another_payload_keeps_every_other_field() -> None:
    from jobtrail.store.base import NewTask

    new = NewTask(
        kind="k",
        queue="q",
        tenant="t",
        payload_json='{"a": 1}',
        payload_hash="h1",
        idempotency_key="key",
        priority=3,
        max_attempts=4,
        lease_seconds=5.5,
        reentrant=False,
        run_at=NOW,
        delay=6.0,
        parent_id=7,
        state=State.WAITING,
        actor="me",
        data={"d": 8},
        concurrency_key="ck",
        concurrency_limit=9,
    )
    assert len({repr(getattr(new, f.name)) for f in dataclasses.fields(NewTask)}) == len(
        dataclasses.fields(NewTask)
    )  # every field distinct, so a field given in another's place shows
    assert new.with_payload("[]", "h2") == dataclasses.replace(
        new, payload_json="[]", payload_hash="h2"
    )
