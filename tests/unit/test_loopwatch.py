"""The blocked-loop report (SPEC §17.1, ``worker.loopwatch``): a step of an async handler's
coroutine longer than ``BLOCKED`` is one WARNING naming the task, at most one a minute."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from jobtrail.worker import loopwatch
from jobtrail.worker.loopwatch import LoopWatch, Watched


async def _handler(log: list[str], block: float) -> str:
    log.append("start")
    await asyncio.sleep(0)
    time.sleep(block)
    await asyncio.sleep(0)
    log.append("end")
    return "result"


def test_a_blocking_step_is_logged_once_a_minute_with_the_task(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loopwatch, "BLOCKED", 0.02)
    watch = LoopWatch("host:1:ab")
    ran: list[str] = []

    async def main() -> list[str]:
        first = await Watched(_handler(ran, 0.05), watch, 7, "send_email")
        second: str = await asyncio.wait_for(Watched(_handler(ran, 0.05), watch, 8, "other"), 5)
        quick = await Watched(_handler(ran, 0.0), watch, 9, "quick")
        return [first, second, quick]

    with caplog.at_level(logging.WARNING, logger="jobtrail.worker"):
        assert asyncio.run(main()) == ["result"] * 3
    assert ran == ["start", "end"] * 3
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines  # the second block is within the minute
    assert "async handler of task 7 (send_email) blocked the event loop for " in lines[0]
    assert lines[0].startswith("worker host:1:ab: ")

    monkeypatch.setattr(loopwatch, "EVERY", 0.0)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="jobtrail.worker"):
        asyncio.run(main())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "task 8 (other)" in lines[1], lines


def test_exceptions_and_cancellation_pass_through() -> None:
    watch = LoopWatch("w")

    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    async def slow() -> None:
        await asyncio.sleep(10)

    async def main() -> None:
        with pytest.raises(ValueError, match="boom"):
            await Watched(fails(), watch, 1, "k")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(Watched(slow(), watch, 2, "k"), 0.01)

    asyncio.run(main())
