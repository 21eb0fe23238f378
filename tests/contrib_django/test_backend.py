"""The framework's contract on jobtrail (docs/django.md), ported from what the reference backends
test: enqueue → worker → SUCCESSFUL with the return value, rollback, run_after, priority, async,
takes_context, failures with class path and traceback, validation, and the signals the worker
process sends. Each test runs on the SQLite backend and the PostgreSQL one."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

import pytest

from .conftest import signals, work


def backends():  # noqa: ANN201 - the framework's objects are untyped
    from jobtrail.contrib.django.compat import task_backends

    return task_backends


def test_flags_and_framework(alias: str) -> None:
    import django

    from jobtrail.contrib.django import JobtrailBackend
    from jobtrail.contrib.django.compat import FRAMEWORK

    # the matrix: the built-in framework on Django >= 6, the backport before
    assert FRAMEWORK == ("django.tasks" if django.VERSION >= (6, 0) else "django_tasks")

    backend = backends()[alias]
    assert isinstance(backend, JobtrailBackend)
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority


def test_enqueue_run_successful(alias: str, django_env: dict[str, str]) -> None:
    from testapp.tasks import add

    from jobtrail.contrib.django.compat import SUCCESSFUL, TaskResultStatus

    result = add.using(backend=alias).enqueue(2, 3)
    assert result.status == TaskResultStatus.READY
    assert result.backend == alias and result.args == [2, 3] and result.kwargs == {}
    assert result.enqueued_at is not None and result.started_at is None
    assert result.worker_ids == [] and result.errors == []
    with pytest.raises(ValueError, match="not finished"):
        _ = result.return_value
    work(alias)
    result.refresh()
    assert result.status == SUCCESSFUL
    assert len(result.worker_ids) == 1 and result.attempts == 1
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at
    again = add.using(backend=alias).get_result(result.id)
    assert again.status == SUCCESSFUL and again.id == result.id


def test_return_values_sync_async_and_with_context(alias: str) -> None:
    from testapp.tasks import add, add_async, with_context

    plain = add.using(backend=alias).enqueue(2, 3)
    coro = add_async.using(backend=alias).enqueue(4, b=6)
    ctx = with_context.using(backend=alias).enqueue("x")
    work(alias)
    assert add.using(backend=alias).get_result(plain.id).return_value == 5
    assert add_async.using(backend=alias).get_result(coro.id).return_value == {"sum": 10}
    assert with_context.using(backend=alias).get_result(ctx.id).return_value == {
        "attempt": 1,
        "id": ctx.id,
        "step": "x-step",
        "jobtrail_attempt": 1,
    }


def test_unknown_id_does_not_exist(alias: str) -> None:
    from jobtrail.contrib.django.compat import TaskResultDoesNotExist

    backend = backends()[alias]
    for bad in ("999999999", "nope", ""):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(bad)
    with pytest.raises(TaskResultDoesNotExist):
        asyncio.run(backend.aget_result("999999999"))


def test_rollback_leaves_nothing_commit_keeps_both(alias: str) -> None:
    from django.db import transaction
    from testapp.models import Note
    from testapp.tasks import add

    from jobtrail.contrib.django.compat import TaskResultDoesNotExist

    class Boom(Exception):
        pass

    task = add.using(backend=alias)
    with pytest.raises(Boom), transaction.atomic(using=alias):
        Note.objects.using(alias).create(text="rolled back")
        lost = task.enqueue(1, 1)
        raise Boom
    assert not Note.objects.using(alias).filter(text="rolled back").exists()
    with pytest.raises(TaskResultDoesNotExist):
        task.get_result(lost.id)

    with transaction.atomic(using=alias):
        note = Note.objects.using(alias).create(text="committed")
        kept = task.enqueue(2, 2)
    assert Note.objects.using(alias).filter(pk=note.pk).exists()
    work(alias)
    from jobtrail.contrib.django.compat import SUCCESSFUL

    assert task.get_result(kept.id).status == SUCCESSFUL


def test_enqueue_inside_atomic_is_on_the_django_connection(alias: str) -> None:
    """Inside atomic() the task is invisible to other connections until the commit."""
    from django.db import transaction
    from testapp.tasks import add

    backend = backends()[alias]
    with transaction.atomic(using=alias):
        result = add.using(backend=alias).enqueue(5, 5)
        other = __import__("jobtrail").App(backend.app.url)
        try:
            with pytest.raises(Exception, match="not found|TaskNotFound|" + result.id):
                other.get(result.id)
        finally:
            other.close()
    assert backend.get_result(result.id).id == result.id
    work(alias)


def test_run_after_is_not_run_early(alias: str) -> None:
    from django.utils import timezone
    from testapp.tasks import add

    from jobtrail.contrib.django.compat import TaskResultStatus

    later = add.using(backend=alias, run_after=timezone.now() + timedelta(hours=1))
    result = later.enqueue(1, 2)
    work(alias)
    result.refresh()
    assert result.status == TaskResultStatus.READY and result.worker_ids == []
    assert result.task.run_after is not None and result.task.run_after > timezone.now()
    assert "due" in backends()[alias].app.explain(result.id)


def test_priority_order(alias: str, django_env: dict[str, str]) -> None:
    from testapp.tasks import record

    path = Path(django_env["JT_DJ_RECORD"])
    path.unlink(missing_ok=True)
    for label, priority in (("low", -50), ("high", 90), ("mid", 0), ("top", 100)):
        record.using(backend=alias, priority=priority).enqueue(label)
    work(alias, "--queues", "other")
    assert path.read_text().split() == ["top", "high", "mid", "low"]


def test_async_enqueue_and_async_task(alias: str) -> None:
    from testapp.tasks import add_async

    from jobtrail.contrib.django.compat import SUCCESSFUL

    task = add_async.using(backend=alias)

    async def go():  # noqa: ANN202
        return await task.aenqueue(4, b=6)

    result = asyncio.run(go())
    assert result.kwargs == {"b": 6}
    work(alias)
    fetched = asyncio.run(task.aget_result(result.id))
    assert fetched.status == SUCCESSFUL and fetched.kwargs == {"b": 6}


def test_takes_context(alias: str) -> None:
    from testapp.tasks import with_context

    result = with_context.using(backend=alias).enqueue("x")
    work(alias)
    # the step ran through the context and is recorded with the task (its value: see
    # test_return_values_sync_async_and_with_context)
    assert backends()[alias].app.get(result.id).steps == {"first": "x-step"}
    assert with_context.using(backend=alias).get_result(result.id).attempts == 1


def test_failure_after_the_last_attempt(alias: str, django_env: dict[str, str]) -> None:
    from testapp.tasks import fail

    from jobtrail.contrib.django.compat import TaskResultStatus

    result = fail.using(backend=alias).enqueue("missing")
    work(alias)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="failed"):
        _ = result.return_value
    assert len(result.worker_ids) == 2  # OPTIONS["TASKS"]: max_attempts 2
    assert result.finished_at is not None
    sent = signals(django_env, alias, result.id)
    finished = [s for s in sent if s["signal"] == "finished"]
    # one task_finished: the retried first attempt sent none (the task was READY again)
    assert len(finished) == 1 and finished[0]["status"] == "FAILED"
    assert finished[0]["errors"][-1] == "builtins.KeyError"


def test_failure_errors_carry_class_path_and_traceback(
    alias: str, django_env: dict[str, str]
) -> None:
    from testapp.tasks import fail, fail_permanently

    result = fail.using(backend=alias).enqueue("missing")
    permanent = fail_permanently.using(backend=alias).enqueue("no")
    work(alias)
    result.refresh()
    assert [e.exception_class_path for e in result.errors] == ["builtins.KeyError"] * 2
    assert all("raise KeyError(message)" in e.traceback for e in result.errors)
    assert result.errors[0].exception_class is KeyError
    finished = [s for s in signals(django_env, alias, result.id) if s["signal"] == "finished"]
    assert finished[0]["errors"] == ["builtins.KeyError"] * 2  # both attempts
    errors = fail_permanently.using(backend=alias).get_result(permanent.id).errors
    assert [e.exception_class_path for e in errors] == ["jobtrail.model.errors.PermanentError"]


def test_permanent_error_fails_at_once(alias: str) -> None:
    from testapp.tasks import fail_permanently

    from jobtrail.contrib.django.compat import TaskResultStatus

    result = fail_permanently.using(backend=alias).enqueue("no")
    work(alias)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and len(result.worker_ids) == 1


@pytest.mark.parametrize(
    ("name", "reason"),
    [("fail_unclassified", "permanent_error"), ("fail_over_budget", "retry_budget_exhausted")],
)
def test_task_finished_follows_the_workers_decision(
    name: str, reason: str, alias: str, django_env: dict[str, str]
) -> None:
    """``task_finished`` goes out when the worker ends the task, by whatever rule ends it: here
    on the first attempt of five, by the kind's ``retry_unclassified=False`` or its spent
    ``max_elapsed``. (A failure the worker will retry sends none:
    test_failure_after_the_last_attempt.)"""
    import testapp.tasks

    from jobtrail.contrib.django.compat import TaskResultStatus

    result = getattr(testapp.tasks, name).using(backend=alias).enqueue("no retry")
    work(alias)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and len(result.worker_ids) == 1
    assert backends()[alias].app.get(result.id).last_reason == reason
    sent = signals(django_env, alias, result.id)
    assert [s["signal"] for s in sent] == ["enqueued", "started", "finished"]
    assert sent[-1]["status"] == "FAILED" and sent[-1]["errors"] == ["builtins.KeyError"]


def test_a_task_awaiting_its_receipt_is_running_and_not_finished(
    alias: str, django_env: dict[str, str]
) -> None:
    """A run that ends in ``await_receipt`` has not finished the task: it stays ``RUNNING``
    (jobtrail: ``awaiting_receipt``) and its run sends no ``task_finished``; the receipt ends
    it (``SUCCESSFUL``) outside any run, and the process that confirmed it sends
    ``task_finished`` then."""
    from testapp.tasks import awaits_receipt

    from jobtrail.contrib.django.compat import SUCCESSFUL, TaskResultStatus

    result = awaits_receipt.using(backend=alias).enqueue(f"r-{alias}")
    work(alias)
    result.refresh()
    app = backends()[alias].app
    assert app.get(result.id).state.value == "awaiting_receipt"
    assert result.status == TaskResultStatus.RUNNING
    sent = signals(django_env, alias, result.id)
    assert [s["signal"] for s in sent] == ["enqueued", "started"]
    app.confirm_receipt(result.id, by="test")
    result.refresh()
    assert result.status == SUCCESSFUL and app.get(result.id).state.value == "succeeded"
    sent = signals(django_env, alias, result.id)
    assert [s["signal"] for s in sent] == ["enqueued", "started", "finished"]
    assert sent[-1]["status"] == "SUCCESSFUL" and sent[-1]["pid"] == os.getpid()
    app.confirm_receipt(result.id, by="test")  # a repeat moves nothing and sends nothing
    assert len(signals(django_env, alias, result.id)) == 3


def test_a_receipt_deadline_in_the_workers_sweep_sends_task_finished(
    alias: str, django_env: dict[str, str]
) -> None:
    """No receipt before the deadline: a worker's sweep ends the task ``dead``
    (``receipt_timeout``, FAILED) and that worker process sends ``task_finished``."""
    from testapp.tasks import awaits_receipt_briefly

    from jobtrail.contrib.django.compat import TaskResultStatus

    result = awaits_receipt_briefly.using(backend=alias).enqueue(f"brief-{alias}")
    app = backends()[alias].app
    work(alias)  # runs the handler; the deadline is 0.2 s after it returned
    for _ in range(20):
        if app.get(result.id).state.value != "awaiting_receipt":
            break
        work(alias)  # a burst worker sweeps before it claims (each takes ~1 s to start)
    assert app.get(result.id).last_reason == "receipt_timeout"
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    sent = signals(django_env, alias, result.id)
    assert [s["signal"] for s in sent] == ["enqueued", "started", "finished"]
    assert sent[-1]["status"] == "FAILED" and sent[-1]["pid"] != os.getpid()


def test_an_expired_lease_that_ends_the_task_sends_task_finished(
    alias: str, django_env: dict[str, str], tmp_path: Path
) -> None:
    """The worker running a task of one attempt is SIGKILLed: the sweep that finds its lease
    expired ends the task ``dead`` (``attempts_exhausted``) and sends ``task_finished`` (FAILED)
    from the sweeping process; the killed worker sent ``task_started`` only."""
    import signal
    import subprocess
    import sys
    import time

    from testapp.tasks import hangs

    from jobtrail.contrib.django.compat import TaskResultStatus

    from .conftest import PROJECT

    started = tmp_path / f"started-{alias}"
    hold = Path(str(started) + ".hold")
    hold.write_text("")
    result = hangs.using(backend=alias).enqueue(str(started))
    app = backends()[alias].app
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "jobtrail", "worker", "--backend", alias]
        + ["--queues", "hang", "--concurrency", "1"],
        cwd=PROJECT,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert worker.poll() is None, "the worker exited before it ran the task"
            assert time.monotonic() < deadline, "the worker never started the task"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        moved: dict[str, int] = {}
        deadline = time.monotonic() + 30
        while app.get(result.id).state.value == "leased":
            assert time.monotonic() < deadline, "the lease never expired"
            moved = app.sweep()
            time.sleep(0.1)
        assert moved == {"attempts_exhausted": 1}
    finally:
        hold.unlink()
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert app.get(result.id).state.value == "dead"
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    sent = signals(django_env, alias, result.id)
    assert [s["signal"] for s in sent] == ["enqueued", "started", "finished"]
    assert sent[1]["pid"] == worker.pid
    assert sent[-1]["status"] == "FAILED" and sent[-1]["pid"] == os.getpid()


def test_signals_are_sent_by_the_worker_process(alias: str, django_env: dict[str, str]) -> None:
    from django.db import transaction
    from testapp.tasks import add

    with transaction.atomic(using=alias):
        result = add.using(backend=alias).enqueue(1, 1)
        assert signals(django_env, alias, result.id) == []  # enqueued: sent at commit
    work(alias)
    sent = signals(django_env, alias, result.id)
    assert [s["signal"] for s in sent] == ["enqueued", "started", "finished"]
    assert sent[0]["pid"] == os.getpid()
    assert sent[1]["pid"] == sent[2]["pid"] != os.getpid()
    assert [s["status"] for s in sent] == ["READY", "RUNNING", "SUCCESSFUL"]


def test_validation_errors(alias: str) -> None:
    from django.utils import timezone
    from testapp.tasks import add

    from jobtrail.contrib.django.compat import InvalidTask

    backend = backends()[alias]
    before = backend.app.list(limit=1)
    with pytest.raises(InvalidTask, match="Queue 'nowhere' is not valid"):
        add.using(backend=alias, queue_name="nowhere")
    with pytest.raises(InvalidTask, match="priority"):
        add.using(backend=alias, priority=101)
    with pytest.raises(InvalidTask, match="priority"):
        add.using(backend=alias, priority=-101)
    with pytest.raises(InvalidTask, match="aware"):
        add.using(backend=alias, run_after=timezone.now().replace(tzinfo=None))
    with pytest.raises(TypeError, match="Unsupported type"):  # as the framework says
        add.using(backend=alias).enqueue(object(), 1)
    assert backend.app.list(limit=1) == before  # nothing written


def test_bad_task_settings_are_refused() -> None:
    from jobtrail.contrib.django import jobtrail_options

    with pytest.raises(ValueError, match="unknown jobtrail settings \\['max_atempts'\\]"):
        jobtrail_options(max_atempts=3)


def test_explain_and_status_through_manage(alias: str) -> None:
    from testapp.tasks import add

    from .conftest import manage

    result = add.using(backend=alias).enqueue(7, 8)
    work(alias)
    text = manage("jobtrail", "explain", result.id, "--backend", alias).stdout
    assert "testapp.tasks.add" in text and "succeeded" in text


def test_a_suspended_durable_handler_is_ready_or_running_as_its_state_says(
    alias: str, django_env: dict[str, str]
) -> None:
    """A Django task whose jobtrail handler sleeps is ``queued``: ``READY`` (it runs again at its
    wake time, as a retry does); one that waits for an event is ``waiting`` with its run begun:
    ``RUNNING``. Neither has finished: no ``task_finished`` until the resumed run ends."""
    from testapp.tasks import sleeps, waits_for_event

    from jobtrail.contrib.django.compat import SUCCESSFUL, TaskResultStatus

    asleep = sleeps.using(backend=alias).enqueue()
    waiting = waits_for_event.using(backend=alias).enqueue(f"ev-{alias}")
    work(alias)
    app = backends()[alias].app
    assert app.get(asleep.id).last_reason == "sleeping"
    assert app.get(waiting.id).last_reason == "waiting_for_event"
    asleep.refresh()
    waiting.refresh()
    assert asleep.status == TaskResultStatus.READY
    assert waiting.status == TaskResultStatus.RUNNING
    for result in (asleep, waiting):
        sent = signals(django_env, alias, result.id)
        assert [s["signal"] for s in sent] == ["enqueued", "started"], sent

    assert app.send_event(f"ev-{alias}", {"ok": 1}) == 1
    waiting.refresh()
    assert waiting.status == TaskResultStatus.READY  # queued to resume
    work(alias)
    waiting.refresh()
    assert waiting.status == SUCCESSFUL and waiting.return_value == {"ok": 1}
    sent = signals(django_env, alias, waiting.id)
    assert [s["signal"] for s in sent] == ["enqueued", "started", "started", "finished"]
    app.cancel(asleep.id, by="test")
