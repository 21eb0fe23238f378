"""Checked by mypy (tests/unit/test_typing_handles.py), never run: the handle of a typed
handler is ``TaskHandle[Note]``, so ``enqueue`` takes a ``Note`` and refuses anything else."""

from __future__ import annotations

import dataclasses
from typing import Any, reveal_type

import jobtrail
from jobtrail.app.handles import TaskHandle

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
    assert handle.kind


async def auses() -> None:
    reveal_type(await publish.aenqueue(Note("hi")))
    await publish.aenqueue(3)  # E: not a Note
