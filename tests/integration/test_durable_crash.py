"""A real ``jobtrail worker`` process SIGKILLed while a durable handler runs after its resume,
on both backends: the steps recorded before (and after) the suspension never run again, the
sweeper takes the orphaned lease, and a fresh worker finishes the handler from its records.

Each step appends a line to a ledger file outside the worker process (``O_APPEND``), so a
second run of a step is counted, whichever process ran it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _integration_helpers import wait_until

APP_MODULE = """
import os
import time
from pathlib import Path

import jobtrail

DIR = Path(os.environ["JT_DIR"])
app = jobtrail.App(os.environ["JOBTRAIL_DATABASE_URL"])


def ledger(name):
    fd = os.open(DIR / "ledger", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, (name + "\\n").encode())
    os.close(fd)
    return name


@app.task("onboard", reentrant=True, lease_seconds=1.0, backoff_base=0)
def onboard(ctx, p):
    account = ctx.step("create_account", lambda: ledger("create_account"))
    ctx.sleep("cool_off", 0.3)
    verified = ctx.step("after_sleep", lambda: ledger("after_sleep"))
    if ctx.attempt == 1:  # the resumed run (a suspension is not an attempt): hang here
        (DIR / "resumed").touch()
        time.sleep(120)
    ctx.step("last", lambda: ledger("last"))
    return [account, verified]
"""


class Workers:
    """The app module in a directory, and ``jobtrail worker`` processes started on it."""

    def __init__(self, root: Path, url: str, env: dict[str, str]) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "durableapp.py").write_text(textwrap.dedent(APP_MODULE))
        self.url = url
        self.extra = env
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env.pop("JOBTRAIL_POOLER", None)
        env.update(self.extra)
        env.update(
            JOBTRAIL_DATABASE_URL=self.url,
            JT_DIR=str(self.root),
            PYTHONPATH=os.pathsep.join([str(self.root), env.get("PYTHONPATH", "")]),
        )
        log = open(self.root / f"worker-{len(self.procs)}.log", "wb")  # noqa: SIM115
        cli = [sys.executable, "-m", "jobtrail", "worker", "--app", "durableapp:app"]
        proc = subprocess.Popen([*cli, *args], cwd=self.root, env=env, stdout=log, stderr=log)
        log.close()
        self.procs.append(proc)
        return proc

    def output(self, i: int = -1) -> str:
        return (self.root / f"worker-{len(self.procs) + i if i < 0 else i}.log").read_text()

    def ledger(self) -> list[str]:
        path = self.root / "ledger"
        return path.read_text().split() if path.exists() else []

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def workers(store: Any, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(tmp_path / "durable", store.url, store.env())
    try:
        yield w
    finally:
        w.cleanup()


def test_sigkill_during_a_resumed_run_never_repeats_the_recorded_steps(
    store: Any, workers: Workers
) -> None:
    app = store.app()
    app.task("onboard", reentrant=True, lease_seconds=1.0)(lambda ctx, p: None)
    task = app.enqueue("onboard")
    proc = workers.start("--concurrency", "1", "--poll-interval", "0.05")
    wait_until(
        lambda: (workers.root / "resumed").exists() or proc.poll() is not None,
        timeout=30,
        what="the handler to resume after its sleep in the worker process",
    )
    assert proc.poll() is None, workers.output()
    assert app.get(task.id).state == "leased"
    assert workers.ledger() == ["create_account", "after_sleep"]

    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL

    def swept() -> bool:
        app.sweep()
        return app.get(task.id).state == "queued"

    wait_until(swept, timeout=15, what="the sweeper to requeue the orphaned task")
    rerun = workers.start("--burst", "--concurrency", "1", "--poll-interval", "0.05")
    assert rerun.wait(timeout=60) == 0, workers.output()
    done = app.get(task.id)
    assert done.state == "succeeded", workers.output()
    assert done.result == ["create_account", "after_sleep"]
    # every step ran exactly once, across three runs of the handler in two processes
    assert workers.ledger() == ["create_account", "after_sleep", "last"]
    assert [(t.reason, t.attempt) for t in app.transitions(task.id)] == [
        ("enqueued", 0),
        ("claimed", 1),
        ("sleeping", 1),
        ("claimed", 1),
        ("lease_expired", 1),
        ("claimed", 2),
        ("completed", 2),
    ]
