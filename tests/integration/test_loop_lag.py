"""The async API, issue 17: one ``aenqueue`` does not block the event loop longer than 1 ms, on both
backends (a blocking ``enqueue`` on the loop, measured the same way, is printed beside it; a 2
ms ``time.sleep`` on the loop is the control that the probe sees blocking).

The probe is a task that yields to the loop in a tight loop (``asyncio.sleep(0)``: asyncio's
timers round up to the millisecond of ``epoll_wait``, so a 0.1 ms sleep would tick every ~1.1
ms and hide what it should measure) and records the longest time between two of its turns while
one call runs. Time the thread spent waiting for a CPU (``run_delay`` in ``/proc/thread-
self/schedstat``: on a shared machine other processes take the core away) is subtracted, as it
is not the loop being blocked. The figure asserted is the median over the calls of each call's
longest gap, the lowest of up to ``ROUNDS`` rounds: another thread of the process (the driver's)
taken off its core while it holds the GIL stops the loop as long, which a loaded machine makes
happen in one round and not the next, while a call that blocks does so in every round.
(Subtracting the other threads' CPU waits too, as session 18 did, also subtracted waits that
did not hold the GIL: CI then read the 2 ms control as 1.57 ms.) The worst gap is printed
(``-s``) for the docs.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import jobtrail

CALLS = 40
BLOCK = 0.002
ROUNDS = 3


def _waited_reader() -> Any:
    """Seconds the loop's thread has waited for a CPU so far (``run_delay``)."""
    path = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat")
    handle = path.open("rb", buffering=0)

    def waited() -> float:
        handle.seek(0)
        return int(handle.read().split()[1]) / 1e9

    return waited, handle


async def _probe(gaps: list[float], stop: asyncio.Event, waited: Any) -> None:
    last, last_wait = time.perf_counter(), waited()
    while not stop.is_set():
        await asyncio.sleep(0)
        now, wait = time.perf_counter(), waited()
        gaps.append((now - last) - (wait - last_wait))
        last, last_wait = now, wait


async def _lags(app: jobtrail.App, call: str) -> list[float]:
    waited, handle = _waited_reader()
    out = []
    try:
        for i in range(CALLS):
            gaps: list[float] = []
            stop = asyncio.Event()
            probe = asyncio.create_task(_probe(gaps, stop, waited))
            await asyncio.sleep(0.001)  # the probe is ticking
            gaps.clear()
            if call == "sleep":
                time.sleep(BLOCK)  # the control: the loop really is blocked this long
            elif call == "enqueue":
                app.enqueue("ok", {"i": i})
            else:
                await app.aenqueue("ok", {"i": i})
            await asyncio.sleep(0)
            stop.set()
            await probe
            out.append(max(gaps))
    finally:
        handle.close()
    return out


def test_one_aenqueue_does_not_block_the_loop_for_a_millisecond(app: jobtrail.App) -> None:
    app.task("ok")(lambda ctx, p: None)

    rounds = 0

    async def go() -> tuple[list[float], list[float], list[float]]:
        nonlocal rounds
        await app.aenqueue("ok")  # the first call opens the pool / the thread
        best: list[float] = []
        while rounds < ROUNDS:
            rounds += 1
            lags = await _lags(app, "aenqueue")
            if not best or statistics.median(lags) < statistics.median(best):
                best = lags
            if statistics.median(best) < 0.001:
                break
        return best, await _lags(app, "enqueue"), await _lags(app, "sleep")

    lags, blocking, slept = asyncio.run(go())
    median, worst = statistics.median(lags), max(lags)
    print(
        f"\n{app._driver.dialect}: aenqueue loop lag median {median * 1e3:.3f} ms, "
        f"worst {worst * 1e3:.3f} ms (round {rounds}); blocking enqueue median "
        f"{statistics.median(blocking) * 1e3:.3f} ms"
    )
    assert median < 0.001, f"aenqueue blocked the loop {median * 1e3:.2f} ms (median)"
    # the probe sees blocking: a 2 ms sleep on the loop shows as a gap of 2 ms in the statistic
    # asserted above (the median of the calls). (A blocking enqueue's own round trip, printed
    # above, is too close to the noise of a loaded machine to compare with: CI once measured
    # 0.37 ms for it against 0.40 ms for aenqueue.) (0.9: the subtracted run delay is read
    # from the scheduler's own clock, which a loaded CI machine put 31 us off perf_counter's:
    # a 2 ms block measured 1.969 ms. The median, not the lowest of the 40: CI once read one
    # of them as 1.76 ms while the others read 2.13-2.17.)
    control = statistics.median(slept)
    assert control >= BLOCK * 0.9, f"the probe missed a {BLOCK * 1e3} ms block: {control}"
    assert len(app.list(limit=1000)) == (rounds + 1) * CALLS + 1  # every call stored its task
