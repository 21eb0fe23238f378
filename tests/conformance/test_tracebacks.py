"""Every failed attempt's transition keeps its formatted traceback (frames only,
the last 16 KiB) and its exception's class path; ``explain`` shows the raising frame and
says "unclassified error, retried by default", never "transient"; a plain success is
"finished" and only a confirmed effect says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jobtrail
from jobtrail.core.results import TRACEBACK_LIMIT

from .support import drain

HERE = Path(__file__).resolve()


class Boom(Exception):
    pass


def _line_of(marker: str) -> int:
    for number, line in enumerate(HERE.read_text(encoding="utf-8").splitlines(), 1):
        if marker in line and "_line_of" not in line:
            return number
    raise AssertionError(marker)


def test_a_failed_attempt_keeps_its_traceback_and_error_class(app: jobtrail.App) -> None:
    @app.task("k", backoff_base=0.001, backoff_cap=0.001)
    def k(ctx, p):
        secret_local = "hunter2-local-value"  # noqa: F841 - must not appear: no locals
        if ctx.attempt == 1:
            return {}["missing"]  # raises KeyError here
        if ctx.attempt == 2:
            raise Boom("custom failure")  # raises Boom here
        return {"third": "time"}

    task_id = app.enqueue("k", {"secret_payload": "s3cr3t-payload"}).id
    task = drain(app, task_id)
    assert task.state is jobtrail.State.SUCCEEDED
    failed = [t for t in app.transitions(task_id) if t.reason == "retry_scheduled"]
    assert len(failed) == 2
    first, second = failed
    assert first.error_class == "builtins.KeyError"
    assert second.error_class == f"{Boom.__module__}.Boom"
    assert first.traceback is not None and second.traceback is not None
    assert first.traceback.startswith("Traceback (most recent call last):")
    assert first.traceback.rstrip().endswith("KeyError: 'missing'")
    assert f'File "{HERE}", line {_line_of("raises KeyError here")}' in first.traceback
    assert f'File "{HERE}", line {_line_of("raises Boom here")}' in second.traceback
    for t in failed:
        assert "hunter2-local-value" not in (t.traceback or "")
        assert "s3cr3t-payload" not in (t.traceback or "")
    # every other transition keeps none
    others = [t for t in app.transitions(task_id) if t.reason != "retry_scheduled"]
    assert all(t.traceback is None and t.error_class is None for t in others)
    assert first.to_dict()["error_class"] == "builtins.KeyError"
    assert first.to_dict()["traceback"] == first.traceback


def test_a_dead_attempt_keeps_its_traceback(app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx, p):
        raise jobtrail.PermanentError("refused", category="invalid_input")

    task_id = app.enqueue("k").id
    drain(app, task_id)
    last = app.transitions(task_id)[-1]
    assert (last.to_state, last.reason) == (jobtrail.State.DEAD, "permanent_error")
    assert last.error_class == "jobtrail.model.errors.PermanentError"
    assert "PermanentError: refused" in (last.traceback or "")


def test_a_long_traceback_keeps_its_last_16_kib(app: jobtrail.App) -> None:
    # two functions in turn: Python folds only repeats of one frame ("line repeated")
    def deep(n: int) -> Any:
        if n == 0:
            raise ValueError("at the bottom")
        return other(n - 1) + 1

    def other(n: int) -> Any:
        return deep(n) + 1

    @app.task("k", max_attempts=1)
    def k(ctx, p):
        deep(400)

    task_id = app.enqueue("k").id
    drain(app, task_id)
    text = app.transitions(task_id)[-1].traceback or ""
    assert len(text.encode("utf-8")) <= TRACEBACK_LIMIT
    assert text.startswith("... (traceback cut to its last 16 KiB)")
    assert text.rstrip().endswith("ValueError: at the bottom")  # the end is kept


def test_a_snooze_is_not_a_failure_and_keeps_no_traceback(app: jobtrail.App) -> None:
    calls: list[int] = []

    @app.task("k")
    def k(ctx, p):
        calls.append(ctx.attempt)
        if len(calls) == 1:
            raise jobtrail.Snooze(0)
        return "ok"

    task_id = app.enqueue("k").id
    drain(app, task_id)
    snoozed = [t for t in app.transitions(task_id) if t.reason == "snoozed"]
    assert snoozed and all(t.traceback is None for t in snoozed)


def test_explain_shows_the_raising_frame_and_the_wording(app: jobtrail.App) -> None:
    @app.task("k", backoff_base=0.001, backoff_cap=0.001)
    def k(ctx, p):
        if ctx.attempt == 1:
            return {}["missing"]  # explain points here
        if ctx.attempt == 2:
            raise jobtrail.TransientError("busy", category="unavailable")
        return {"sent": 3}

    task_id = app.enqueue("k").id
    drain(app, task_id)
    text = app.explain(task_id)
    frame = f"{HERE}:{_line_of('explain points here')}"
    lines = text.splitlines()
    unclassified = next(line for line in lines if "KeyError" in line)
    assert f"at {frame}" in unclassified
    assert "unclassified error, retried by default" in unclassified
    assert "transient" not in unclassified
    transient = next(line for line in lines if "busy" in line)
    assert "transient error" in transient  # a classified transient error still says so
    completed = next(line for line in lines if " completed " in line)
    assert completed.endswith("— finished")
    assert "side effect" not in text
    assert 'result:     {"sent": 3}' in text
    zh = app.explain(task_id, lang="zh")
    assert f"出错位置 {frame}" in zh
    assert "未分类的错误，默认重试" in zh
    assert '结果：{"sent": 3}' in zh
    assert next(line for line in zh.splitlines() if " completed " in line).endswith("— 执行完成")


def test_explain_says_side_effect_confirmed_only_with_a_confirmed_effect(
    app: jobtrail.App,
) -> None:
    @app.task("k")
    def k(ctx, p):
        ctx.effect("charge", lambda key: "receipt-1")
        return None

    task_id = app.enqueue("k").id
    drain(app, task_id)
    text = app.explain(task_id)
    completed = next(line for line in text.splitlines() if " completed " in line)
    assert completed.endswith("— finished; the side effect is confirmed")
    assert "result:" not in text  # the handler returned nothing
    zh = app.explain(task_id, lang="zh")
    completed = next(line for line in zh.splitlines() if " completed " in line)
    assert completed.endswith("— 执行完成，副作用已确认")
