"""Races with real concurrency (spawned processes and threads) on both backends.

Every change is a conditional update (zero rows affected means somebody else moved the task
first); the database clock decides; edges 3, 13, 14, 15, 16 of docs/state_machine.md; leases,
fenced by owner + attempt + unexpired lease; and two-phase cancel.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _integration_helpers import (
    claim_one,
    claim_racer,
    lease_expired_by_db_clock,
    reasons,
    recording_worker,
    task_row,
    wait_until,
)

import jobtrail
from jobtrail.core import transition
from jobtrail.model.machine import State
from jobtrail.store.base import Move

SPAWN = multiprocessing.get_context("spawn")


def _stop_processes(procs: list[Any]) -> None:
    for proc in procs:
        proc.join(timeout=30)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=10)


# -- two (four) processes race for one task -----------------------------------------------------


def test_processes_racing_for_one_task_exactly_one_wins(store: Any) -> None:
    contenders, rounds = 4, 20
    app = store.app()

    @app.task("k")
    def k(ctx: jobtrail.Context, payload: Any) -> None:  # never run: claims go through the seam
        raise AssertionError("not run in this test")

    barrier = SPAWN.Barrier(contenders + 1)
    results = SPAWN.Queue()
    owners = [f"racer-{i}" for i in range(contenders)]
    procs = [
        SPAWN.Process(
            target=claim_racer, args=(store.url, owner, "k", rounds, barrier, results), daemon=True
        )
        for owner in owners
    ]
    for proc in procs:
        proc.start()
    winners: dict[str, str] = {}
    try:
        for r in range(rounds):
            task = app.enqueue("k", {"round": r})
            barrier.wait(timeout=60)  # all contenders claim at once
            got = [results.get(timeout=60) for _ in range(contenders)]
            errors = [(owner, err) for (_, owner, _, err) in got if err]
            assert errors == [], f"round {r}: a contender failed: {errors}"
            assert {rr for (rr, _, _, _) in got} == {r}
            won = [(owner, ids) for (_, owner, ids, _) in got if ids]
            assert len(won) == 1, f"round {r}: {len(won)} contenders claimed: {won}"
            assert won[0][1] == [task.id], f"round {r}: claimed {won[0][1]}, not {task.id}"
            winners[task.id] = won[0][0]
    finally:
        _stop_processes(procs)
        results.close()
        results.join_thread()
    assert all(proc.exitcode == 0 for proc in procs), [p.exitcode for p in procs]

    for task_id, winner in winners.items():
        log = app.transitions(task_id)
        claims = [t for t in log if t.reason == "claimed"]
        assert [t.reason for t in log] == ["enqueued", "claimed"]
        assert len(claims) == 1 and claims[0].actor == winner and claims[0].attempt == 1
        task = app.get(task_id)
        assert task.state is State.LEASED and task.lease_owner == winner and task.attempts == 1


# -- many tasks, several worker processes --------------------------------------------------------


def test_many_tasks_several_worker_processes_each_runs_once(store: Any, tmp_path: Path) -> None:
    n_tasks, n_workers = 200, 3
    app = store.app()

    @app.task("rec")
    def rec(ctx: jobtrail.Context, payload: Any) -> None:  # the workers' handler runs there
        raise AssertionError("not run in this process")

    tasks = app.enqueue_many([{"kind": "rec", "payload": {"i": i}} for i in range(n_tasks)])
    ids = {t.id for t in tasks}
    assert len(ids) == n_tasks

    out = tmp_path / "runs.txt"
    barrier = SPAWN.Barrier(n_workers)
    results = SPAWN.Queue()
    procs = [
        SPAWN.Process(
            target=recording_worker, args=(store.url, str(out), barrier, results), daemon=True
        )
        for _ in range(n_workers)
    ]
    for proc in procs:
        proc.start()
    try:
        got = [results.get(timeout=90) for _ in range(n_workers)]
    finally:
        _stop_processes(procs)
        results.close()
        results.join_thread()
    assert [err for (_, _, err) in got if err] == []
    assert all(proc.exitcode == 0 for proc in procs), [p.exitcode for p in procs]
    assert sum(n for (_, n, _) in got) == n_tasks

    lines = out.read_text().splitlines()
    ran = [line.split()[0] for line in lines]
    duplicates = {i for i in ran if ran.count(i) > 1}
    assert duplicates == set(), f"handlers ran more than once: {sorted(duplicates)[:10]}"
    assert set(ran) == ids, f"lost: {sorted(ids - set(ran))[:10]}"
    assert all(line.split()[2] == "1" for line in lines)

    done = app.list(state="succeeded", kind="rec", limit=1000)
    assert {t.id for t in done} == ids
    for task_id in ids:
        assert reasons(app, task_id) == ["enqueued", "claimed", "completed"]


# -- cancel racing claim -------------------------------------------------------------------------


def _race_cancel_with_claim(
    pool: ThreadPoolExecutor,
    worker_app: jobtrail.App,
    caller_app: jobtrail.App,
    task_id: str,
    offset: float,
) -> tuple[int, jobtrail.CancelResult]:
    """A burst worker and a cancel, released together; the cancel ``offset`` s later."""
    start = threading.Barrier(2)

    def work() -> int:
        start.wait(timeout=30)
        return worker_app.run_worker(burst=True, concurrency=1, poll_interval=0.05)

    def cancel() -> jobtrail.CancelResult:
        start.wait(timeout=30)
        if offset:
            time.sleep(offset)
        return caller_app.cancel(task_id, by="racer", note=f"offset {offset}")

    worked = pool.submit(work)
    cancelled = pool.submit(cancel)
    return worked.result(timeout=60), cancelled.result(timeout=60)


def test_cancel_racing_claim_ends_consistently(store: Any) -> None:
    rounds = 30
    worker_app = store.app()
    caller_app = store.app()
    ran: list[str] = []

    @worker_app.task("c")
    def c(ctx: jobtrail.Context, payload: Any) -> None:
        ran.append(ctx.task_id)
        for _ in range(5):  # a handler with a few units of work, a boundary before each
            ctx.check_cancelled()

    @caller_app.task("c")
    def c_caller(ctx: jobtrail.Context, payload: Any) -> None:
        raise AssertionError("the caller app runs no worker")

    seen: dict[tuple[str, ...], int] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for r in range(rounds):
            task = caller_app.enqueue("c", {"round": r})
            # Where the cancel lands relative to the claim is the scheduler's business. The
            # canceller's start is staggered over the worker's first milliseconds (it claims
            # after ~3-5 ms) so that rounds meet it at different points: before, around and
            # after its claim. The stagger moves the crossing point; it hides nothing, since
            # every outcome is accepted only if the log and the CancelResult agree.
            processed, result = _race_cancel_with_claim(
                pool, worker_app, caller_app, task.id, offset=(r % 10) * 0.001
            )

            entries = caller_app.transitions(task.id)
            log = [t.reason for t in entries]
            by_racer = [t.reason for t in entries if t.actor == "racer"]
            assert by_racer == [
                x for x in log if x in ("cancelled_before_start", "cancel_requested")
            ], entries
            final = caller_app.get(task.id)
            seen[tuple(log)] = seen.get(tuple(log), 0) + 1
            assert not ("cancelled_before_start" in log and "claimed" in log), log
            assert result.task_id == task.id
            if log == ["enqueued", "cancelled_before_start"]:
                assert result.outcome == "cancelled" and result.state is State.CANCELLED
                assert result.reason == "cancelled_before_start"
                assert final.state is State.CANCELLED and final.attempts == 0
                assert processed == 0 and task.id not in ran
            elif log == ["enqueued", "claimed", "cancel_requested", "cancel_confirmed"]:
                assert result.outcome == "cancel_requested"
                assert result.state is State.CANCEL_REQUESTED
                assert final.state is State.CANCELLED
                assert processed == 1 and ran.count(task.id) == 1
            elif log == ["enqueued", "claimed", "cancel_requested", "cancel_too_late"]:
                assert result.outcome == "cancel_requested"
                assert final.state is State.SUCCEEDED
                assert processed == 1 and ran.count(task.id) == 1
            elif log == ["enqueued", "claimed", "completed"]:
                # the handler finished before the cancel arrived: nothing to cancel
                assert result.outcome == "already_terminal"
                assert result.state is State.SUCCEEDED and result.reason == "completed"
                assert final.state is State.SUCCEEDED
                assert processed == 1 and ran.count(task.id) == 1
            else:
                pytest.fail(f"round {r}: unexpected log {log} (cancel said {result})")
            assert final.state.terminal
    # Which interleavings happened is up to the scheduler; print them for the record.
    print("cancel/claim interleavings:", seen)


# -- fencing: a stale worker cannot complete after a takeover ------------------------------------


def _completion(task_id: str, owner: str, attempt: int) -> Move:
    return Move(
        task_id=int(task_id),
        from_state=State.LEASED,
        to_state=State.SUCCEEDED,
        reason="completed",
        actor=owner,
        owner=owner,
        attempt=attempt,
    )


def _apply(app: jobtrail.App, move: Move) -> Any:
    with app._driver.transaction() as tx:
        return transition.apply(app._driver, tx, move)


def test_stale_worker_cannot_complete_after_takeover(store: Any) -> None:
    app = store.app()

    @app.task("s", lease_seconds=0.3)
    def s(ctx: jobtrail.Context, payload: Any) -> None:
        raise AssertionError("not run: the test drives the seam")

    task = app.enqueue("s")
    [claimed_a] = claim_one(app, "A", ["s"])
    assert str(claimed_a["id"]) == task.id and claimed_a["attempts"] == 1
    wait_until(
        lambda: lease_expired_by_db_clock(app, task.id),
        timeout=10,
        what="A's lease to expire by the database clock",
    )
    assert app.sweep() == {"lease_expired": 1}
    assert app.get(task.id).state is State.QUEUED

    [claimed_b] = claim_one(app, "B", ["s"])
    assert claimed_b["attempts"] == 2 and claimed_b["lease_owner"] == "B"
    # B renews at once, as its heartbeat would, so that its lease cannot run out mid-test.
    with app._driver.transaction() as tx:
        assert app._driver.lease_extend(tx, int(task.id), "B", 2, 30.0) is not None

    before = app.transitions(task.id)
    assert [t.reason for t in before] == ["enqueued", "claimed", "lease_expired", "claimed"]
    # A comes back: its completion, its retry, its renewal are all refused and append nothing.
    assert _apply(app, _completion(task.id, "A", 1)) is None
    assert (
        _apply(
            app,
            Move(
                task_id=int(task.id),
                from_state=State.LEASED,
                to_state=State.QUEUED,
                reason="retry_scheduled",
                actor="A",
                owner="A",
                attempt=1,
                run_in=0.0,
            ),
        )
        is None
    )
    # Even with B's attempt number, A is not the holder.
    assert _apply(app, _completion(task.id, "A", 2)) is None
    # And B with A's (stale) attempt number is refused too: the attempt is the fencing token.
    assert _apply(app, _completion(task.id, "B", 1)) is None
    with app._driver.transaction() as tx:
        assert app._driver.lease_extend(tx, int(task.id), "A", 1, 30.0) is None
    assert app.transitions(task.id) == before
    row = task_row(app, task.id)
    assert row["state"] == "leased" and row["lease_owner"] == "B" and row["attempts"] == 2

    assert _apply(app, _completion(task.id, "B", 2)) is not None
    final = app.get(task.id)
    assert final.state is State.SUCCEEDED and final.last_reason == "completed"
    log = app.transitions(task.id)
    assert [(t.reason, t.actor, t.attempt) for t in log[-2:]] == [
        ("claimed", "B", 2),
        ("completed", "B", 2),
    ]


def test_completion_after_expiry_is_refused_before_any_sweep(store: Any) -> None:
    app = store.app()

    @app.task("s", lease_seconds=0.3)
    def s(ctx: jobtrail.Context, payload: Any) -> None:
        raise AssertionError("not run: the test drives the seam")

    task = app.enqueue("s")
    [claimed] = claim_one(app, "A", ["s"])
    # While the lease is valid, a renewal by the holder works (a positive control).
    with app._driver.transaction() as tx:
        assert app._driver.lease_extend(tx, int(task.id), "A", 1, 0.3) is not None
    wait_until(
        lambda: lease_expired_by_db_clock(app, task.id),
        timeout=10,
        what="the lease to expire by the database clock",
    )
    before = app.transitions(task.id)
    assert _apply(app, _completion(task.id, "A", 1)) is None
    with app._driver.transaction() as tx:
        assert app._driver.lease_extend(tx, int(task.id), "A", 1, 30.0) is None
    assert app.transitions(task.id) == before
    # No sweeper ran: the row still says leased, and the sweeper decides the attempt's fate.
    row = task_row(app, task.id)
    assert row["state"] == "leased" and row["lease_owner"] == "A"
    assert app.sweep() == {"lease_expired": 1}
    assert reasons(app, task.id) == ["enqueued", "claimed", "lease_expired"]
    assert app.get(task.id).state is State.QUEUED


# -- sweepers racing a completion at the lease boundary ------------------------------------------


def _race_completion_with_sweepers(
    app: jobtrail.App, sweeper_apps: list[jobtrail.App], task_id: str, offset: float
) -> tuple[Any, list[Any]]:
    """Sweepers sweep continuously; the holder ("H", attempt 1) completes ``offset`` s in."""
    stop = threading.Event()
    swept: list[dict[str, int]] = []

    def sweeper(sweeper_app: jobtrail.App) -> None:
        while not stop.is_set():
            moved = sweeper_app.sweep()
            if moved:
                swept.append(moved)
            if task_row(sweeper_app, task_id)["state"] != "leased":
                return

    with ThreadPoolExecutor(max_workers=len(sweeper_apps)) as pool:
        futures = [pool.submit(sweeper, a) for a in sweeper_apps]
        time.sleep(offset)  # when the holder finishes its work; the sweepers race with it
        completed = _apply(app, _completion(task_id, "H", 1))
        try:
            wait_until(
                lambda: task_row(app, task_id)["state"] != "leased",
                timeout=10,
                what="the attempt to be decided",
            )
        finally:
            stop.set()
            for f in futures:
                f.result(timeout=30)
    return completed, swept


def test_sweepers_racing_a_completion_at_the_lease_boundary(store: Any) -> None:
    """A holder completes around the moment its lease expires while two sweepers (as in two
    workers) sweep continuously: exactly one of them decides the attempt, never both."""
    rounds, lease = 16, 0.1
    app = store.app()
    sweeper_apps = [store.app(), store.app()]

    @app.task("b", lease_seconds=lease)
    def b(ctx: jobtrail.Context, payload: Any) -> None:
        raise AssertionError("not run: the test drives the seam")

    outcomes: dict[str, int] = {}
    for r in range(rounds):
        queue = f"q{r}"  # a queue per round, so that no round claims another round's task
        task = app.enqueue("b", {"round": r}, queue=queue)
        [row] = claim_one(app, "H", ["b"], queues=[queue])
        assert str(row["id"]) == task.id
        # The holder's completion lands before, around or after the expiry, by the round.
        offset = lease * (0.85 + (r % 8) * 0.04)  # 85 % .. 113 % of the lease
        completed, swept = _race_completion_with_sweepers(app, sweeper_apps, task.id, offset)
        log = reasons(app, task.id)
        outcomes[log[-1]] = outcomes.get(log[-1], 0) + 1
        state = app.get(task.id).state
        if completed is not None:
            assert log == ["enqueued", "claimed", "completed"], log
            assert state is State.SUCCEEDED and swept == []
        else:
            assert log == ["enqueued", "claimed", "lease_expired"], log
            assert state is State.QUEUED and swept == [{"lease_expired": 1}], swept
    print("lease boundary outcomes:", outcomes)


# -- the database clock decides ------------------------------------------------------------------


def test_database_clock_decides_due_time(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app = store.app()
    ran: list[str] = []

    @app.task("later")
    def later(ctx: jobtrail.Context, payload: Any) -> None:
        ran.append(ctx.task_id)

    real_time, real_time_ns = time.time, time.time_ns
    skew = 3600
    monkeypatch.setattr(time, "time", lambda: real_time() + skew)
    monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + skew * 10**9)
    assert time.time() - real_time() > skew - 1  # the patch is in force

    delayed = app.enqueue("later", {"which": "delayed"}, delay=600)
    control = app.enqueue("later", {"which": "now"})
    app.run_worker(burst=True, concurrency=2, poll_interval=0.05)

    # The worker ran (the control task), but did not take the task due in ten minutes although
    # its own clock is an hour ahead.
    assert ran == [control.id]
    assert app.get(control.id).state is State.SUCCEEDED
    d = app.get(delayed.id)
    assert d.state is State.QUEUED and d.attempts == 0
    assert reasons(app, delayed.id) == ["enqueued"]

    # run_at was computed by the database: db now + 600 s, not the patched clock + 600 s.
    row = task_row(app, delayed.id)
    db_now = row["db_now"]
    assert abs((row["run_at"] - db_now) - timedelta(seconds=600)) < timedelta(seconds=10), (
        row["run_at"],
        db_now,
    )
    patched = real_time() + skew
    assert abs(row["run_at"].timestamp() - (patched + 600)) > skew - 60
    if store.postgres:
        # Straight from the server, outside jobtrail's own code paths.
        import psycopg

        with psycopg.connect(store.direct_url) as conn:
            server_now = conn.execute("SELECT now()").fetchone()[0]
        lead = (row["run_at"] - server_now).total_seconds()
        assert 590 < lead <= 600, lead
