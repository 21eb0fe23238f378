"""Queue health after a replay, on both backends: attempt numbers restart at 1 when a task is
replayed, so a run time must pair an outcome with the claim just before it — not with every
earlier claim of the same attempt number (a replayed task that ran 50 ms twice read as a run of
the whole gap between its first claim and its second outcome)."""

from __future__ import annotations

import time
from typing import Any

import jobtrail
from jobtrail.model.errors import PermanentError

GAP = 1.0  # seconds between the dead end and the replay: what a wrong pairing would count
RUN = 0.05


def replayed_once(app: jobtrail.App) -> str:
    runs: list[int] = []

    @app.task("x", queue="a", max_attempts=1)
    def x(ctx: Any, payload: Any) -> None:
        runs.append(ctx.attempt)
        time.sleep(RUN)
        if len(runs) == 1:
            raise PermanentError("bad input")

    task = app.enqueue("x")
    assert app.run_worker(burst=True, poll_interval=0.02) == 1
    assert app.get(task.id).state == "dead"
    time.sleep(GAP)  # not a race: the gap is what a wrong pairing would measure
    app.replay(task.id, by="ops", note="fixed")
    assert app.run_worker(burst=True, poll_interval=0.02) == 1
    assert app.get(task.id).state == "succeeded" and runs == [1, 1]
    return task.id


def test_run_times_after_a_replay_pair_each_outcome_with_its_own_claim(app: jobtrail.App) -> None:
    replayed_once(app)
    row = next(q for q in app.stats(window=300)["queues"] if q["kind"] == "x")
    assert RUN <= row["run_p50"] <= row["run_p95"] < GAP, row


def test_a_replay_is_an_arrival_so_arrivals_and_completions_balance(app: jobtrail.App) -> None:
    """The task finished twice (dead, then succeeded) because it entered the queue twice
    (enqueued, then replayed): both views count both."""
    replayed_once(app)
    window = 300.0
    row = next(q for q in app.stats(window=window)["queues"] if q["kind"] == "x")
    assert row["arrivals_per_min"] == row["completions_per_min"] == 2 / (window / 60)
    chart = app.activity(window=3600, bucket=300)["queues"]["a"]
    assert sum(chart["arrivals"]) == sum(chart["completions"]) == 2
