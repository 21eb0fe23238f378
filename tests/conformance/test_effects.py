"""Steps, effects and cancellation boundaries (and reconcile hooks), on both backends.

Every handler that must be in a known place while the test acts blocks on a ``threading.Event``;
the test waits for the state it needs with a deadline (never a bare sleep).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import jobtrail
from jobtrail import Cancelled, TransientError
from jobtrail.worker import Worker

from ._effects_support import WAIT, Background, Gate, burst, reasons

# -- ctx.step --------------------------------------------------------------------------------------


def test_steps_run_once_and_a_retry_resumes_after_the_last_confirmed_step(
    app: jobtrail.App,
) -> None:
    calls = {"one": 0, "two": 0, "three": 0}
    seen: list[tuple[int, Any, Any, Any]] = []

    def make(name: str, result: Any, fail_first: bool = False) -> Callable[[], Any]:
        def fn() -> Any:
            calls[name] += 1
            if fail_first and calls[name] == 1:
                raise TransientError("upstream busy", category="unavailable")
            return result

        return fn

    @app.task("three_steps", backoff_base=0)
    def three_steps(ctx: jobtrail.Context, payload: Any) -> None:
        a = ctx.step("one", make("one", {"images": [1, 2]}))
        b = ctx.step("two", make("two", "uploaded"))
        c = ctx.step("three", make("three", 3, fail_first=True))
        seen.append((ctx.attempt, a, b, c))

    task = app.enqueue("three_steps")
    burst(app)

    done = app.get(task.id)
    assert done.state == "succeeded"
    assert done.attempts == 2
    # steps 1 and 2 never ran again; step 3 ran once per attempt
    assert calls == {"one": 1, "two": 1, "three": 2}
    # the retry got steps 1 and 2 from the store (same JSON values)
    assert seen == [(2, {"images": [1, 2]}, "uploaded", 3)]
    assert done.steps == {"one": {"images": [1, 2]}, "two": "uploaded", "three": 3}
    assert reasons(app, task.id) == [
        "enqueued",
        "claimed",
        "retry_scheduled",
        "claimed",
        "completed",
    ]


def test_a_step_result_is_not_written_once_the_attempt_no_longer_holds_the_task(
    app: jobtrail.App,
) -> None:
    gate = Gate()
    ran_after: list[str] = []

    @app.task("slow_step")
    def slow_step(ctx: jobtrail.Context, payload: Any) -> None:
        def fn() -> str:
            gate.block()
            return "late result"

        ctx.step("one", fn)
        ran_after.append("handler went on")  # must not happen: the write raised LeaseLost

    task = app.enqueue("slow_step")
    worker = Background(app)
    gate.wait_entered()
    app.force(task.id, "dead", by="ops", note="taken away mid-step", effects_checked=True)
    gate.release.set()
    worker.join()

    after = app.get(task.id)
    assert after.state == "dead" and after.last_reason == "manual_fix"
    assert after.steps == {}
    assert ran_after == []
    assert reasons(app, task.id) == ["enqueued", "claimed", "manual_fix"]


def test_step_and_effect_names_cannot_be_mixed(app: jobtrail.App) -> None:
    errors: list[str] = []

    @app.task("mixed", max_attempts=1)
    def mixed(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.step("x", lambda: 1)
        try:
            ctx.effect("x", lambda key: {"id": key})
        except ValueError as exc:
            errors.append(str(exc))

    task = app.enqueue("mixed")
    burst(app)
    assert app.get(task.id).state == "succeeded"
    assert len(errors) == 1 and "'x'" in errors[0]


# -- ctx.effect: intent, key, receipt --------------------------------------------------------------


def test_effect_writes_intent_before_the_call_and_the_receipt_after(app: jobtrail.App) -> None:
    keys: list[str] = []
    during: list[str] = []
    task_ids: list[str] = []

    def charge(key: str) -> dict[str, Any]:
        keys.append(key)
        during.append(app.explain(task_ids[0]))  # the intent is already in the store
        return {"charge_id": "ch_1", "amount": 12}

    @app.task("pay")
    def pay(ctx: jobtrail.Context, payload: Any) -> None:
        receipt = ctx.effect("charge", charge)
        assert receipt == {"charge_id": "ch_1", "amount": 12}

    task = app.enqueue("pay")
    task_ids.append(task.id)
    burst(app)

    key = f"{task.id}/charge"
    assert keys == [key]
    assert len(during) == 1
    assert f"effect charge [key {key}]: started by attempt 1, outcome uncertain" in during[0]
    done = app.get(task.id)
    assert done.state == "succeeded"
    assert done.steps == {"charge": {"charge_id": "ch_1", "amount": 12}}
    text = app.explain(task.id)
    assert f"effect charge [key {key}]: confirmed (attempt 1)" in text
    assert "outcome uncertain" not in text


def test_not_started_effect_is_called_on_the_retry_without_reconcile(app: jobtrail.App) -> None:
    """'Not started': an attempt that failed before the effect leaves no intent."""
    calls: list[str] = []
    reconciled: list[str] = []
    failures = iter([True])

    def reconcile(key: str) -> Any:
        reconciled.append(key)
        return {"from": "reconcile"}

    @app.task("late_failure_first", backoff_base=0, reconcile=reconcile)
    def handler(ctx: jobtrail.Context, payload: Any) -> None:
        if next(failures, False):
            raise TransientError("before the effect", category="timeout")
        ctx.effect("charge", lambda key: calls.append(key) or {"ok": True})

    task = app.enqueue("late_failure_first")
    burst(app)
    assert app.get(task.id).state == "succeeded"
    assert calls == [f"{task.id}/charge"]
    assert reconciled == []
    assert app.get(task.id).steps == {"charge": {"ok": True}}


def test_a_provider_refusal_records_the_intent_as_refused(app: jobtrail.App) -> None:
    """``fn`` raising a jobtrail error means the provider refused: nothing happened, the intent
    is kept as ``refused``, the retry calls again without asking ``reconcile``."""
    calls: list[str] = []
    reconciled: list[str] = []
    seen: list[list[dict[str, Any]]] = []
    task_ids: list[str] = []

    def charge(key: str) -> dict[str, Any]:
        calls.append(key)
        if len(calls) == 1:
            raise TransientError("429 from provider", category="rate_limited")
        seen.append(app.steps(task_ids[0]))
        return {"ok": len(calls)}

    @app.task("refused", backoff_base=0, reconcile=lambda key: reconciled.append(key))
    def refused(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.effect("charge", charge)

    task = app.enqueue("refused")
    task_ids.append(task.id)
    burst(app)
    assert app.get(task.id).state == "succeeded"
    assert calls == [f"{task.id}/charge"] * 2
    assert reconciled == []
    assert app.get(task.id).steps == {"charge": {"ok": 2}}
    # the second attempt re-recorded the intent over the refusal before calling again
    assert [(s["status"], s["attempt"], s["error"]) for s in seen[0]] == [("intent", 2, None)]


class ProviderError(Exception):
    """An HTTP client's error as requests/httpx raise it: the status on ``response``."""

    def __init__(self, status: int) -> None:
        super().__init__(f"provider answered HTTP {status}")
        self.response = type("Response", (), {"status_code": status})()


@pytest.mark.parametrize("status", [418, 429, 503])
def test_an_http_refusal_is_retried_by_a_non_reentrant_kind(app: jobtrail.App, status: int) -> None:
    """What an effect's failure proves: an exception carrying HTTP 400-499 or 503 proves the
    provider refused, so a ``reentrant=False`` kind retries it like any failure (it went dead as
    EffectUncertain)."""
    calls: list[str] = []
    during: list[str] = []
    task_ids: list[str] = []

    def charge(key: str) -> dict[str, Any]:
        calls.append(key)
        if len(calls) == 1:
            raise ProviderError(status)
        during.append(app.explain(task_ids[0]))
        return {"charge": "ch_2"}

    @app.task("strict_pay", reentrant=False, backoff_base=0, retry_unclassified=True)
    def strict_pay(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.effect("charge", charge)

    task = app.enqueue("strict_pay")
    task_ids.append(task.id)
    burst(app)
    done = app.get(task.id)
    assert (done.state, done.last_reason, done.attempts) == ("succeeded", "completed", 2)
    assert calls == [f"{task.id}/charge"] * 2
    assert done.steps == {"charge": {"charge": "ch_2"}}
    # during the second call the intent is the second attempt's own (the refusal was no doubt)
    assert f"effect charge [key {task.id}/charge]: started by attempt 2" in during[0]


@pytest.mark.parametrize("status", [400, 503])
def test_explain_says_an_effect_was_refused(app: jobtrail.App, status: int) -> None:
    @app.task("refused_once", reentrant=False, max_attempts=1)
    def refused_once(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.effect("charge", lambda key: (_ for _ in ()).throw(ProviderError(status)))

    task = app.enqueue("refused_once")
    burst(app)
    key = f"{task.id}/charge"
    assert app.get(task.id).state == "dead"
    text = app.explain(task.id)
    assert (
        f"effect charge [key {key}]: refused by the provider in attempt 1 (nothing happened; "
        f"the next attempt calls again) (ProviderError: provider answered HTTP {status})"
    ) in text
    assert "outcome uncertain" not in text
    assert "被服务方拒绝" in app.explain(task.id, lang="zh")
    assert [s["status"] for s in app.steps(task.id)] == ["refused"]


@pytest.mark.parametrize("status", [500, 502, 504, None])
def test_a_failure_without_evidence_leaves_the_effect_uncertain(
    app: jobtrail.App, status: int | None
) -> None:
    """500/502/504 and an exception with no status prove nothing: a non-reentrant kind stops."""
    calls: list[str] = []

    def charge(key: str) -> dict[str, Any]:
        calls.append(key)
        raise ProviderError(status) if status else TimeoutError("read timed out")

    @app.task("unsure_pay", reentrant=False, backoff_base=0, retry_unclassified=True)
    def unsure_pay(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.effect("charge", charge)

    task = app.enqueue("unsure_pay")
    burst(app)
    done = app.get(task.id)
    assert (done.state, done.last_reason) == ("dead", "permanent_error")
    assert "outcome is unknown" in (done.last_error or "")
    assert calls == [f"{task.id}/charge"]
    assert "outcome uncertain" in app.explain(task.id)


def test_a_confirmed_effect_is_never_repeated(app: jobtrail.App) -> None:
    calls: list[str] = []
    reconciled: list[str] = []
    got: list[Any] = []
    failures = iter([True])

    @app.task("confirmed_then_fail", backoff_base=0, reconcile=lambda k: reconciled.append(k))
    def handler(ctx: jobtrail.Context, payload: Any) -> None:
        receipt = ctx.effect("charge", lambda key: calls.append(key) or {"charge": len(calls)})
        got.append((ctx.attempt, receipt))
        if next(failures, False):
            raise TransientError("after the effect", category="unavailable")

    task = app.enqueue("confirmed_then_fail")
    burst(app)
    assert app.get(task.id).state == "succeeded"
    assert calls == [f"{task.id}/charge"]
    assert reconciled == []
    assert got == [(1, {"charge": 1}), (2, {"charge": 1})]


RECONCILE_CASES = [
    # (reentrant, hook, provider calls expected, final state, final reason)
    (True, "receipt", 1, "succeeded", "completed"),
    (False, "receipt", 1, "succeeded", "completed"),
    (True, "none", 2, "succeeded", "completed"),
    (False, "none", 2, "succeeded", "completed"),
    (True, "raises", 2, "succeeded", "completed"),
    (False, "raises", 1, "dead", "permanent_error"),
    (True, "absent", 2, "succeeded", "completed"),
    (False, "absent", 1, "dead", "permanent_error"),
]


def test_an_uncertain_effect_asks_reconcile_before_any_repeat(app: jobtrail.App) -> None:
    """'Uncertain': the provider charged but the answer was lost (the call raised a non-jobtrail
    error); the next attempt asks ``reconcile(effect_key)`` first. ``dict`` → confirmed without
    a call; ``None`` → provably not done, called again; raises (or no hook) → unknown: a
    reentrant kind calls again with the same key, a non-reentrant kind goes to ``dead``."""
    keys: dict[int, list[str]] = {}
    reconciled: dict[int, list[str]] = {}

    def register(i: int, reentrant: bool, hook: str) -> None:
        keys[i], reconciled[i] = [], []

        def charge(key: str) -> dict[str, Any]:
            keys[i].append(key)
            if len(keys[i]) == 1:
                raise ConnectionResetError("charged, but the connection dropped")
            return {"charge": "second call"}

        def reconcile(key: str) -> Any:
            reconciled[i].append(key)
            if hook == "receipt":
                return {"charge": "found at the provider"}
            if hook == "none":
                return None
            raise RuntimeError("provider lookup is down")

        @app.task(
            f"uncertain_{i}",
            reentrant=reentrant,
            backoff_base=0,
            reconcile=None if hook == "absent" else reconcile,
        )
        def uncertain(ctx: jobtrail.Context, payload: Any) -> None:
            ctx.effect("charge", charge)

    tasks = []
    for i, (reentrant, hook, *_) in enumerate(RECONCILE_CASES):
        register(i, reentrant, hook)
        tasks.append(app.enqueue(f"uncertain_{i}"))
    burst(app)

    for i, (reentrant, hook, calls, state, reason) in enumerate(RECONCILE_CASES):
        case = f"reentrant={reentrant} hook={hook}"
        task_id = tasks[i].id
        key = f"{task_id}/charge"
        done = app.get(task_id)
        assert (done.state, done.last_reason) == (state, reason), case
        assert keys[i] == [key] * calls, case  # a repeat always carries the same effect key
        assert reconciled[i] == ([] if hook == "absent" else [key]), case
        log = reasons(app, task_id)
        assert log[:4] == ["enqueued", "claimed", "retry_scheduled", "claimed"], case
        text = app.explain(task_id)
        if state == "succeeded":
            if hook == "receipt":
                assert done.steps == {"charge": {"charge": "found at the provider"}}, case
            else:
                assert done.steps == {"charge": {"charge": "second call"}}, case
            assert f"effect charge [key {key}]: confirmed (attempt 2)" in text, case
        else:
            assert done.steps == {}, case
            assert done.last_error_category == "unclassified", case
            assert key in (done.last_error or ""), case
            assert f"effect charge [key {key}]: started by attempt 1, outcome uncertain" in text
            assert "ConnectionResetError" in text, case


def test_an_uncertain_effect_is_visible_and_a_replay_reconciles_it(app: jobtrail.App) -> None:
    keys: list[str] = []
    reconciled: list[str] = []

    def charge(key: str) -> dict[str, Any]:
        keys.append(key)
        raise ConnectionResetError("answer lost")

    def reconcile(key: str) -> Any:
        reconciled.append(key)
        return {"charge": "ch_found"}

    @app.task("one_shot", reentrant=False, max_attempts=1, reconcile=reconcile)
    def one_shot(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.effect("charge", charge)

    task = app.enqueue("one_shot")
    burst(app)
    key = f"{task.id}/charge"
    dead = app.get(task.id)
    assert (dead.state, dead.last_reason) == ("dead", "attempts_exhausted")
    assert (
        f"effect charge [key {key}]: started by attempt 1, outcome uncertain "
        "(ConnectionResetError: answer lost)" in app.explain(task.id)
    )
    assert reconciled == []

    app.replay(task.id, by="ops", note="provider says it went through")
    burst(app)
    done = app.get(task.id)
    assert (done.state, done.last_reason) == ("succeeded", "completed")
    assert keys == [key]  # never called again
    assert reconciled == [key]
    assert done.steps == {"charge": {"charge": "ch_found"}}


# -- cancellation at boundaries --------------------------------------------------------------------


def test_every_boundary_checks_for_a_cancel_first(app: jobtrail.App) -> None:
    boundaries = ["step", "effect", "check_cancelled"]
    gates = {b: Gate() for b in boundaries}
    ran: dict[str, list[str]] = {b: [] for b in boundaries}

    def register(boundary: str) -> None:
        @app.task(f"cancellable_{boundary}")
        def cancellable(ctx: jobtrail.Context, payload: Any) -> None:
            ctx.step("before", lambda: "done")
            gates[boundary].block()
            try:
                if boundary == "step":
                    ctx.step("after", lambda: ran[boundary].append("step") or 1)
                elif boundary == "effect":
                    ctx.effect("charge", lambda key: ran[boundary].append("effect") or {"k": key})
                else:
                    ctx.check_cancelled()
            except Cancelled:
                ran[boundary].append("Cancelled raised")
                raise
            ran[boundary].append("went on")

    for boundary in boundaries:
        register(boundary)
    tasks = {b: app.enqueue(f"cancellable_{b}") for b in boundaries}
    worker = Background(app, concurrency=4)
    for boundary, task in tasks.items():
        gates[boundary].wait_entered()
        result = app.cancel(task.id, by="alice", note="wrong note")
        assert (result.outcome, result.state) == ("cancel_requested", "cancel_requested")
        gates[boundary].release.set()
    worker.join()

    for boundary, task in tasks.items():
        done = app.get(task.id)
        assert (done.state, done.last_reason) == ("cancelled", "cancel_confirmed"), boundary
        assert ran[boundary] == ["Cancelled raised"], boundary
        assert done.steps == {"before": "done"}, boundary  # no second step, no effect
        assert "effect charge" not in app.explain(task.id), boundary  # not even an intent
        assert reasons(app, task.id) == [
            "enqueued",
            "claimed",
            "cancel_requested",
            "cancel_confirmed",
        ]


def test_a_cancel_seen_after_a_confirmed_effect_is_too_late(app: jobtrail.App) -> None:
    gate = Gate()
    ran: list[str] = []

    @app.task("submit")
    def submit(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.effect("submit_body", lambda key: {"post": key})
        gate.block()
        ctx.check_cancelled()  # past the point of no return: does not raise
        ctx.step("after", lambda: ran.append("step") or "ran")
        ran.append("finished")

    task = app.enqueue("submit")
    worker = Background(app)
    gate.wait_entered()
    assert app.cancel(task.id, by="alice").outcome == "cancel_requested"
    gate.release.set()
    worker.join()

    done = app.get(task.id)
    assert (done.state, done.last_reason) == ("succeeded", "cancel_too_late")
    assert ran == ["step", "finished"]
    assert done.steps == {"submit_body": {"post": f"{task.id}/submit_body"}, "after": "ran"}
    assert reasons(app, task.id) == ["enqueued", "claimed", "cancel_requested", "cancel_too_late"]
    assert "the cancel came after the submission" in app.explain(task.id)


AFTER_CANCEL_CASES = [
    # (effect confirmed before the cancel?, how the handler ends, final state, reason)
    (True, "raises", "dead", "failed_after_cancel"),
    (False, "raises", "cancelled", "cancel_confirmed"),
    (False, "returns", "succeeded", "cancel_too_late"),
]


def test_how_a_handler_ends_after_a_cancel_decides_the_outcome(app: jobtrail.App) -> None:
    """A handler that fails after a confirmed effect and a cancel request → ``dead``
    (``failed_after_cancel``: a person decides); one that fails with no confirmed effect →
    ``cancelled`` (``cancel_confirmed``, error recorded); one that returns → ``succeeded``
    (``cancel_too_late``). None of them passes a boundary after the cancel."""
    gates = [Gate() for _ in AFTER_CANCEL_CASES]

    def register(i: int, with_effect: bool, ending: str) -> None:
        @app.task(f"after_cancel_{i}", backoff_base=0)
        def handler(ctx: jobtrail.Context, payload: Any) -> None:
            if with_effect:
                ctx.effect("charge", lambda key: {"charged": True})
            else:
                ctx.step("prepare", lambda: 1)
            gates[i].block()
            if ending == "raises":
                raise TransientError(f"case {i}: the rest failed", category="unavailable")

    tasks = []
    for i, (with_effect, ending, *_) in enumerate(AFTER_CANCEL_CASES):
        register(i, with_effect, ending)
        tasks.append(app.enqueue(f"after_cancel_{i}"))
    worker = Background(app, concurrency=4)
    for gate, task in zip(gates, tasks, strict=True):
        gate.wait_entered()
        assert app.cancel(task.id, by="alice").outcome == "cancel_requested"
        gate.release.set()
    worker.join()

    for i, (_, ending, state, reason) in enumerate(AFTER_CANCEL_CASES):
        done = app.get(tasks[i].id)
        assert (done.state, done.last_reason) == (state, reason), i
        last = app.transitions(done.id)[-1]
        assert (last.from_state, last.to_state) == ("cancel_requested", state), i
        if ending == "raises":
            assert f"case {i}: the rest failed" in (last.error or ""), i  # error recorded
        assert reasons(app, done.id) == ["enqueued", "claimed", "cancel_requested", reason]
        if reason == "cancel_too_late":  # no effect, no submission: nothing came "after" it
            text, zh = app.explain(done.id), app.explain(done.id, lang="zh")
            assert "the cancel came after the submission" not in text
            assert "the handler finished before it reached a boundary where the cancel" in text
            assert "no effect or submission happened" in text
            assert "取消晚于提交" not in zh and "没有产生副作用，也没有提交" in zh


# -- the burst worker ------------------------------------------------------------------------------


def test_a_burst_worker_does_not_return_while_a_retry_it_wrote_is_due(
    app: jobtrail.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forces the interleaving a thread switch produces now and then: the claim finds nothing
    (the task is still leased), then the running attempt writes its retry (due at once,
    backoff_base=0) before the loop reads how many attempts are running."""
    failures = iter([True])
    claim_came_back_empty = threading.Event()
    original = Worker._round

    def claim_then_let_the_attempt_finish(self: Worker, done: list[Any], free: int) -> int:
        claimed = original(self, done, free)
        if claimed == 0 and self.running and not claim_came_back_empty.is_set():
            claim_came_back_empty.set()  # the attempt may finish now ...
            deadline = time.monotonic() + WAIT
            while self.running and time.monotonic() < deadline:  # ... and it does
                time.sleep(0.005)
        return claimed

    monkeypatch.setattr(Worker, "_round", claim_then_let_the_attempt_finish)

    @app.task("flaky", backoff_base=0)
    def flaky(ctx: jobtrail.Context, payload: Any) -> None:
        if next(failures, False):
            assert claim_came_back_empty.wait(WAIT)
            raise TransientError("once", category="unavailable")

    task = app.enqueue("flaky")
    app.run_worker(burst=True, poll_interval=0.05, sweep_interval=0.05)  # one run, on purpose
    assert app.get(task.id).state == "succeeded"
