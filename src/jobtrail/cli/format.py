"""Output of the ``jobtrail`` CLI: JSON for machines and short, readable text for people.

Pure functions from snapshots (``Task``, ``Transition``, ``CancelResult``, plain dicts) to
strings; nothing here reads a store or a clock.

Text for people never carries a terminal control character from stored text (a note, an error,
a kind, a tenant, a payload value): ``printable`` shows each as its escape (``\x1b``), so no
task can move the cursor, retitle the window or hide a line of someone's terminal. JSON output
stays exact (the JSON encoder escapes control characters itself).
"""

from __future__ import annotations

import enum
import json
import logging
import re
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..core import replays
from ..model import i18n
from ..model.machine import State
from ..model.models import CancelResult, Task, iso
from ..model.oneline import indented, one_line
from ..model.urls import describe_url as describe_url  # re-exported: the CLI's callers use it
from ..model.urls import redact_url as redact_url

#: How much of a result ``status`` shows (``--json`` gives all of it).
RESULT_SHOWN = 500

# C0 controls but newline and tab, DEL, C1 controls; the bidirectional overrides and
# isolates, which reorder what a terminal shows ("Trojan Source"); and lone surrogates (an
# undecodable byte of an argument), which no terminal encoding can write
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` safe to write to a terminal: every control character but newline and tab
    (and every bidirectional override) shown as its escape, e.g. ESC as ``\\x1b``."""
    return _CONTROL.sub(_escape, text)


class PrintableFormatter(logging.Formatter):
    """Log lines for a terminal and for log files: a record's line is one line — every
    control character in it escaped, a newline of a handler's error text as ``\x0a`` — and each
    line of a traceback is indented, so no line of the log begins with text a payload chose."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return one_line(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:  # noqa: N802
        return indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802
        return indented(super().formatStack(stack_info))


def log_to_stderr(level: int = logging.INFO, style: str = "text") -> None:
    """The CLI's logging (``worker``, ``serve``): ``level`` and up on stderr, as printable
    text lines or (``style`` ``json``) one JSON object per line (``worker.logs``)."""
    from ..worker.logs import JsonFormatter

    handler = logging.StreamHandler(sys.stderr)
    if style == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(PrintableFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # a record a handler below the root already wrote (Django's console handler under
    # `manage.py jobtrail worker` with DEBUG on, an application's own) is not written twice
    handler.addFilter(_not_written_below)
    # DEBUG is jobtrail's own (a line per attempt); libraries stay at INFO and up
    logging.basicConfig(level=max(level, logging.INFO), handlers=[handler], force=True)
    logging.getLogger("jobtrail").setLevel(level)


def _not_written_below(record: logging.LogRecord) -> bool:
    """False when a handler of a logger between the record's and the root has written it."""
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None and logger is not logging.root:
        for below in logger.handlers:
            if record.levelno >= below.level and below.filter(record):
                return False
        logger = logger.parent if logger.propagate else None
    return True


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return str(value)


def to_json(data: Any) -> str:
    """A JSON document (times as ISO 8601 UTC, enums as their values)."""
    return json.dumps(data, ensure_ascii=False, indent=2, default=_jsonable)


def when(value: datetime | None) -> str:
    return iso(value) if value is not None else "-"


def task_line(task: Task) -> str:
    reason = f" ({task.last_reason})" if task.last_reason else ""
    return f"task {task.id} ({task.kind}) is {task.state.value}{reason}"


def enqueued(task: Task, db: str | None = None) -> str:
    if task.created:
        where = f" of {db}" if db else ""
        return (
            f"enqueued task {task.id} ({task.kind}) on queue {task.queue}{where}, run at "
            f"{when(task.run_at)}"
        )
    if task.debounced:
        return (
            f"task {task.id} ({task.kind}) debounced: its payload replaced, run at "
            f"{when(task.run_at)}"
        )
    return (
        f"task {task.id} ({task.kind}) already exists for this idempotency key; "
        f"it is {task.state.value}" + (f" ({task.last_reason})" if task.last_reason else "")
    )


def status(task: Task, lang: str = "en") -> str:
    """A short card: what the task is, where it stands, what holds it, what went wrong."""

    def tr(key: str, **args: object) -> str:
        return i18n.t(key, lang, **args)

    rows: list[tuple[str, str]] = [
        (
            tr("cli.s_state"),
            task.state.value
            + (f" ({task.last_reason})" if task.last_reason else "")
            + (tr("cli.s_dismissed") if task.dismissed else ""),
        ),
        (
            tr("cli.s_queue"),
            task.queue
            + (tr("cli.s_tenant", tenant=task.tenant) if task.tenant else "")
            + (tr("cli.s_priority", priority=task.priority) if task.priority else ""),
        ),
        (
            tr("cli.s_attempts"),
            f"{task.attempts}/{task.max_attempts}"
            + (tr("cli.s_replayed", n=task.replay_count) if task.replay_count else ""),
        ),
        (tr("cli.s_run_at"), when(task.run_at)),
    ]
    if task.lease_owner:
        rows.append(
            (
                tr("cli.s_lease"),
                tr("cli.s_until", owner=task.lease_owner, at=when(task.lease_expires_at)),
            )
        )
    if task.receipt_id:
        rows.append(
            (
                tr("cli.s_receipt"),
                f"{task.receipt_id}"
                + (
                    tr("cli.s_deadline", at=when(task.receipt_deadline))
                    if task.receipt_deadline
                    else ""
                ),
            )
        )
    if task.last_error or task.last_error_category:
        category = task.last_error_category or "error"
        rows.append(
            (
                tr("cli.s_last_error"),
                f"{category}: {task.last_error}" if task.last_error else category,
            )
        )
    if task.state is State.SUCCEEDED and task.result is not None:
        shown = json.dumps(task.result, ensure_ascii=False)
        if len(shown) > RESULT_SHOWN:
            shown = shown[: RESULT_SHOWN - 1] + "…"
        rows.append((tr("cli.s_result"), shown))
    if task.parent_id:
        rows.append((tr("cli.s_parent"), task.parent_id))
    if task.idempotency_key:
        rows.append((tr("cli.s_key"), task.idempotency_key))
    rows.append((tr("cli.s_created"), when(task.created_at)))
    rows.append((tr("cli.s_updated"), when(task.updated_at)))
    if task.finished_at:
        rows.append((tr("cli.s_finished"), when(task.finished_at)))
    width = max(i18n.display_width(name) for name, _ in rows)
    lines = [tr("cli.status_head", id=task.id, kind=task.kind)]
    lines += [f"  {i18n.ljust(name, width)}  {value}" for name, value in rows]
    return "\n".join(lines)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces (cells made ``printable`` first, so the
    columns line up on screen)."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [i18n.display_width(h) for h in headers]
    for row in rows:
        widths = [max(w, i18n.display_width(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [
        "  ".join(i18n.ljust(cell, w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in [headers, *rows]
    ]
    return "\n".join(lines)


TASK_HEADERS = (
    "cli.h_id",
    "cli.h_kind",
    "cli.h_queue",
    "cli.h_tenant",
    "cli.h_state",
    "cli.h_reason",
    "cli.h_attempts",
    "cli.h_run_at",
    "cli.h_updated",
)


def task_table(tasks: Sequence[Task], lang: str = "en") -> str:
    if not tasks:
        return i18n.t("cli.no_tasks", lang)
    headers = [i18n.t(key, lang) for key in TASK_HEADERS]
    rows = [
        (
            t.id,
            t.kind,
            t.queue,
            t.tenant or "-",
            t.state.value,
            t.last_reason or "-",
            f"{t.attempts}/{t.max_attempts}",
            when(t.run_at),
            when(t.updated_at),
        )
        for t in tasks
    ]
    return table(headers, rows)


_CANCEL_TEXT = {
    "cancelled": "cancelled before it started",
    "cancel_requested": "cancel requested; the worker confirms it at its next side-effect boundary",
    "already_terminal": "already finished; nothing was changed",
    "too_late": "too late: it was already submitted and waits for its receipt; the refusal "
    "was recorded",
}


def cancelled(result: CancelResult) -> str:
    text = _CANCEL_TEXT.get(result.outcome, result.outcome)
    reason = f" ({result.reason})" if result.reason else ""
    return f"task {result.task_id}: {result.outcome} — {text}; state {result.state.value}{reason}"


def replayed(results: Sequence[tuple[str, str]]) -> str:
    if not results:
        return "no dead task matched; nothing was replayed"
    moved = sum(1 for _, state in results if state != "dead")
    lines = [f"replayed {moved} task(s):"]
    lines += [f"  task {task_id}  {state}" for task_id, state in results]
    return "\n".join(lines)


def replay_run_line(run: Mapping[str, Any] | None) -> str:
    """One line on the replay run ``replay-dead`` recorded: its progress and how it ended."""
    if run is None:
        return "(the run is recorded: jobtrail replay-runs)"
    return (
        f"run {run['id']}: {replays.outcome(run)}; {run['replayed']} of the {run['total']} "
        f"selected replayed (jobtrail replay-runs --run {run['id']})"
    )


def swept(counts: Mapping[str, int]) -> str:
    total = sum(counts.values())
    if not total:
        return "swept: nothing to move (no expired leases or receipts)"
    parts = ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()) if n)
    return f"swept {total} task(s): {parts}"


def violations(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return (
            "ok: every invariant holds (state = last transition, contiguous log, allowed "
            "edges, leases, finish times, effect keys, parents)"
        )
    lines = [f"{len(rows)} invariant violation(s):"]
    for row in rows:
        lines.append("  " + ", ".join(f"{k}={_cell(v)}" for k, v in row.items()))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str | int | float):
        return str(value)
    return str(_jsonable(value))
