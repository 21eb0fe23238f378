"""Four worker processes on one SQLite file under load (500 tasks in CI, JOBTRAIL_MP_TASKS=2000
for more): no ``database is locked`` reaches a
user (worker output) and every task ends succeeded; no task is claimed twice (one ``claimed``
transition per task) and every handler ran exactly once."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

import jobtrail

TASKS = int(os.environ.get("JOBTRAIL_MP_TASKS", "500"))

APP = """
import os
import time
import jobtrail

app = jobtrail.App()
RUNS = os.environ["MP_RUNS"]


@app.task("tiny", lease_seconds=30)
def tiny(ctx, payload):
    fd = os.open(RUNS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{ctx.task_id} {ctx.attempt} {os.getpid()}\\n".encode())
    finally:
        os.close(fd)
    # a little work of its own: with no-op handlers the first worker to get the write lock
    # could drain all 500 tasks (up to 60 a round trip) while the others were still in the
    # busy handler's back-off (sleeps of up to 100 ms), and the four would not have run at
    # once. 3 ms was not enough on a loaded CI machine (one worker drained the 500 in ~0.4 s);
    # at 10 ms one worker alone needs 1.25 s
    time.sleep(0.01)
"""

RUNNER = """
import logging, os, pathlib, sys, time
import mpapp
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
# a start line: every worker is up (Python and jobtrail imported) before any claims, so the
# four really run at once (one that started first would drain 500 short tasks alone)
ready = pathlib.Path(os.environ["MP_READY"])
(ready / str(os.getpid())).touch()
deadline = time.monotonic() + 120
while not (ready / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.005)
n = mpapp.app.run_worker(concurrency=4, burst=True, poll_interval=0.05)
print(f"processed {n}", flush=True)
"""


@pytest.mark.timeout(300)
def test_four_workers_one_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "mp.db"
    url = f"sqlite:///{db}"
    (tmp_path / "mpapp.py").write_text(textwrap.dedent(APP))
    (tmp_path / "runner.py").write_text(textwrap.dedent(RUNNER))
    runs = tmp_path / "runs.txt"
    with jobtrail.App(url) as app:
        app.migrate()
        app.task("tiny")(lambda ctx, payload: None)
        for lo in range(0, TASKS, 500):
            app.enqueue_many(
                [{"kind": "tiny", "payload": {"n": n}} for n in range(lo, min(TASKS, lo + 500))]
            )
    ready = tmp_path / "ready"
    ready.mkdir()
    env = dict(os.environ, JOBTRAIL_DATABASE_URL=url, MP_RUNS=str(runs), MP_READY=str(ready))
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    procs = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "runner.py")],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    deadline = time.monotonic() + 120
    while len(list(ready.iterdir())) < 4 and all(p.poll() is None for p in procs):
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.01)
    (ready / "go").touch()
    outputs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        text = out.decode() + err.decode()
        assert p.returncode == 0, text[-3000:]
        assert "database is locked" not in text.lower(), text[-3000:]
        assert "Traceback" not in text, text[-3000:]
    processed = sum(int(out.decode().split()[-1]) for out, _ in outputs)

    lines = runs.read_text().split("\n")[:-1]
    per_task = Counter(line.split()[0] for line in lines)
    assert len(per_task) == TASKS and set(per_task.values()) == {1}, per_task.most_common(3)
    assert processed == TASKS
    conn = sqlite3.connect(db)
    try:
        states = dict(conn.execute("SELECT state, COUNT(*) FROM jobtrail_tasks GROUP BY state"))
        claims = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT task_id) FROM jobtrail_transitions "
            "WHERE reason = 'claimed'"
        ).fetchone()
    finally:
        conn.close()
    assert states == {"succeeded": TASKS}
    assert claims == (TASKS, TASKS), claims
    pids = {line.split()[2] for line in lines}
    assert len(pids) >= 2, "the load was not shared between processes"
    with jobtrail.App(url) as app:
        assert app.check() == []
