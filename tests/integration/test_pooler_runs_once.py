"""No configuration makes a task run twice (issue 38): three real worker processes of
concurrency 4 and 120 single enqueues, paced so the workers go idle between them, all through a
real PgBouncer in transaction mode (``tests/bouncer.py``), with ``pooler=`` unset and with
``pooler="transaction"``. Each handler run appends ``<task id> <attempt>`` to a file; every task
must run exactly once.

Before the fix, with ``pooler=`` unset, the workers' LISTEN session, its advisory lock (the
hand-off's liveness) and their prepared statements went through the pooler: a task handed to an
idle worker whose notification was lost expired, was claimed again (attempt 2) by the same
worker, and that worker then started it a second time from the registry's ``handed`` mark; the
test's own enqueues failed with ``InvalidSqlStatementName``/``DuplicatePreparedStatement``."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from _integration_helpers import WorkerDir, wait_until
from conftest import Store, make_store

import jobtrail

TASKS, WORKERS, CONCURRENCY = 120, 3, 4
#: what a statement meant for one server session says when it meets another
SESSION_ERRORS = ("DuplicatePreparedStatement", "InvalidSqlStatementName")


@pytest.fixture
def pooled(tmp_path: Path) -> Iterator[Store]:
    s = make_store("pgbouncer-tx", tmp_path)
    try:
        yield s
    finally:
        s.close()


def _done(app: jobtrail.App, n: int) -> bool:
    return len(app.list(state="succeeded", kind="tick", limit=n + 1)) >= n


@pytest.mark.parametrize(
    ("pooler", "enqueuer"),
    [("unset", "pooled"), ("unset", "direct"), ("transaction", "pooled"), ("session", "pooled")],
)
def test_through_pgbouncer_in_transaction_mode_every_task_runs_once(
    pooled: Store, tmp_path: Path, pooler: str, enqueuer: str
) -> None:
    """``enqueuer``: whether the test's enqueues go through the workers' URL (with their
    setting) or straight to PostgreSQL (the workers' side alone: that is how the issue saw the
    duplicates, the pooled enqueue failing first)."""
    options = {} if pooler == "unset" else {"pooler": pooler}
    env = {} if pooler == "unset" else {"JOBTRAIL_POOLER": pooler}
    watch = jobtrail.App(pooled.direct_url)  # reads what happened, past the pooler
    watch.migrate()
    if enqueuer == "pooled":  # the same URL as the workers, with the same setting
        app = jobtrail.App(pooled.url, **options)  # type: ignore[arg-type]
    else:
        app = jobtrail.App(pooled.direct_url)
    app.task("tick", lease_seconds=2)(lambda ctx, payload: None)
    try:
        with WorkerDir(tmp_path / "workerdir", pooled.url, env) as wd:
            procs = [wd.start("--concurrency", str(CONCURRENCY)) for _ in range(WORKERS)]
            wait_until(
                lambda: (
                    all("started" in wd.output(p) for p in procs)
                    or any(p.poll() is not None for p in procs)
                ),
                timeout=30,
                what="the worker processes to start",
            )
            ids: list[str] = []
            failed: Counter[str] = Counter()
            lock = threading.Lock()

            def send(seed: int) -> None:
                for j in range(TASKS // 3):
                    try:
                        task = app.enqueue("tick", {"seed": seed, "j": j})
                    except Exception as exc:  # counted: the verdict comes after the runs
                        with lock:
                            failed[type(exc).__name__] += 1
                        continue
                    with lock:
                        ids.append(task.id)
                    # paced: the workers go idle (and may register for a hand-off) between
                    time.sleep(0.004 * ((seed + j) % 5))

            threads = [threading.Thread(target=send, args=(s,)) for s in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wait_until(
                lambda: _done(watch, len(ids)) or any(p.poll() is not None for p in procs),
                timeout=60,
                what="every task to succeed",
            )
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=30)
            outputs = [log.read_text(errors="replace") for _, log in wd.procs]
            marks = wd.mark("runs")
            runs = marks.read_text().split() if marks.exists() else []
    finally:
        app.close()
    per_task = Counter(runs[0::2])
    twice = sorted(t for t, n in per_task.items() if n > 1)
    confused = sum(out.count(e) for out in outputs for e in SESSION_ERRORS)
    assert (len(twice), dict(failed), confused) == (0, {}, 0), (
        f"pooler={pooler}, enqueues {enqueuer}: {len(twice)} of {len(ids)} tasks ran more than "
        f"once ({twice[:10]}); enqueues failed: {dict(failed)}; the workers' logs name "
        f"{SESSION_ERRORS} {confused} times"
    )
    assert set(per_task) == set(ids), f"lost: {sorted(set(ids) - set(per_task))[:10]}"
    # a worker without pooler="transaction" says once that it runs as with it (session: once
    # it met another session; unset: once it found the pooler at start)
    said = [
        [line for line in out.splitlines() if "is reached through a" in line] for out in outputs
    ]
    if pooler == "transaction":
        assert said == [[]] * WORKERS, said
    elif pooler == "unset":
        assert [len(s) for s in said] == [1] * WORKERS, said
    else:  # a worker that never met another session has nothing to say
        assert all(len(s) <= 1 for s in said), said
    assert all('pooler="transaction"' in s[0] and "listen_url" in s[0] for s in said if s), said
    assert all(p.returncode == 0 for p in procs), outputs
    assert watch.check() == []
    watch.close()
