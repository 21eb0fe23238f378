"""``@app.task`` returns a handle (callable as the function, ``.kind``,
``.enqueue``, ``.enqueue_many``, ``.aenqueue``), and a payload annotated with a dataclass or a
pydantic model is checked at enqueue (nothing written when it is wrong) and rebuilt for the
handler, on both backends."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pydantic
import pytest

import jobtrail
from jobtrail.app.handles import TaskHandle

from .support import drain, run


@dataclasses.dataclass
class Address:
    city: str
    zip: str | None = None


@dataclasses.dataclass
class Note:
    title: str
    words: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)
    to: Address | None = None


class Invoice(pydantic.BaseModel):
    number: int
    amount: float
    lines: list[str] = []


def test_the_handle_is_the_function_and_enqueues_its_kind(app: jobtrail.App) -> None:
    seen: list[Any] = []

    @app.task("publish")
    def publish(ctx: Any, payload: dict[str, Any]) -> str:
        seen.append(payload)
        return "done"

    assert isinstance(publish, TaskHandle)
    assert publish.kind == "publish" and publish.__name__ == "publish"
    assert publish(None, {"direct": True}) == "done"  # a test may call the handler itself
    one = publish.enqueue({"n": 1}, priority=5, idempotency_key="k1")
    assert (one.kind, one.priority, one.idempotency_key) == ("publish", 5, "k1")
    assert not publish.enqueue({"n": 1}, idempotency_key="k1").created
    many = publish.enqueue_many([{"n": 2}, {"n": 3}], tenant="t")
    assert [(t.kind, t.payload, t.tenant) for t in many] == [
        ("publish", {"n": 2}, "t"),
        ("publish", {"n": 3}, "t"),
    ]
    later = asyncio.run(publish.aenqueue({"n": 4}, delay=0))
    more = asyncio.run(publish.aenqueue_many([{"n": 5}]))
    assert later.kind == more[0].kind == "publish"
    with pytest.raises(TypeError, match="unknown enqueue options"):
        publish.enqueue_many([{}], colour="red")
    run(app)
    assert sorted(p["n"] for p in seen if "n" in p) == [1, 2, 3, 4, 5]


def test_kind_defaults_to_the_function_name(app: jobtrail.App) -> None:
    @app.task()
    def tidy(ctx: Any, payload: Any) -> None:
        pass

    assert tidy.kind == "tidy" and tidy.enqueue().kind == "tidy"


def test_a_dataclass_payload_is_rebuilt_for_the_handler(app: jobtrail.App) -> None:
    got: list[Any] = []

    @app.task("note")
    def note(ctx: Any, payload: Note) -> None:
        got.append(payload)

    made = note.enqueue(Note("hi", 3, ["a"], Address("Oslo")))
    assert made.payload == {
        "title": "hi",
        "words": 3,
        "tags": ["a"],
        "to": {"city": "Oslo", "zip": None},
    }
    note.enqueue({"title": "from a dict"})  # a dict of the fields is checked and taken
    app.enqueue("note", Note("via app"))
    drain(app, made.id)
    run(app)
    assert sorted(got, key=lambda n: n.title) == [
        Note("from a dict"),
        Note("hi", 3, ["a"], Address("Oslo")),
        Note("via app"),
    ]
    assert all(isinstance(n, Note) for n in got)


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"title": 7}, "title must be str, not int"),
        ({"title": "x", "words": "many"}, "words must be int"),
        ({"title": "x", "colour": 1}, "unknown fields ['colour']"),
        ({}, "lacks the required fields ['title']"),
        ({"title": "x", "to": {"town": "y"}}, "unknown fields ['town']"),
        ({"title": "x", "tags": "a,b"}, "tags must be a list"),
        (None, "lacks the required fields ['title']"),
        ("just text", "must be a Note or a dict of its fields"),
        (Address("Oslo"), "must be a Note or a dict of its fields"),
        (Note(title=5), "title must be str, not int"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_typed_payload_is_refused_before_anything_is_written(
    app: jobtrail.App, payload: Any, words: str
) -> None:
    @app.task("note")
    def note(ctx: Any, payload: Note) -> None:
        pass

    with pytest.raises((TypeError, ValueError)) as refused:
        note.enqueue(payload)
    assert words in str(refused.value) and "kind 'note' (Note)" in str(refused.value)
    with pytest.raises(TypeError, match="item 1: payload of kind 'note'"):
        app.enqueue_many(
            [{"kind": "note", "payload": Note("ok")}, {"kind": "note", "payload": payload}]
        )
    with pytest.raises((TypeError, ValueError)):
        asyncio.run(note.aenqueue(payload))
    assert app.list() == []


def test_a_pydantic_payload_is_validated_and_rebuilt(app: jobtrail.App) -> None:
    got: list[Any] = []

    @app.task("bill")
    async def bill(ctx: Any, payload: Invoice) -> None:
        got.append(payload)

    made = bill.enqueue(Invoice(number=1, amount=9.5))
    assert made.payload == {"number": 1, "amount": 9.5, "lines": []}
    bill.enqueue({"number": "2", "amount": 1})  # pydantic's own coercion
    with pytest.raises(ValueError, match="kind 'bill' \\(Invoice\\) is not valid"):
        bill.enqueue({"number": "two", "amount": 1})
    with pytest.raises(TypeError, match="must be a Invoice"):
        bill.enqueue([1, 2])
    run(app)
    assert sorted(i.number for i in got) == [1, 2]
    assert all(isinstance(i, Invoice) for i in got)
    assert len(app.list()) == 2


def test_a_stored_payload_that_no_longer_fits_is_a_permanent_error(app: jobtrail.App) -> None:
    """Stored by older code (or a label kind) and read by a typed handler: retrying cannot
    make it fit, so the task goes dead at once with the field named."""
    app.task("note", max_attempts=5)(lambda ctx, p: None)
    old = app.enqueue("note", {"headline": "old shape"})
    fresh = jobtrail.App(app.url)
    try:

        @fresh.task("note", max_attempts=5)
        def note(ctx: Any, payload: Note) -> None:
            raise AssertionError("never called")

        task = drain(fresh, old.id)
    finally:
        fresh.close()
    assert task.state == "dead"
    last = app.transitions(old.id)[-1]
    assert last.reason == "permanent_error"
    assert last.error is not None and "unknown fields ['headline']" in last.error
