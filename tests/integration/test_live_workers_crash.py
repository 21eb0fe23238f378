"""Live workers with real worker processes: one stopped by SIGTERM removes its heartbeat row at
once; one killed by SIGKILL stays listed until its heartbeat is older than its
``stale_after`` (3 s here instead of the default minute), then is forgotten.

The worker subprocess runs ``runner.py``, written into ``tmp_path``: a ``Worker`` with short
``beat_interval`` and ``stale_after`` (``WorkerOptions``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _integration_helpers import wait_until

import jobtrail

RUNNER = """
import sys
import time

import jobtrail
from jobtrail.worker import Worker, WorkerOptions

app = jobtrail.App()  # JOBTRAIL_DATABASE_URL


@app.task("hold", lease_seconds=60)
def hold(ctx, payload):
    time.sleep(60)


options = WorkerOptions(
    queues=["default"],
    concurrency=2,
    poll_interval=0.2,
    sweep_interval=0.1,
    beat_interval=0.2,
    stale_after=float(sys.argv[1]),
)
Worker(app, options).run()
"""


@pytest.fixture
def spawn(store: Any, tmp_path: Path) -> Iterator[Any]:
    runner = tmp_path / "runner.py"
    runner.write_text(textwrap.dedent(RUNNER))
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBTRAIL_")}
    env.update({"JOBTRAIL_DATABASE_URL": store.url, **store.env()})
    procs: list[subprocess.Popen[bytes]] = []

    def start(stale_after: float) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, str(runner), str(stale_after)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / f"worker-{len(procs)}.log", "wb"),  # noqa: SIM115
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def listed(app: jobtrail.App, pid: int) -> list[jobtrail.Worker]:
    return [w for w in app.workers() if w.pid == pid]


def test_a_worker_stopped_by_sigterm_removes_its_row(store: Any, spawn: Any) -> None:
    app = store.app()
    proc = spawn(60.0)
    (w,) = wait_until(lambda: listed(app, proc.pid), timeout=30, what="the worker listed")
    assert w.host == socket.gethostname() and w.kinds == ["hold"] and w.concurrency == 2
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    # gone at once: its stale_after is a minute, so only its own delete can explain it
    assert app.workers() == []


def test_a_sigkilled_worker_is_forgotten_once_its_heartbeat_is_stale(
    store: Any, spawn: Any
) -> None:
    app = store.app()
    app.task("hold", lease_seconds=60)(lambda ctx, p: None)
    task = app.enqueue("hold")
    proc = spawn(3.0)
    (w,) = wait_until(
        lambda: [w for w in listed(app, proc.pid) if w.tasks == [task.id]],
        timeout=30,
        what="the worker listed holding its task",
    )
    assert w.id == app.get(task.id).lease_owner and w.id.startswith(f"{w.host}:{proc.pid}:")
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    last = max(x.last_seen_at for x in listed(app, proc.pid) or [w])
    wait_until(lambda: not listed(app, proc.pid), timeout=30, what="the dead worker forgotten")
    with app._driver.transaction(write=False) as tx:
        now = app._driver.db_now(tx)
    assert (now - last).total_seconds() >= 3.0  # forgotten by its heartbeat's age, not before
    # No live worker is left: a new task's explanation says so.
    fresh = app.enqueue("hold")
    assert "no live worker serves queue default (live workers: none)" in app.explain(fresh.id)
