"""Replay from a step, on both backends: ``app.replay(..., from_step=NAME)`` forgets the recorded
outcome of that step and of everything recorded after it (kept as superseded), so the handler
runs them again; the preview names the effects that will run again; a name the task did not
record is refused with nothing written."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import jobtrail
from jobtrail.model.errors import IllegalTransition

from ._effects_support import burst
from .test_retention import backdate


class Order:
    """A handler of four records — step ``reserve``, effect ``charge``, step ``pack``, step
    ``ship`` — whose ``ship`` fails permanently while ``broken`` is set."""

    def __init__(self, app: jobtrail.App) -> None:
        self.calls = {"reserve": 0, "charge": 0, "pack": 0, "ship": 0}
        self.keys: list[str] = []
        self.broken = True

        @app.task("order", max_attempts=1)
        def order(ctx: jobtrail.Context, payload: Any) -> dict[str, Any]:
            stock = ctx.step("reserve", lambda: self._count("reserve", {"slot": 7}))
            charge = ctx.effect("charge", self._charge)
            box = ctx.step("pack", lambda: self._count("pack", "box-1"))
            sent = ctx.step("ship", self._ship)
            return {"stock": stock, "charge": charge, "box": box, "sent": sent}

    def _count(self, name: str, value: Any) -> Any:
        self.calls[name] += 1
        return value

    def _charge(self, key: str) -> dict[str, Any]:
        self.calls["charge"] += 1
        self.keys.append(key)
        return {"id": f"ch_{self.calls['charge']}"}

    def _ship(self) -> str:
        self.calls["ship"] += 1
        if self.broken:
            raise jobtrail.PermanentError("carrier refused the address", category="invalid_input")
        return "shipped"


def dead_order(app: jobtrail.App) -> tuple[Order, str]:
    handler = Order(app)
    task = app.enqueue("order", {"sku": "a"})
    burst(app)
    assert app.get(task.id).state == "dead"
    assert handler.calls == {"reserve": 1, "charge": 1, "pack": 1, "ship": 1}
    return handler, task.id


def test_replay_from_a_step_runs_it_and_everything_after_it_again(app: jobtrail.App) -> None:
    handler, task_id = dead_order(app)
    before = app.steps(task_id)
    assert [s["name"] for s in before] == ["reserve", "charge", "pack"]

    preview = app.replay_preview(task_id, from_step="charge")
    assert preview["replayable"] is True
    assert preview["forgotten"] == ["charge", "pack"]
    assert [(e["name"], e["forgotten"]) for e in preview["effects"]["again"]] == [("charge", True)]
    assert preview["effects"]["skip"] == []
    # the preview wrote nothing
    assert app.steps(task_id) == before

    handler.broken = False
    replayed = app.replay(task_id, by="ann", note="address fixed", from_step="charge")
    assert (replayed.state, replayed.replay_count, replayed.attempts) == ("queued", 1, 0)
    assert [s["name"] for s in app.steps(task_id)] == ["reserve"]
    last = app.transitions(task_id)[-1]
    assert last.reason == "replayed"
    assert last.data == {"from_step": "charge", "superseded": ["charge", "pack"]}

    burst(app)
    done = app.get(task_id)
    assert done.state == "succeeded"
    # reserve came from the record; charge, pack and ship ran again
    assert handler.calls == {"reserve": 1, "charge": 2, "pack": 2, "ship": 2}
    assert handler.keys == [f"{task_id}/charge", f"{task_id}/charge"]  # the same effect key
    assert app.result(task_id) == {
        "stock": {"slot": 7},
        "charge": {"id": "ch_2"},
        "box": "box-1",
        "sent": "shipped",
    }

    # the forgotten outcomes stay in the history, marked superseded by that replay
    history = app.steps(task_id, superseded=True)
    old = [(s["name"], s["status"], s["result"]) for s in history if s["superseded"]]
    assert old == [("charge", "confirmed", {"id": "ch_1"}), ("pack", "confirmed", "box-1")]
    assert {s["replay_seq"] for s in history if s["superseded"]} == {last.seq}
    assert all(s["superseded_at"] is not None for s in history if s["superseded"])
    current = [(s["name"], s["result"]) for s in history if not s["superseded"]]
    assert current == [
        ("reserve", {"slot": 7}),
        ("charge", {"id": "ch_2"}),
        ("pack", "box-1"),
        ("ship", "shipped"),
    ]


def test_a_replay_without_from_step_forgets_nothing(app: jobtrail.App) -> None:
    handler, task_id = dead_order(app)
    preview = app.replay_preview(task_id)
    assert preview["forgotten"] == []
    assert preview["effects"]["again"] == []
    assert [(e["name"], e["provider_ids"]) for e in preview["effects"]["skip"]] == [
        ("charge", ["ch_1"])
    ]
    handler.broken = False
    app.replay(task_id, by="ann", note="retry")
    assert app.transitions(task_id)[-1].data == {}
    burst(app)
    assert handler.calls == {"reserve": 1, "charge": 1, "pack": 1, "ship": 2}
    assert not any(s["superseded"] for s in app.steps(task_id, superseded=True))


def test_replay_from_the_first_step_runs_every_step_again(app: jobtrail.App) -> None:
    handler, task_id = dead_order(app)
    handler.broken = False
    app.replay(task_id, by="ann", note="all again", from_step="reserve")
    assert app.steps(task_id) == []
    burst(app)
    assert app.get(task_id).state == "succeeded"
    assert handler.calls == {"reserve": 2, "charge": 2, "pack": 2, "ship": 2}


def test_replaying_twice_from_steps_keeps_both_histories(app: jobtrail.App) -> None:
    handler, task_id = dead_order(app)
    app.replay(task_id, by="ann", note="first", from_step="pack")
    burst(app)  # ship still broken: dead again, pack recorded anew
    assert app.get(task_id).state == "dead"
    app.replay(task_id, by="ann", note="second", from_step="pack")
    history = app.steps(task_id, superseded=True)
    seqs = [s["replay_seq"] for s in history if s["superseded"] and s["name"] == "pack"]
    assert len(seqs) == 2 and seqs[0] < seqs[1]
    assert handler.calls["pack"] == 2


@pytest.mark.parametrize(
    ("from_step", "error"),
    [
        ("nope", r"from_step 'nope': task \d+ has recorded no step or effect of that name "
         r"\(it has: 'reserve', 'charge', 'pack'\)"),
        ("ship", r"from_step 'ship': task \d+ has recorded no step"),  # it failed: not recorded
        ("", "from_step must be a step name"),
        ("x" * 201, "from_step must be a step name"),
        (7, "from_step must be a step name"),
        ("a\x00b", "from_step must not contain control characters"),
    ],
)  # fmt: skip
def test_a_bad_from_step_is_refused_and_nothing_is_written(
    app: jobtrail.App, from_step: Any, error: str
) -> None:
    _, task_id = dead_order(app)
    before = (app.get(task_id), app.transitions(task_id), app.steps(task_id, superseded=True))
    with pytest.raises(ValueError, match=error):
        app.replay(task_id, by="ann", note="x", from_step=from_step)
    with pytest.raises(ValueError, match=error):
        app.replay_preview(task_id, from_step=from_step)
    after = (app.get(task_id), app.transitions(task_id), app.steps(task_id, superseded=True))
    assert after == before


def test_replay_from_a_step_of_a_task_that_is_not_dead_is_refused(app: jobtrail.App) -> None:
    handler, task_id = dead_order(app)
    handler.broken = False
    app.replay(task_id, by="ann", note="fixed")
    burst(app)
    assert app.get(task_id).state == "succeeded"
    before = app.steps(task_id, superseded=True)
    with pytest.raises(IllegalTransition):
        app.replay(task_id, by="ann", note="again", from_step="charge")
    assert app.steps(task_id, superseded=True) == before
    preview = app.replay_preview(task_id, from_step="charge")
    assert preview["replayable"] is False
    assert preview["forgotten"] == ["charge", "pack", "ship"]


def test_areplay_takes_from_step(app: jobtrail.App) -> None:
    handler, task_id = dead_order(app)

    async def go() -> jobtrail.Task:
        return await app.areplay(task_id, by="ann", note="async", from_step="pack")

    task = asyncio.run(go())
    assert task.state == "queued"
    assert [s["name"] for s in app.steps(task_id)] == ["reserve", "charge"]


def test_pruning_a_task_replayed_from_a_step_deletes_its_superseded_steps(store: Any) -> None:
    app = store.app()
    handler, task_id = dead_order(app)
    handler.broken = False
    app.replay(task_id, by="ann", note="fixed", from_step="charge")
    burst(app)
    assert app.get(task_id).state == "succeeded"
    backdate(store, [task_id], 7200)
    assert app.prune(3600)["tasks"] == 1
    with pytest.raises(jobtrail.TaskNotFound):
        app.steps(task_id, superseded=True)


def test_replay_from_a_sleep_of_a_durable_handler_sleeps_again(app: jobtrail.App) -> None:
    calls = {"a": 0, "charge": 0}
    broken = [True]

    @app.task("durable_order", max_attempts=1)
    def durable_order(ctx: jobtrail.Context, p: Any) -> str:
        ctx.step("a", lambda: calls.__setitem__("a", calls["a"] + 1) or "A")
        ctx.sleep("pause", 0.05)
        ctx.effect("charge", lambda key: calls.__setitem__("charge", calls["charge"] + 1) or 1)
        if broken[0]:
            raise jobtrail.PermanentError("carrier down", category="invalid_input")
        return "done"

    task_id = app.enqueue("durable_order").id
    deadline = time.monotonic() + 10
    while app.get(task_id).state != "dead":  # a sleep ends by the clock
        assert time.monotonic() < deadline, app.get(task_id).state
        burst(app)
    assert [s["name"] for s in app.steps(task_id)] == ["a", "pause", "charge"]
    preview = app.replay_preview(task_id, from_step="pause")
    assert preview["forgotten"] == ["pause", "charge"]
    assert [e["name"] for e in preview["effects"]["again"]] == ["charge"]

    broken[0] = False
    app.replay(task_id, by="ann", note="carrier back", from_step="pause")
    while app.get(task_id).state != "succeeded":
        assert time.monotonic() < deadline + 10, app.get(task_id).state
        burst(app)
    assert calls == {"a": 1, "charge": 2}
    after = [t.reason for t in app.transitions(task_id)]
    replayed = after.index("replayed")
    assert "sleeping" in after[replayed:]  # it slept again: the sleep was forgotten
