"""The adaptive prefetch (the default): a long task never has a due task waiting behind it
while another handler slot is idle — and a fixed prefetch, which does not look, holds one
there."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import jobtrail

from .support import wait_for


class Kinds:
    """``quick`` tasks, and ``long`` ones that run until the ``after_long`` quick task has
    started somewhere (2 s at most): a quick task held behind one starts only after it."""

    def __init__(self, app: jobtrail.App) -> None:
        self.app = app
        self.short_started = threading.Event()
        self.long_running = threading.Event()
        self.ran_meanwhile: list[bool] = []

        @app.task("quick", max_attempts=1)
        def quick(ctx: jobtrail.Context, payload: Any) -> None:
            if payload.get("after_long"):
                self.short_started.set()

        @app.task("long", max_attempts=1)
        def long(ctx: jobtrail.Context, payload: Any) -> None:
            self.long_running.set()
            self.ran_meanwhile.append(self.short_started.wait(2.0))

    @contextmanager
    def workers(self, count: int, **options: Any) -> Iterator[None]:
        """``count`` workers, warmed with quick tasks (the adaptive prefetch has seen "quick"
        run short), then idle."""
        handles = [self.app.start_worker(**options) for _ in range(count)]
        try:
            warm = self.app.enqueue_many([{"kind": "quick", "payload": {}} for _ in range(100)])
            wait_for(lambda: self.app.get(warm[-1].id).state == "succeeded", what="warm-up")
            wait_for(lambda: not self.app.list(state="leased", limit=1), what="idle workers")
            yield
        finally:
            for handle in handles:
                handle.stop(grace=5)

    def long_then_short(self) -> tuple[str, str]:
        long_task, short_task = self.app.enqueue_many(
            [{"kind": "long", "payload": {}}, {"kind": "quick", "payload": {"after_long": True}}]
        )
        for task in (long_task, short_task):
            wait_for(lambda t=task: self.app.get(t.id).state == "succeeded", timeout=15)
        return long_task.id, short_task.id

    def claimers(self, *ids: str) -> list[list[str]]:
        return [[r.actor for r in self.app.transitions(i) if r.reason == "claimed"] for i in ids]


@pytest.mark.parametrize("prefetch", [None, 1])
def test_one_slot_workers_never_hold_a_task_behind_a_long_one(
    app: jobtrail.App, prefetch: int | None
) -> None:
    kinds = Kinds(app)
    with kinds.workers(2, concurrency=1, prefetch=prefetch):
        long_id, short_id = kinds.long_then_short()
    if prefetch is None:
        assert kinds.ran_meanwhile == [True], "the due task waited behind the long one"
    else:
        # a fixed prefetch holds whatever comes next: when one worker claimed both, the short
        # task waited behind the long one (which worker claims first is a race)
        held_behind = len(set(map(tuple, kinds.claimers(long_id, short_id)))) == 1
        assert kinds.ran_meanwhile == [not held_behind], kinds.claimers(long_id, short_id)


def test_a_worker_running_a_long_task_claims_nothing_ahead(app: jobtrail.App) -> None:
    kinds = Kinds(app)
    with kinds.workers(2, concurrency=2):
        first = app.enqueue("long", {})
        assert kinds.long_running.wait(10)
        # one worker runs `first` and has a slot free; the other is idle. Whichever claims
        # the long task and the quick one, the quick one must not wait behind a long run
        long_id, short_id = kinds.long_then_short()
        wait_for(lambda: app.get(first.id).state == "succeeded", timeout=15)
    assert kinds.ran_meanwhile == [True, True], kinds.claimers(first.id, long_id, short_id)
