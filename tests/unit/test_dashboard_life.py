"""The picture of a task's life reads its phases from the transition log by reason code alone:
a durable handler's sleeps and waits (``sleeping``, ``waiting_for_event``,
``waiting_for_children``, woken by ``event_received``, ``children_finished`` or
``wait_timed_out``) are drawn as what they are whether or not this release's machine knows
those reasons."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobtrail.model.machine import State
from jobtrail.model.models import Transition
from jobtrail.web.dashboard import life

T0 = datetime(2026, 1, 1, tzinfo=UTC)
Q, L, W, S = State.QUEUED, State.LEASED, State.WAITING, State.SUCCEEDED


def _log(*moves: tuple[State | None, State, str, float, int]) -> list[Transition]:
    return [
        Transition(
            seq=i + 1,
            from_state=f,
            to_state=to,
            reason=reason,
            error_category=None,
            error=None,
            actor="test",
            attempt=attempt,
            at=T0 + timedelta(seconds=at),
        )  # fmt: skip
        for i, (f, to, reason, at, attempt) in enumerate(moves)
    ]


def test_a_life_that_retried_slept_and_waited() -> None:
    log = _log(
        (None, Q, "enqueued", 0, 0),
        (Q, L, "claimed", 1, 1),
        (L, Q, "retry_scheduled", 2, 1),
        (Q, L, "claimed", 5, 2),
        (L, Q, "sleeping", 6, 2),
        (Q, L, "claimed", 66, 2),
        (L, W, "waiting_for_event", 67, 2),
        (W, Q, "event_received", 100, 2),
        (Q, L, "claimed", 101, 2),
        (L, W, "waiting_for_children", 102, 2),
        (W, W, "correction", 103, 2),  # a note keeps the state: no phase of its own
        (W, Q, "wait_timed_out", 130, 2),
        (Q, L, "claimed", 131, 2),
        (L, S, "completed", 132, 2),
    )
    found = life.phases(log, T0 + timedelta(seconds=500))
    assert [(p.kind, p.reason, p.end_reason, p.seconds) for p in found] == [
        ("queue", "enqueued", "claimed", 1),
        ("run", "claimed", "retry_scheduled", 1),
        ("retry", "retry_scheduled", "claimed", 3),
        ("run", "claimed", "sleeping", 1),
        ("sleep", "sleeping", "claimed", 60),
        ("run", "claimed", "waiting_for_event", 1),
        ("wait_event", "waiting_for_event", "event_received", 33),
        ("queue", "event_received", "claimed", 1),
        ("run", "claimed", "waiting_for_children", 1),
        ("wait_children", "waiting_for_children", "wait_timed_out", 28),
        ("queue", "wait_timed_out", "claimed", 1),
        ("run", "claimed", "completed", 1),
    ]
    items = [life.describe(p, "en") for p in found]
    assert items[4] == "sleeping: 60.0 s (sleeping → claimed)"
    assert items[6] == "waiting for an event: 33.0 s (waiting_for_event → event_received)"
    assert items[9].startswith("waiting for its children: 28.0 s")
    end = life.ending(log)
    assert end is not None and end.reason == "completed"
    picture = life.svg(found, "zh", end)
    assert picture.count('<g class="phase') == 12
    assert "休眠" in picture and "等待" in picture and "自入队起的时间" in picture


def test_a_life_that_goes_on_lasts_until_now() -> None:
    log = _log((None, Q, "enqueued", 0, 0), (Q, L, "claimed", 2, 1))
    [queued, running] = life.phases(log, T0 + timedelta(seconds=10))
    assert (running.kind, running.seconds, running.end_reason) == ("run", 8, None)
    assert life.describe(running, "en") == "attempt 1: 8.0 s (claimed → now)"
    assert life.ending(log) is None
