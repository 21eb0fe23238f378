"""Replay runs on both backends (batches, a stop condition, the record and the
transitions that name the run), the effects a replay preview lists, and the evidence of the
dead-letter view."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import jobtrail
from jobtrail.worker import Worker, WorkerOptions

from .support import last, run, wait_for


@contextmanager
def running_worker(app: jobtrail.App, queues: list[str] | None = None) -> Iterator[Worker]:
    """A worker in running mode (not burst) on a thread, stopped on leaving."""
    worker = Worker(
        app,
        WorkerOptions(
            queues=queues or ["default"],
            concurrency=2,
            poll_interval=0.05,
            sweep_interval=0.1,
            grace=2.0,
            install_signals=False,
        ),
    )
    thread = threading.Thread(target=worker.run, name="replay-run-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(10)
        assert not thread.is_alive()


def _dead(app: jobtrail.App, kind: str, n: int) -> list[str]:
    ids = [app.enqueue(kind, {"n": i}).id for i in range(n)]
    run(app)
    assert all(app.get(i).state == "dead" for i in ids)
    return ids


def _boom_kinds(app: jobtrail.App, healed: dict[str, bool]) -> None:
    @app.task("boom", max_attempts=1)
    def boom(ctx: Any, payload: Any) -> None:
        if not healed["yes"]:
            raise jobtrail.PermanentError("still broken", category="invalid_input")


def test_a_run_stops_when_enough_of_its_replayed_tasks_die_again(app: jobtrail.App) -> None:
    healed = {"yes": False}
    _boom_kinds(app, healed)
    ids = _dead(app, "boom", 12)
    with running_worker(app):
        out = app.replay_dead(
            kind="boom",
            by="ops",
            note="provider fixed?",
            batch_size=3,
            stop_after_failures=5,
            batch_timeout=20,
        )
        # the run stopped at 5 or more; the sixth replayed task still runs (and dies) while
        # the worker does: waited for here, not after the worker stopped
        wait_for(lambda: app.replay_runs()[0]["died_now"] == 6, what="all six to be dead again")
    # batch 1 (3 tasks) died again: 3 < 5, so batch 2 went; then 5 or more of 6 had died
    assert [state for _, state in out] == ["queued"] * 6
    [record] = app.replay_runs()
    assert record["state"] == "stopped" and record["stop_code"] == "died_again"
    assert (record["total"], record["replayed"], record["batches"]) == (12, 6, 2)
    assert record["died_again"] >= 5
    assert record["stop_reason"] == f"{record['died_again']} of 6 replayed tasks died again"
    assert (record["by"], record["note"]) == ("ops", "provider fixed?")
    assert record["filter"]["kind"] == "boom" and record["batch_size"] == 3
    assert record["stop_after_failures"] == 5 and record["finished_at"] is not None
    replayed = {task_id for task_id, _ in out}
    for task_id in ids:
        task = app.get(task_id)
        if task_id in replayed:
            assert task.replay_count == 1
            mark = next(t for t in app.transitions(task_id) if t.reason == "replayed")
            assert mark.data == {"replay_run": record["id"]} and mark.note == "provider fixed?"
        else:  # never touched: still dead from the first time
            assert task.replay_count == 0 and task.state == "dead"


def test_a_run_that_heals_completes_batch_by_batch(app: jobtrail.App) -> None:
    healed = {"yes": False}
    _boom_kinds(app, healed)
    ids = _dead(app, "boom", 5)
    healed["yes"] = True
    with running_worker(app):
        out = app.replay_dead(
            reason="permanent_error",
            by="ops",
            note="fixed",
            batch_size=2,
            stop_after_failures=1,
            batch_timeout=20,
        )
        wait_for(lambda: all(app.get(i).state == "succeeded" for i in ids), timeout=10)
    assert sorted(i for i, _ in out) == sorted(ids)
    [record] = app.replay_runs()
    assert (record["state"], record["stop_code"], record["stop_reason"]) == (
        "completed",
        None,
        None,
    )
    assert (record["replayed"], record["batches"], record["died_now"]) == (5, 3, 0)


def test_without_workers_a_run_replays_one_batch_then_stops_and_can_be_continued(
    app: jobtrail.App,
) -> None:
    healed = {"yes": False}
    _boom_kinds(app, healed)
    ids = _dead(app, "boom", 5)
    out = app.replay_dead(kind="boom", by="ops", note="n", batch_size=2, batch_timeout=0.3)
    assert len(out) == 2
    [record] = app.replay_runs()
    assert (record["state"], record["stop_code"], record["replayed"]) == (
        "stopped",
        "not_settled",
        2,
    )
    assert "batch 1 had not settled within 0.3 s" in record["stop_reason"]
    assert sum(app.get(i).state == "dead" for i in ids) == 3
    # continuing: the same filter with the run's recorded ``until`` picks exactly the rest
    rest = app.replay_dead(kind="boom", until=record["filter"]["until"], by="ops", note="rest")
    assert sorted(i for i, _ in rest) == sorted(set(ids) - {i for i, _ in out})
    newest, first = app.replay_runs()
    assert first["id"] == record["id"] and newest["state"] == "completed"
    assert newest["replayed"] == 3 and newest["batches"] == 1


def test_every_batch_replay_is_a_run_and_its_return_value_is_unchanged(
    app: jobtrail.App,
) -> None:
    _boom_kinds(app, {"yes": False})
    ids = _dead(app, "boom", 2)
    out = app.replay_dead(kind="boom", by="ops", note="n")
    assert sorted(out) == sorted((i, "queued") for i in ids)
    assert app.replay_dead(kind="boom", by="ops", note="again") == []
    newest, first = app.replay_runs()
    assert (first["total"], first["replayed"], first["state"]) == (2, 2, "completed")
    assert (newest["total"], newest["replayed"], newest["state"]) == (0, 0, "completed")
    assert app.replay_runs(limit=1) == [newest]
    assert app.replay_runs(run_id=first["id"]) == [first]
    assert last(app, ids[0]).data == {"replay_run": first["id"]}
    assert f'by ops: "n" (replay run {first["id"]})' in app.explain(ids[0])
    assert f"（重放批次 {first['id']}）" in app.explain(ids[0], lang="zh")
    # a single replay is not a run and names none
    run(app)
    app.replay(ids[0], by="ops", note="one")
    assert last(app, ids[0]).data == {}


@pytest.mark.parametrize(
    "args, message",
    [
        ({"stop_after_failures": 3}, "stop_after_failures needs batch_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": "2"}, "batch_size"),
        ({"batch_size": 2, "stop_after_failures": 0}, "stop_after_failures"),
        ({"batch_size": 2, "batch_timeout": 0}, "batch_timeout"),
        ({"batch_size": 2, "batch_timeout": float("nan")}, "batch_timeout"),
    ],
)
def test_bad_run_arguments_are_refused_and_nothing_is_written(
    app: jobtrail.App, args: dict[str, Any], message: str
) -> None:
    _boom_kinds(app, {"yes": False})
    ids = _dead(app, "boom", 1)
    with pytest.raises(ValueError, match=message):
        app.replay_dead(kind="boom", by="ops", note="n", **args)
    assert app.replay_runs() == []
    assert app.get(ids[0]).state == "dead"
    with pytest.raises(ValueError, match="limit"):
        app.replay_runs(limit=0)


# -- effects in the preview ------------------------------------------------------------------
def test_the_preview_lists_the_effects_a_replay_performs_again_and_skips(
    app: jobtrail.App,
) -> None:
    calls: list[str] = []
    second_fails = {"yes": True}

    @app.task("publish", max_attempts=1)
    def publish(ctx: Any, payload: Any) -> None:
        def upload(key: str) -> dict[str, str]:
            calls.append("upload")
            return {"id": f"img-{key}"}

        def submit(key: str) -> dict[str, str]:
            calls.append("submit")
            if second_fails["yes"]:  # not a refusal: the call may have happened (uncertain)
                raise ConnectionResetError("connection reset while submitting")
            return {"id": "post-1"}

        ctx.effect("upload", upload)
        ctx.effect("submit", submit)

    @app.task("plain", max_attempts=1)
    def plain(ctx: Any, payload: Any) -> None:
        raise jobtrail.PermanentError("bad", category="invalid_input")

    task = app.enqueue("publish", {"body": "secret text"})
    other = app.enqueue("plain")
    run(app)
    assert app.get(task.id).state == "dead" and calls == ["upload", "submit"]
    preview = app.dead_preview()
    assert sorted(t.id for t in preview["tasks"]) == sorted([task.id, other.id])
    effects = preview["effects"]
    assert effects[other.id] == {"again": [], "skip": []}
    [again] = effects[task.id]["again"]
    [skip] = effects[task.id]["skip"]
    assert (again["name"], again["status"], again["effect_key"]) == (
        "submit",
        "intent",
        f"{task.id}/submit",
    )
    assert (skip["name"], skip["status"]) == ("upload", "confirmed")
    assert skip["provider_ids"] == [f"img-{task.id}/upload"]
    assert skip["confirmed_at"] is not None
    # and that is what the replay does: upload is skipped, submit runs again
    second_fails["yes"] = False
    app.replay(task.id, by="ops", note="provider fixed")
    run(app)
    assert app.get(task.id).state == "succeeded"
    assert calls == ["upload", "submit", "submit"]


# -- dead-letter evidence ----------------------------------------------------------------------
def test_dead_letters_carry_their_evidence_and_never_the_payload(store: Any) -> None:
    app = store.app(version="v1.2.3")

    @app.task("send", max_attempts=2, backoff_base=0.01, backoff_cap=0.01)
    def send(ctx: Any, payload: Any) -> None:
        ctx.effect("notify", lambda key: {"provider_id": "msg-77"})
        raise jobtrail.TransientError("upstream down", category="unavailable")

    @app.task("submit", max_attempts=1)
    def submit(ctx: Any, payload: Any) -> None:
        ctx.await_receipt("rcpt-9", timeout=60)

    keyed = app.enqueue("send", {"card": "4111-secret"}, idempotency_key="order-1")
    plain = app.enqueue("send", {"card": "4111-secret-2"})
    wait_for(
        lambda: run(app) is not None and all(app.get(t.id).state == "dead" for t in (keyed, plain)),
        timeout=10,
        what="both sends to die",
    )
    receipt = app.enqueue("submit", {"card": "4111-secret-3"})
    run(app)
    app.confirm_receipt(receipt.id, ok=False, category="invalid_input", error="rejected")
    assert app.get(receipt.id).state == "dead"

    groups = {(g["reason"], g["kind"]): g for g in app.dead(tasks=5)}
    sends = groups[("attempts_exhausted", "send")]
    assert sends["count"] == 2 and sends["versions"] == ["v1.2.3"]
    assert sends["categories"] == ["unavailable"]
    assert sends["attempts"] == {"min": 2, "max": 2}
    assert sends["first_failure"] < sends["last_failure"]
    by_id = {t["id"]: t for t in sends["tasks"]}
    died = [app.get(t["id"]).finished_at for t in sends["tasks"]]
    assert died == sorted(died, reverse=True)  # the newest deaths first
    k = by_id[keyed.id]
    assert (k["category"], k["attempts"], k["max_attempts"], k["version"]) == (
        "unavailable",
        2,
        2,
        "v1.2.3",
    )
    assert k["input_ref"] == "key:order-1" and k["idempotency_key"] == "order-1"
    assert k["provider_ids"] == ["msg-77"]
    assert k["effects"] == [
        {"name": "notify", "status": "confirmed", "effect_key": f"{keyed.id}/notify"}
    ]
    # two failures: the retry, then the death; the death is the task's finish
    timeline = app.transitions(keyed.id)
    failures = [t.at for t in timeline if t.error_category is not None]
    assert len(failures) == 2
    assert (k["first_failure"], k["last_failure"]) == (failures[0], failures[-1])
    assert k["last_failure"] == app.get(keyed.id).finished_at
    p = by_id[plain.id]
    assert p["input_ref"] == f"sha256:{p['payload_hash']}" and len(p["payload_hash"]) == 64
    r = groups[("receipt_failed", "submit")]["tasks"][0]
    assert r["provider_ids"] == ["rcpt-9"] and r["category"] == "invalid_input"
    assert "secret" not in json.dumps(app.dead(tasks=5), default=str)
    # without tasks=, the groups only (the view's cheap form); a bad count is refused
    assert all(g["tasks"] == [] for g in app.dead())
    assert app.dead(tasks=1)[0]["tasks"][0]["id"] in {keyed.id, plain.id, receipt.id}
    with pytest.raises(ValueError, match="tasks"):
        app.dead(tasks=-1)
