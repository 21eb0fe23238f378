"""The blocked-loop report (``worker.loopwatch``): a step of an async handler's
coroutine longer than ``BLOCKED`` is one WARNING naming the task, at most one a minute."""

from __future__ import annotations

import asyncio
import logging
import threading
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


def test_a_step_that_does_not_return_is_reported_while_it_blocks(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung call is logged by the watchdog before it returns, once: its return adds no
    second line for the same step (the limit is lifted here to show that)."""
    monkeypatch.setattr(loopwatch, "BLOCKED", 0.02)
    monkeypatch.setattr(loopwatch, "HUNG", 0.1)
    monkeypatch.setattr(loopwatch, "LOOK", 0.01)
    monkeypatch.setattr(loopwatch, "EVERY", 0.0)
    watch = LoopWatch("host:1:ab")
    done = threading.Event()
    watch.start(done)
    seen_during: list[int] = []

    async def hangs() -> None:
        await asyncio.sleep(0)
        deadline = time.monotonic() + 5
        while not caplog.records and time.monotonic() < deadline:  # blocks until reported
            time.sleep(0.01)
        seen_during.append(len(caplog.records))

    async def main() -> None:
        await Watched(hangs(), watch, 41, "fetch_feed")

    try:
        with caplog.at_level(logging.WARNING, logger="jobtrail.worker"):
            asyncio.run(main())
    finally:
        done.set()
    lines = [r.getMessage() for r in caplog.records]
    assert seen_during == [1]
    assert len(lines) == 1, lines
    assert "async handler of task 41 (fetch_feed) has blocked the event loop for 0." in lines[0]
    assert "and still does" in lines[0]
