"""The worker's stop line counts tasks and attempts separately (it said "stopped
after 4 tasks" of two tasks, one of them tried three times). Both backends."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import jobtrail
from jobtrail import PermanentError, TransientError


def test_the_stop_line_counts_attempts_and_the_tasks_they_finished(
    app: jobtrail.App, caplog: pytest.LogCaptureFixture
) -> None:
    failures = iter([True, True])

    @app.task("flaky", backoff_base=0)
    def flaky(ctx: jobtrail.Context, payload: Any) -> None:
        if next(failures, False):
            raise TransientError("busy", category="unavailable")

    @app.task("ok")
    def ok(ctx: jobtrail.Context, payload: Any) -> None:
        pass

    @app.task("broken", max_attempts=1)
    def broken(ctx: jobtrail.Context, payload: Any) -> None:
        raise PermanentError("bad", category="invalid_input")

    for kind in ("flaky", "ok", "broken"):
        app.enqueue(kind)
    with caplog.at_level(logging.INFO, logger="jobtrail.worker"):
        attempts = app.run_worker(burst=True, poll_interval=0.05)
    assert attempts == 5
    [line] = [r.getMessage() for r in caplog.records if " stopped: " in r.getMessage()]
    assert (
        ": 5 attempts, 3 tasks finished (2 succeeded, 1 dead), 2 to run again (retry or "
        "snooze), in " in line
    ), line
    assert line.endswith(" round trips")
