"""Model-based test (hypothesis ``RuleBasedStateMachine``) on both backends.

Rules drive the real store the way callers, workers and the sweeper do — enqueue (with repeated
idempotency keys), claim through ``transition.claim``, the worker's outcome ``Move``s built from
``decide.py`` (complete, transient and permanent failure, snooze), cancel at every state, lease
expiry (the task's ``lease_expires_at`` moved into the past with raw SQL — the log is never
touched) plus sweep, writes by stale holders, replay and force. A small Python model predicts
every outcome; after every step the model matches the store and the invariant checker is clean.

Sizes: ``JOBTRAIL_MODEL_PROFILE=big`` for a long run (300 examples of 80 steps); CI runs 15
examples of 25 steps on SQLite and 10 of 20 on PostgreSQL (one schema, truncated per example).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import make_store, require_pg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)
from reliability.support import expire_lease, make_due, raw

import jobtrail
from jobtrail.core import transition
from jobtrail.core.decide import decide_failure, decide_success
from jobtrail.core.durable import Suspend
from jobtrail.core.suspension import write_suspension
from jobtrail.model.machine import HELD, State
from jobtrail.store.base import Claim, Move

settings.register_profile(
    "model-ci",
    max_examples=15,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "model-big",
    max_examples=300,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "model-ci-pg",
    max_examples=10,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
BIG = os.environ.get("JOBTRAIL_MODEL_PROFILE") == "big"
PROFILE = "model-big" if os.environ.get("JOBTRAIL_MODEL_PROFILE") == "big" else "model-ci"
MAX_ATTEMPTS = 3
KEYS = ["k1", "k2", "k3"]
_owners = itertools.count(1)
SHARED: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def _close_shared() -> Any:
    yield
    for store, _app in SHARED.values():
        store.close()
    SHARED.clear()


@dataclass
class M:
    """The model of one task."""

    state: State
    attempts: int = 0
    holder: tuple[str, int] | None = None
    #: the event key its suspended handler waits for (durable handlers)
    waits_for: str | None = None


class Model(RuleBasedStateMachine):
    backend = "sqlite"
    tasks = Bundle("tasks")

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        if self.backend == "postgres":  # one schema for the whole run, emptied per example
            if "postgres" not in SHARED:
                store = make_store("postgres", Path(self.tmp.name))
                SHARED["postgres"] = (store, store.app())
            self.store, self.app = SHARED["postgres"]
            raw(
                self.store.url,
                "",
                "TRUNCATE jobtrail_steps, jobtrail_outbox, jobtrail_transition_log, "
                "jobtrail_tasks, jobtrail_events "
                "RESTART IDENTITY CASCADE",
            )
        else:
            self.store = make_store(self.backend, Path(self.tmp.name))
            self.app = self.store.app()
        if "m" not in self.app._kinds:
            self.app.task("m", max_attempts=MAX_ATTEMPTS, lease_seconds=30)(lambda c, p: None)
        self.spec = self.app._kinds["m"]
        self.model: dict[str, M] = {}
        self.keys: dict[str, tuple[str, int]] = {}
        self.stale: list[tuple[str, str, int]] = []
        self.sent: set[str] = set()  # event keys sent (each example has its own tenant)
        self.tenant = f"m{next(_owners)}"

    def teardown(self) -> None:
        if self.backend != "postgres":
            self.store.close()
        self.tmp.cleanup()

    # -- helpers -------------------------------------------------------------------------------
    def _url(self) -> str:
        return self.store.url

    def _held(self) -> list[str]:
        return [i for i, m in self.model.items() if m.state in HELD]

    def _release(self, task_id: str) -> None:
        m = self.model[task_id]
        if m.holder is not None:
            self.stale.append((task_id, *m.holder))
            m.holder = None

    def _requeued(self, task_id: str) -> None:
        make_due(self._url(), task_id)  # time passes: the retry / snooze time has come

    def _worker_move(self, task_id: str, outcome: str) -> Any:
        m = self.model[task_id]
        assert m.holder is not None
        owner, attempt = m.holder
        cancel = m.state is State.CANCEL_REQUESTED
        if outcome == "complete":
            decision = decide_success(cancel_requested=cancel)
        else:
            exc: BaseException = {
                "transient": jobtrail.TransientError("busy", category="unavailable"),
                "permanent": jobtrail.PermanentError("bad", category="invalid_input"),
                "snooze": jobtrail.Snooze(5),
            }[outcome]
            decision = decide_failure(
                exc,
                spec=self.spec,
                attempt=attempt,
                max_attempts=MAX_ATTEMPTS,
                elapsed=0.0,
                cancel_requested=cancel,
            )
        move = Move(
            task_id=int(task_id),
            from_state=m.state,
            to_state=decision.to_state,
            reason=decision.reason,
            actor=owner,
            owner=owner,
            attempt=attempt,
            run_in=decision.delay,
            uncount_attempt=not decision.counts_attempt,
            set_error=decision.category is not None or decision.error is not None,
            error_category=decision.category,
            error=decision.error,
        )
        with self.app._driver.transaction() as tx:
            return transition.apply(self.app._driver, tx, move), decision

    # -- rules -----------------------------------------------------------------------------------
    @rule(target=tasks, key=st.sampled_from([None, *KEYS]), n=st.integers(0, 2))
    def enqueue(self, key: str | None, n: int) -> Any:
        payload = {"n": n}
        if key is not None and key in self.keys:
            tid, old = self.keys[key]
            if old != n:
                try:
                    self.app.enqueue("m", payload, idempotency_key=key, tenant=self.tenant)
                except jobtrail.IdempotencyConflict:
                    return tid
                raise AssertionError("a changed payload under the same key was accepted")
            task = self.app.enqueue("m", payload, idempotency_key=key, tenant=self.tenant)
            assert task.id == tid and task.created is False
            return tid
        task = self.app.enqueue("m", payload, idempotency_key=key, tenant=self.tenant)
        assert task.created
        self.model[task.id] = M(State.QUEUED)
        if key is not None:
            self.keys[key] = (task.id, n)
        return task.id

    @rule()
    def claim(self) -> None:
        owner = f"model:{os.getpid()}:{next(_owners)}"
        request = Claim(owner=owner, queues=["default"], kinds=["m"], limit=1, version="t")
        with self.app._driver.transaction() as tx:
            rows = transition.claim(self.app._driver, tx, request)
        queued = {i for i, m in self.model.items() if m.state is State.QUEUED}
        if not queued:
            assert rows == []
            return
        assert len(rows) == 1, "a due queued task was not claimed"
        tid = str(rows[0]["id"])
        assert tid in queued
        m = self.model[tid]
        m.state, m.attempts, m.holder = State.LEASED, m.attempts + 1, (owner, m.attempts + 1)

    @precondition(lambda self: self._held())
    @rule(data=st.data(), outcome=st.sampled_from(["complete", "transient", "permanent", "snooze"]))
    def worker_outcome(self, data: st.DataObject, outcome: str) -> None:
        tid = data.draw(st.sampled_from(self._held()))
        m = self.model[tid]
        row, decision = self._worker_move(tid, outcome)
        assert row is not None, "the holder's outcome was refused"
        cancel = m.state is State.CANCEL_REQUESTED
        if outcome == "complete":
            expected = State.SUCCEEDED
        elif cancel:
            expected = State.CANCELLED
        elif outcome == "permanent":
            expected = State.DEAD
        elif outcome == "snooze":
            expected = State.QUEUED
            m.attempts -= 1
        else:
            expected = State.QUEUED if m.attempts < MAX_ATTEMPTS else State.DEAD
        assert decision.to_state is expected, (decision, m)
        self._release(tid)
        m.state = expected
        if expected is State.QUEUED:
            self._requeued(tid)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        tid = data.draw(st.sampled_from(sorted(self.model)))
        m = self.model[tid]
        before = len(self.app.transitions(tid))
        result = self.app.cancel(tid, by="model")
        after = len(self.app.transitions(tid))
        if m.state in (State.QUEUED, State.WAITING):
            assert result.outcome == "cancelled"
            m.state, m.waits_for = State.CANCELLED, None
        elif m.state is State.LEASED:
            assert result.outcome == "cancel_requested"
            m.state = State.CANCEL_REQUESTED
        elif m.state is State.CANCEL_REQUESTED:
            assert result.outcome == "cancel_requested" and after == before
        else:
            assert result.outcome == "already_terminal" and after == before

    @precondition(lambda self: self._held())
    @rule(data=st.data())
    def lease_expires_and_sweep(self, data: st.DataObject) -> None:
        tid = data.draw(st.sampled_from(self._held()))
        expire_lease(self._url(), tid)
        moved = self.app.sweep()
        assert sum(moved.values()) >= 1, moved
        m = self.model[tid]
        if m.state is State.CANCEL_REQUESTED:
            m.state = State.CANCELLED
        elif m.attempts < MAX_ATTEMPTS:
            m.state = State.QUEUED
        else:
            m.state = State.DEAD
        self._release(tid)
        if m.state is State.QUEUED:
            self._requeued(tid)

    @precondition(lambda self: self.stale)
    @rule(data=st.data(), outcome=st.sampled_from(["complete", "transient", "snooze"]))
    def stale_worker_writes(self, data: st.DataObject, outcome: str) -> None:
        tid, owner, attempt = data.draw(st.sampled_from(self.stale))
        m = self.model[tid]
        for state in (State.LEASED, State.CANCEL_REQUESTED):
            move = Move(
                task_id=int(tid),
                from_state=state,
                to_state=State.SUCCEEDED if outcome == "complete" else State.QUEUED,
                reason={"complete": "completed", "transient": "retry_scheduled"}.get(
                    outcome, "snoozed"
                )
                if state is State.LEASED
                else "cancel_too_late",
                actor=owner,
                owner=owner,
                attempt=attempt,
                run_in=0.0 if outcome != "complete" else None,
            )
            if state is State.CANCEL_REQUESTED and outcome != "complete":
                continue
            with self.app._driver.transaction() as tx:
                assert transition.apply(self.app._driver, tx, move) is None, (
                    f"a stale holder ({owner}, attempt {attempt}) moved task {tid} ({m})"
                )

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        tid = data.draw(st.sampled_from(sorted(self.model)))
        m = self.model[tid]
        if m.state is not State.DEAD:
            with pytest.raises(jobtrail.IllegalTransition):
                self.app.replay(tid, by="model", note="try")
            return
        task = self.app.replay(tid, by="model", note="again")
        assert task.state is State.QUEUED and task.attempts == 0
        m.state, m.attempts = State.QUEUED, 0
        self._requeued(tid)

    @precondition(lambda self: self.model)
    @rule(
        data=st.data(),
        target_state=st.sampled_from([State.QUEUED, State.DEAD, State.SUCCEEDED, State.CANCELLED]),
    )
    def force(self, data: st.DataObject, target_state: State) -> None:
        tid = data.draw(st.sampled_from(sorted(self.model)))
        m = self.model[tid]
        task = self.app.force(tid, target_state, by="model", note="fix", effects_checked=True)
        assert task.state is target_state
        self._release(tid)
        m.state, m.attempts, m.waits_for = target_state, task.attempts, None
        if target_state is State.QUEUED:
            self._requeued(tid)

    @precondition(lambda self: self._held())
    @rule(data=st.data(), how=st.sampled_from(["sleep", "event"]), key=st.sampled_from(KEYS))
    def handler_suspends(self, data: st.DataObject, how: str, key: str) -> None:
        """A durable handler sleeps or waits for an event (edges 24, 25; at a cancel request
        the cancel is confirmed instead, edge 15)."""
        tid = data.draw(st.sampled_from(self._held()))
        m = self.model[tid]
        assert m.holder is not None
        owner, attempt = m.holder
        when = self.app.db_now() + timedelta(seconds=3600)
        suspend = (
            Suspend("sleep", "nap", until=when)
            if how == "sleep"
            else Suspend("event", "e", key=key)
        )
        with self.app._driver.transaction() as tx:
            decision = write_suspension(
                self.app._driver,
                tx,
                task_id=int(tid),
                owner=owner,
                attempt=attempt,
                actor=owner,
                suspend=suspend,
                cancel_requested=m.state is State.CANCEL_REQUESTED,
                effect_confirmed=False,
            )
        assert decision is not None, "the holder's suspension was refused"
        self._release(tid)
        if m.state is State.CANCEL_REQUESTED:
            m.state = State.CANCELLED
            return
        m.attempts -= 1  # a suspension is not an attempt
        if how == "sleep":
            m.state = State.QUEUED
            self._requeued(tid)  # the wake time has come
        elif key in self.sent:  # the event was there already: woken in the same transaction
            m.state = State.QUEUED
        else:
            m.state, m.waits_for = State.WAITING, key

    @rule(key=st.sampled_from(KEYS))
    def send_event(self, key: str) -> None:
        woken = self.app.send_event(key, {"k": key}, tenant=self.tenant)
        waiting = [m for m in self.model.values() if m.state is State.WAITING]
        expected = [m for m in waiting if m.waits_for == key and key not in self.sent]
        assert woken == len(expected)
        for m in expected:
            m.state, m.waits_for = State.QUEUED, None
        self.sent.add(key)

    # -- invariants ------------------------------------------------------------------------------
    @invariant()
    def store_matches_model(self) -> None:
        for tid, m in self.model.items():
            task = self.app.get(tid)
            assert task.state is m.state, (tid, task.state, m)
            assert task.attempts == m.attempts, (tid, task.attempts, m)
            if m.state in HELD:
                assert m.holder is not None and task.lease_owner == m.holder[0]

    @invariant()
    def invariants_hold(self) -> None:
        assert self.app.check() == []


class SQLiteModel(Model):
    backend = "sqlite"


class PostgresModel(Model):
    backend = "postgres"


TestSQLite = SQLiteModel.TestCase
TestSQLite.settings = settings.get_profile(PROFILE)


class TestPostgres(PostgresModel.TestCase):  # type: ignore[misc,valid-type]
    settings = settings.get_profile("model-big" if BIG else "model-ci-pg")

    @pytest.fixture(autouse=True)
    def _needs_postgres(self) -> None:
        """Checked once, before hypothesis runs any example: fails under CI=true, else skips
        (inside an example a failure would only be shrunk)."""
        require_pg()
