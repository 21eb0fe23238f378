"""Uniqueness windows and debounce under contention: several real processes enqueue the same
key at once, on both backends. The database decides (a unique index, guarded updates), so
there is exactly one task per window, and one open task per debounce key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jobtrail.model.machine import Reason

SRC = Path(__file__).resolve().parents[2] / "src"
PROCESSES = 6

#: One enqueuer: waits for the start time, then enqueues until the end time (or COUNT
#: times), printing the ids it got back as JSON.
SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    import jobtrail

    url, mode, folder, count = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    app = jobtrail.App(url)
    app.task("k")(lambda ctx, p: None)
    app.list(limit=1)  # connected
    (folder / f"ready-{os.getpid()}").touch()
    go = folder / "go"
    while not go.exists():
        time.sleep(0.001)
    start, end = map(float, go.read_text().split())
    while time.time() < start:
        time.sleep(0.001)
    got = []
    n = 0
    while (time.time() < end) if count == 0 else (n < count):
        n += 1
        if mode == "window":
            t = app.enqueue("k", {}, idempotency_key="K", unique_for=0.25)
        elif mode == "active":
            t = app.enqueue("k", {}, idempotency_key="A", unique_while="active")
        elif mode == "debounce-claimed":
            t = app.enqueue("k", {"pid": os.getpid(), "n": n}, debounce_key="C", debounce=0)
            time.sleep(0.01)  # a claim may come between two enqueues
        else:
            t = app.enqueue("k", {"n": n}, debounce_key="D", debounce=60)
        got.append([t.id, t.created, t.debounced, t.payload])
    print(json.dumps(got))
""")


def _race(
    store: Any,
    tmp_path: Path,
    mode: str,
    seconds: float,
    count: int,
    meanwhile: Callable[[], None] | None = None,
) -> list[list[Any]]:
    script = tmp_path / "enqueuer.py"
    script.write_text(SCRIPT)
    folder = tmp_path / "race"
    folder.mkdir()
    env = {**os.environ, "PYTHONPATH": str(SRC), **store.env()}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), store.url, mode, str(folder), str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(PROCESSES)
    ]
    deadline = time.monotonic() + 60
    while len(list(folder.glob("ready-*"))) < PROCESSES:  # all connected: start together
        assert time.monotonic() < deadline, "the enqueuers did not start"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    start = time.time() + 0.2
    (folder / "go.tmp").write_text(f"{start} {start + seconds}")
    (folder / "go.tmp").rename(folder / "go")
    if meanwhile is not None:
        while any(p.poll() is None for p in procs):
            meanwhile()
    results: list[list[Any]] = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.extend(json.loads(out))
    return results


def test_one_task_per_window_across_processes(store: Any, tmp_path: Path) -> None:
    app = store.app()
    app.task("k")(lambda ctx, p: None)
    got = _race(store, tmp_path, "window", seconds=1.5, count=0)
    tasks = sorted(app.list(limit=1000), key=lambda t: t.created_at)
    created = [g[0] for g in got if g[1]]
    assert sorted(created) == sorted(t.id for t in tasks)  # each made by exactly one call
    assert {g[0] for g in got} == {t.id for t in tasks}
    assert len(tasks) >= 3, len(tasks)  # the windows closed while the race ran
    for before, after in zip(tasks, tasks[1:], strict=False):
        gap = (after.created_at - before.created_at).total_seconds()
        assert gap >= 0.25 - 0.002, (before.id, after.id, gap)  # no two in one window
    assert [t.id for t in app.find_by_key("K")] == [tasks[-1].id]


def test_one_task_while_active_across_processes(store: Any, tmp_path: Path) -> None:
    app = store.app()
    app.task("k")(lambda ctx, p: None)
    got = _race(store, tmp_path, "active", seconds=0, count=20)
    tasks = app.list(limit=1000)
    assert len(tasks) == 1
    assert sum(1 for g in got if g[1]) == 1
    assert {g[0] for g in got} == {tasks[0].id}


def test_one_open_debounced_task_across_processes(store: Any, tmp_path: Path) -> None:
    app = store.app()
    app.task("k")(lambda ctx, p: None)
    got = _race(store, tmp_path, "debounce", seconds=0, count=20)
    tasks = app.list(limit=1000)
    assert len(tasks) == 1, [t.id for t in tasks]
    assert len(got) == PROCESSES * 20
    assert sum(1 for g in got if g[1]) == 1
    assert sum(1 for g in got if g[2]) == PROCESSES * 20 - 1
    log = app.transitions(tasks[0].id)
    assert sum(1 for t in log if t.reason == Reason.DEBOUNCED) == PROCESSES * 20 - 1


def test_no_debounced_enqueue_is_lost_while_workers_claim(store: Any, tmp_path: Path) -> None:
    """Enqueues fold into the open task while a worker claims at the same time (debounce 0:
    due at once): each enqueue's payload is either run, or replaced by a later enqueue into
    the same task (its hash in a debounced annotation); none is run twice, none lost."""
    from jobtrail.core import payloads

    from .support import run

    app = store.app()
    handled: list[Any] = []
    app.task("k")(lambda ctx, p: handled.append(p))
    got = _race(
        store, tmp_path, "debounce-claimed", seconds=2.0, count=0, meanwhile=lambda: run(app)
    )
    run(app)
    keyed = [json.dumps(p, sort_keys=True) for p in handled]
    assert len(keyed) == len(set(keyed)), "a payload ran twice"
    assert not app.list(state="queued")
    tasks = {t.id for t in app.list(limit=10_000)}
    assert {g[0] for g in got} <= tasks
    assert len(tasks) >= 2  # claims happened between enqueues: new tasks were made
    replaced: set[str] = set()
    for task_id in tasks:
        replaced |= {
            t.data["replaced"] for t in app.transitions(task_id) if t.reason == Reason.DEBOUNCED
        }
    for _, _, _, payload in got:
        ran = json.dumps(payload, sort_keys=True) in keyed
        folded = payloads.encode(payload, 1 << 20)[1] in replaced
        assert ran != folded, (payload, ran, folded)  # exactly one of the two
