"""Checked by mypy (tests/unit/test_typing_handles.py), never run: the handle of a typed
handler is ``TaskHandle[Note]``, so ``enqueue`` takes a ``Note`` and refuses anything else; the
options of ``App.enqueue`` and of the handle's methods are ``EnqueueOptions``, checked by name
and type."""

from __future__ import annotations

import dataclasses
from typing import Any, reveal_type

import jobtrail
from jobtrail.app.handles import TaskHandle
from jobtrail.model.enqueue_options import EnqueueOptions

app = jobtrail.App("sqlite:///typing.db")


@dataclasses.dataclass
class Note:
    title: str


@app.task()
def publish(ctx: jobtrail.Context, payload: Note) -> None:
    pass


@app.task("plain")
async def plain(ctx: jobtrail.Context, payload: dict[str, Any]) -> None:
    pass


def uses() -> None:
    handle: TaskHandle[Note] = publish
    reveal_type(publish)
    reveal_type(publish.enqueue(Note("hi")))
    reveal_type(plain)
    publish.enqueue(Note("hi"), priority=2, idempotency_key="k")
    publish.enqueue_many([Note("a"), Note("b")])
    plain.enqueue({"any": "dict"})
    publish.enqueue({"title": "a dict"})  # E: the handle wants a Note
    publish.enqueue(Note("x"), priority="high")  # E: priority is an int
    publish.enqueue_many([Note("a")], queue=3)  # E: the options of enqueue_many are typed too
    publish.enqueue(Note("x"), prority=1)  # E: no such option
    app.enqueue("plain", {}, tenant="t", run_at="2030-01-01T00:00:00Z", connection=None)
    app.enqueue("plain", {}, tenant=None)  # E: tenant is a string
    app.enqueue("plain", {}, prority=1)  # E: no such option
    options: EnqueueOptions = {"queue": "q", "delay": 5.0}
    app.enqueue("plain", {}, **options)  # a caller's own options, checked where they are made
    assert handle.kind


async def auses() -> None:
    reveal_type(await publish.aenqueue(Note("hi")))
    await publish.aenqueue(3)  # E: not a Note
    await app.aenqueue("plain", delay="soon")  # E: delay is a number
    await publish.aenqueue_many([Note("a")], max_attempts=3)
