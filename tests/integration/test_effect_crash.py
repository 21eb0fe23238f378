"""A worker killed with SIGKILL between an effect and the task's completion, on both backends.

The "payment provider" lives outside the worker process: a directory of files keyed by the
effect key, created with ``O_EXCL`` so a second charge with the same key is detectable (it is
deduplicated by the provider, like a real idempotency key, and recorded as a repeat).
"""

from __future__ import annotations

import importlib
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import jobtrail

WAIT = 20.0

APP_MODULE = '''
"""A worker app whose provider is a ledger directory outside the worker process."""

import os
import time
import uuid
from pathlib import Path

import jobtrail

LEDGER = Path({ledger!r})
MARKERS = Path({markers!r})
RECONCILED = []  # keys reconcile was asked about, in this process

app = jobtrail.App({url!r}, **{options!r})


def _name(key):
    return key.replace("/", "_")


class Provider:
    def charge(self, key):
        """Charge once per key; the same key again is deduplicated but recorded."""
        try:
            fd = os.open(LEDGER / ("charge-" + _name(key)), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            (LEDGER / ("repeat-" + _name(key) + "-" + uuid.uuid4().hex)).touch()
            return {{"charge": _name(key), "repeat": True}}
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return {{"charge": _name(key)}}

    def lookup(self, key):
        if (LEDGER / ("charge-" + _name(key))).exists():
            return {{"charge": _name(key), "found": True}}
        return None


provider = Provider()


def crash_point(ctx, payload, here):
    """On the first attempt, at the chosen point: tell the test, then hang until killed."""
    if ctx.attempt == 1 and payload["crash"] == here:
        (MARKERS / ctx.task_id).touch()
        time.sleep(60)


def reconcile(key):
    RECONCILED.append(key)
    return provider.lookup(key)


def make(kind, *, reentrant, with_reconcile):
    @app.task(
        kind,
        reentrant=reentrant,
        lease_seconds=1.0,
        backoff_base=0,
        reconcile=reconcile if with_reconcile else None,
    )
    def handler(ctx, payload):
        def charge(key):
            receipt = provider.charge(key)
            crash_point(ctx, payload, "inside_effect")  # charged, receipt not yet recorded
            return receipt

        ctx.effect("charge", charge)
        crash_point(ctx, payload, "after_effect")  # the effect returned and is confirmed


make("pay_reconciled", reentrant=True, with_reconcile=True)
make("pay_once", reentrant=False, with_reconcile=False)
make("pay_retried", reentrant=True, with_reconcile=False)
'''

RUNNER = """
import sys
sys.path.insert(0, {directory!r})
import {module} as module
module.app.run_worker(concurrency=1, poll_interval=0.05, sweep_interval=0.1)
"""


class Scenario:
    def __init__(self, tmp_path: Path, url: str, options: dict[str, str]) -> None:
        self.dir = tmp_path
        self.ledger = tmp_path / "ledger"
        self.markers = tmp_path / "markers"
        self.ledger.mkdir()
        self.markers.mkdir()
        self.name = "crashapp_" + secrets.token_hex(4)
        (tmp_path / f"{self.name}.py").write_text(
            APP_MODULE.format(
                ledger=str(self.ledger), markers=str(self.markers), url=url, options=options
            )
        )
        (tmp_path / "runner.py").write_text(
            textwrap.dedent(RUNNER).format(directory=str(tmp_path), module=self.name)
        )
        sys.path.insert(0, str(tmp_path))
        self.module: ModuleType = importlib.import_module(self.name)
        self.app: jobtrail.App = self.module.app

    def close(self) -> None:
        self.app.close()
        sys.modules.pop(self.name, None)
        sys.path.remove(str(self.dir))

    def charges(self, key: str) -> int:
        return len(list(self.ledger.glob("charge-" + key.replace("/", "_"))))

    def repeats(self, key: str) -> int:
        return len(list(self.ledger.glob("repeat-" + key.replace("/", "_") + "-*")))

    def run_and_kill(self, task_id: str) -> None:
        """Start a worker process, wait until the handler reached its crash point, SIGKILL."""
        src = Path(jobtrail.__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(self.dir)])}
        log = (self.dir / "worker.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, str(self.dir / "runner.py")], env=env, stdout=log, stderr=log
        )
        try:
            marker = self.markers / task_id
            deadline = time.monotonic() + WAIT
            while not marker.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    output = (self.dir / "worker.log").read_text(errors="replace")
                    raise AssertionError(f"the worker never reached the crash point:\n{output}")
                time.sleep(0.02)
            # the worker still holds the task: nothing decided it yet
            assert self.app.get(task_id).state == "leased"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(WAIT)
            log.close()
        assert proc.returncode == -signal.SIGKILL

    def swept(self, task_id: str) -> jobtrail.Task:
        """Run the sweeper until the dead worker's lease expired and the task moved."""
        return wait_for(
            lambda: (
                self.app.sweep() is not None
                and (task := self.app.get(task_id)).state != "leased"
                and task
            ),
            "the sweeper to move the expired lease",
        )


def wait_for(predicate: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def scenario(store: Any, tmp_path: Path) -> Iterator[Scenario]:
    store.app()  # migrates the store; the invariant check runs on it after the test
    s = Scenario(tmp_path, store.url, store.options)
    try:
        yield s
    finally:
        s.close()


def finish_in_process(app: jobtrail.App) -> None:
    app.run_worker(burst=True, poll_interval=0.05, sweep_interval=0.05)


@pytest.mark.parametrize("crash", ["after_effect", "inside_effect"])
def test_reentrant_with_reconcile_finishes_with_exactly_one_charge(
    scenario: Scenario, crash: str
) -> None:
    """(a) After the effect returned (its receipt is confirmed: not even reconcile is needed)
    or inside it (charged, receipt not recorded: reconcile finds the charge) — either way the
    retry never charges again."""
    app = scenario.app
    task = app.enqueue("pay_reconciled", {"crash": crash})
    key = f"{task.id}/charge"
    scenario.run_and_kill(task.id)
    assert scenario.charges(key) == 1

    moved = scenario.swept(task.id)
    assert (moved.state, moved.last_reason) == ("queued", "lease_expired")
    before = app.explain(task.id)
    if crash == "inside_effect":
        assert f"effect charge [key {key}]: started by attempt 1, outcome uncertain" in before
    else:
        assert f"effect charge [key {key}]: confirmed (attempt 1)" in before

    finish_in_process(app)
    done = app.get(task.id)
    assert (done.state, done.last_reason, done.attempts) == ("succeeded", "completed", 2)
    assert [t.reason for t in app.transitions(task.id)] == [
        "enqueued",
        "claimed",
        "lease_expired",
        "claimed",
        "completed",
    ]
    assert scenario.charges(key) == 1 and scenario.repeats(key) == 0  # exactly one charge
    name = key.replace("/", "_")
    if crash == "inside_effect":
        assert scenario.module.RECONCILED == [key]
        assert done.steps == {"charge": {"charge": name, "found": True}}
        assert f"effect charge [key {key}]: confirmed (attempt 2)" in app.explain(task.id)
    else:
        assert scenario.module.RECONCILED == []
        assert done.steps == {"charge": {"charge": name}}
        assert f"effect charge [key {key}]: confirmed (attempt 1)" in app.explain(task.id)


def test_non_reentrant_goes_dead_with_the_effect_uncertain(scenario: Scenario) -> None:
    """(b) A person must check the outside world first."""
    app = scenario.app
    task = app.enqueue("pay_once", {"crash": "after_effect"})
    key = f"{task.id}/charge"
    scenario.run_and_kill(task.id)

    dead = scenario.swept(task.id)
    assert (dead.state, dead.last_reason) == ("dead", "lease_expired_effect_uncertain")
    last = app.transitions(task.id)[-1]
    assert (last.from_state, last.actor) == ("leased", "sweeper")
    assert scenario.charges(key) == 1 and scenario.repeats(key) == 0
    finish_in_process(app)  # nothing to run: it stays dead
    assert app.get(task.id).state == "dead"
    assert scenario.charges(key) == 1


def test_reentrant_without_reconcile_repeats_the_call_with_the_same_key(
    scenario: Scenario,
) -> None:
    """(c) No way to look the charge up: the retry calls the provider again, with the same
    effect key, so the provider deduplicates it (still one charge)."""
    app = scenario.app
    task = app.enqueue("pay_retried", {"crash": "inside_effect"})
    key = f"{task.id}/charge"
    scenario.run_and_kill(task.id)
    assert (scenario.charges(key), scenario.repeats(key)) == (1, 0)

    assert scenario.swept(task.id).last_reason == "lease_expired"
    finish_in_process(app)
    done = app.get(task.id)
    assert (done.state, done.attempts) == ("succeeded", 2)
    # the provider saw the same key a second time and did not charge again
    assert (scenario.charges(key), scenario.repeats(key)) == (1, 1)
    assert done.steps == {"charge": {"charge": key.replace("/", "_"), "repeat": True}}
    assert f"effect charge [key {key}]: confirmed (attempt 2)" in app.explain(task.id)
