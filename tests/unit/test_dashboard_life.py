"""The picture of a task's life reads its phases from the transition log by the machine's
reason codes: a durable handler's sleeps and waits (``sleeping``, ``waiting_for_event``,
``waiting_for_children``, woken by ``event_received``, ``children_finished`` or
``wait_timed_out``) are drawn as what they are, and every (state, reason) pair of the machine
that starts a phase is placed on purpose."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobtrail.model.machine import EDGES, TERMINAL, Reason, State
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


def test_every_edge_of_the_machine_starts_a_phase_on_purpose() -> None:
    """A reason added to the machine that enters ``queued`` must be placed (a wait for a
    worker, a retry's back-off, a sleep); one that enters ``waiting`` must say what for."""
    into_queue = {r for e in EDGES if not e.annotation for s, r in e.pairs if s is Q}
    placed = life.QUEUE_REASONS | life.RETRY_REASONS | life.SLEEP_REASONS
    assert into_queue - placed == set()
    assert not (life.QUEUE_REASONS & life.RETRY_REASONS)
    into_waiting = {r for e in EDGES if not e.annotation for s, r in e.pairs if s is W}
    assert into_waiting - set(life.WAIT_REASONS) == {Reason.MANUAL_FIX}
    for e in EDGES:
        for state, reason in e.pairs:
            t = _log((None, state, reason.value, 0, 1))[0]
            assert (life._kind(t) is None) == (state in TERMINAL), (state, reason)


def test_a_failed_receipt_waits_to_retry_and_a_parent_waits_for_its_children() -> None:
    log = _log(
        (None, Q, "enqueued", 0, 0),
        (Q, L, "claimed", 1, 1),
        (L, State.AWAITING_RECEIPT, "submitted", 2, 1),
        (State.AWAITING_RECEIPT, Q, "receipt_failed", 4, 1),
        (Q, L, "claimed", 9, 2),
        (L, S, "completed", 10, 2),
    )
    kinds = [p.kind for p in life.phases(log, T0 + timedelta(seconds=20))]
    assert kinds == ["queue", "run", "receipt", "retry", "run"]
    parent = _log((None, W, "enqueued", 0, 0), (W, S, "children_succeeded", 5, 0))
    [phase] = life.phases(parent, T0 + timedelta(seconds=20))
    assert (phase.kind, life.phase_name(phase, "en")) == (
        "wait_children",
        "waiting for its children",
    )
