"""What the worker says about each attempt (logger ``jobtrail.worker``): one line per
finished attempt at DEBUG, a failure at WARNING when it is retried and ERROR when it is dead,
with its traceback. The kind and the error text are escaped into one line (a newline
in an exception message must not start a line of the log). Each line carries the task id,
kind, attempt, reason and duration as record attributes (``JsonFormatter`` writes them as
fields). Never a payload or a result."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

from ..core.context import Attempt
from ..core.durable import Suspend
from ..model.errors import StoreUnavailable
from ..model.machine import State
from ..model.oneline import one_line
from ..store.base import Driver
from ..store.failures import unreachable

log = logging.getLogger("jobtrail.worker")

#: The record attributes an attempt's line carries (and ``JsonFormatter`` writes).
FIELDS = ("task_id", "kind", "attempt", "state", "reason", "category", "duration_ms")


def attempt_finished(
    attempt: Attempt,
    state: State,
    reason: str,
    *,
    category: str | None = None,
    exc: BaseException | None = None,
) -> None:
    """Log the written outcome of ``attempt``: ``state`` by ``reason`` (``exc`` its error)."""
    if isinstance(exc, Suspend):  # a durable handler waits
        exc = None  # not a failure: logged as an outcome, without a traceback
    if exc is None:
        level = logging.DEBUG
    elif state in (State.DEAD, State.CANCELLED):
        level = logging.ERROR
    elif state is State.QUEUED and reason != "snoozed":
        level = logging.WARNING
    else:
        level = logging.DEBUG  # snoozed, or a failure confirmed as a cancel
    if not log.isEnabledFor(level):
        return
    duration_ms = round((time.monotonic() - attempt.started) * 1000.0, 3)
    extra = {
        "task_id": str(attempt.task_id),
        "kind": attempt.task.kind,
        "attempt": attempt.number,
        "state": state.value,
        "reason": reason,
        "category": category,
        "duration_ms": duration_ms,
    }
    if exc is None:
        log.log(
            level,
            "task %s (%s) attempt %d: %s (%s) in %.1f ms",
            attempt.task_id,
            one_line(attempt.task.kind),
            attempt.number,
            state.value,
            reason,
            duration_ms,
            extra=extra,
        )
        return
    log.log(
        level,
        "task %s (%s) attempt %d failed: %s: %s -> %s (%s) in %.1f ms",
        attempt.task_id,
        one_line(attempt.task.kind),
        attempt.number,
        type(exc).__name__,
        _short(exc),
        state.value,
        reason,
        duration_ms,
        exc_info=(type(exc), exc, exc.__traceback__) if level > logging.DEBUG else None,
        extra=extra,
    )


def batch_finished(attempts: list[Attempt]) -> None:
    """The DEBUG lines of a batch of plain successes the pump has committed."""
    if log.isEnabledFor(logging.DEBUG):
        for attempt in attempts:
            attempt_finished(attempt, State.SUCCEEDED, "completed")


def _short(exc: BaseException) -> str:
    """The exception's text for the summary line: one line, at most ~300 characters."""
    try:
        text = str(exc)
    except Exception:  # a hostile __str__: the class name says enough
        text = f"<{type(exc).__name__}: str() failed>"
    text = text if len(text) <= 300 else text[:297] + "..."
    return one_line(text)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the attempt's fields when the
    record has them, and ``traceback`` for a record with an exception."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            if name in record.__dict__:
                out[name] = record.__dict__[name]
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def store_failed(driver: Driver, what: str, exc: BaseException, *, retry: str = "") -> None:
    """A pass of the worker (``what``: claim, sweep, retention pass, ...) failed. The store
    being away is said once per outage by the driver's notice (``store/outage.py``), so it is
    only told; any other error is this line, at WARNING."""
    if isinstance(exc, StoreUnavailable) and not exc.outage:  # said once by the driver
        log.debug("%s failed (%s)%s", what, type(exc).__name__, retry)
        return
    if unreachable(exc):
        driver.outage.failed(exc)
        log.debug("%s failed (%s)%s", what, type(exc).__name__, retry)
        return
    log.warning("%s failed (%s)%s", what, type(exc).__name__, retry)
