"""The task verbs of the ``jobtrail`` command line: migrate, worker, enqueue, status, explain,
list, cancel, replay, force, annotate, dismiss, sweep, check, demo and ``cron list``. Registered
on the group in ``cli/base.py`` by ``cli/__init__.py`` importing this module."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from ..core.explain import tracebacks
from ..model import i18n, validate
from ..model.errors import UnknownKind
from ..model.timeparse import parse_duration, parse_time
from ..model.urls import sqlite_path
from . import format as fmt
from .base import (
    EXIT_OK,
    EXIT_REFUSED,
    MAX_CONCURRENCY,
    MAX_GRACE,
    MAX_POLL,
    MAX_PREFETCH,
    MAX_PRIORITY,
    Fail,
    Runtime,
    _required,
    _time_arg,
    _transitions,
    cli,
    lang_option,
    verb,
)

if TYPE_CHECKING:  # generic from click 8.2 on; 8.1's is not subscriptable
    _CountType = click.ParamType[int | None]
else:
    _CountType = click.ParamType


class PrefetchType(_CountType):
    """``--prefetch``: ``auto`` (adaptive: ``None``) or a count from 0 to ``MAX_PREFETCH``."""

    name = "auto|N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, int):
            return value
        if str(value).strip().lower() == "auto":
            return None
        try:
            count = int(str(value))
        except ValueError:
            self.fail(f"{value!r} is neither 'auto' nor a whole number", param, ctx)
        if not 0 <= count <= MAX_PREFETCH:
            self.fail(f"{count} is not in the range 0 to {MAX_PREFETCH} (or 'auto')", param, ctx)
        return count


@verb("migrate")
def migrate(rt: Runtime) -> None:
    """Create or upgrade the database schema (idempotent). The one verb that creates a SQLite
    file: it prints the file's absolute path."""
    app = rt.app(must_exist=False)
    path = sqlite_path(app.url)
    created = path is not None and not os.path.exists(path)
    applied = app.migrate()
    url = fmt.describe_url(app.url)
    text = (
        f"applied migration(s) {', '.join(map(str, applied))} to {url}"
        if applied
        else f"{url} is up to date"
    )
    if created:
        text = f"created the SQLite database {os.path.abspath(str(path))}\n{text}"
    rt.emit({"applied": applied, "db": url, "created": created}, text)


@verb("worker")
@click.option(
    "--queue",
    "queues",
    multiple=True,
    metavar="Q",
    help="A queue to work (repeatable) [default: every queue of the app's kinds].",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, MAX_CONCURRENCY),
    default=4,
    show_default=True,
    metavar="N",
    help="Tasks run at once.",
)
@click.option(
    "--prefetch",
    type=PrefetchType(),
    default="auto",
    show_default=True,
    metavar="auto|N",
    help="Tasks claimed ahead of free slots (held leased, run next): fewer round trips. "
    "auto: while all recent work ran short; N: up to N; 0: none.",
)
@click.option("--burst", is_flag=True, help="Exit once nothing is due and nothing held runs.")
@click.option(
    "--drain",
    type=click.FloatRange(0, MAX_GRACE),
    default=0.0,
    metavar="S",
    help="With --burst: also wait for tasks due within S seconds (retries, delays).",
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(0, MAX_POLL, min_open=True),
    default=1.0,
    show_default=True,
    metavar="S",
    help="Seconds between polls when idle.",
)
@click.option(
    "--grace",
    type=click.FloatRange(0, MAX_GRACE),
    default=30.0,
    show_default=True,
    metavar="S",
    help="Seconds running tasks get to finish after SIGTERM/SIGINT.",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
    help="DEBUG adds one line per finished attempt; failures log at WARNING (retried) or "
    "ERROR (dead), with the traceback.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one object per line with task_id, kind, attempt, reason, duration_ms.",
)
def worker(
    rt: Runtime,
    queues: tuple[str, ...],
    concurrency: int,
    prefetch: int | None,
    burst: bool,
    drain: float,
    poll_interval: float,
    grace: float,
    log_level: str,
    log_format: str,
) -> None:
    """Run a worker for the kinds of --app until SIGTERM/SIGINT (or, with --burst, until idle)."""
    if not rt.app_ref:
        raise Fail(
            "worker needs your app to know the task kinds: pass --app module:attr or set "
            "JOBTRAIL_APP"
        )
    if drain and not burst:
        raise click.UsageError("--drain needs --burst (a running worker never returns)")
    fmt.log_to_stderr(getattr(logging, log_level.upper()), log_format)
    # a store that refuses us: the one-line error says why. Quiet from before the pool opens
    # (its background attempts log as soon as it does) until the store has answered; a store
    # that never does ends the command with the pool still quiet.
    pool_log = logging.getLogger("psycopg")
    level = pool_log.level
    pool_log.setLevel(logging.ERROR)
    app = rt.app()  # a missing SQLite file is an error: only `jobtrail migrate` creates one
    app.migrate()  # an existing store's schema is brought forward
    pool_log.setLevel(level)  # from here on the pool's warnings are the operator's
    processed = app.run_worker(
        queues=list(queues) or None,
        concurrency=concurrency,
        prefetch=prefetch,
        burst=burst,
        drain=drain,
        poll_interval=poll_interval,
        grace=grace,
    )
    # attempts, not tasks: a retried task counts once per attempt (the log's stop line says
    # how many tasks they finished)
    rt.emit({"processed": processed}, f"worker stopped; processed {processed} attempt(s)")


@verb("enqueue")
@click.argument("kind")
@click.argument("payload_json", required=False, metavar="[PAYLOAD_JSON]")
@click.option("--key", metavar="K", help="Idempotency key: a repeat returns the same task.")
@click.option("--delay", metavar="S", help="Due after S seconds (or 30s, 5m, 2h, 1d).")
@click.option("--run-at", metavar="ISO", help="Due at this ISO 8601 time (UTC unless given).")
@click.option(
    "--priority",
    type=click.IntRange(-MAX_PRIORITY, MAX_PRIORITY),
    metavar="N",
    default=0,
    show_default=True,
    help="Higher runs first.",
)
@click.option("--queue", metavar="Q", help="Queue [default: the kind's].")
@click.option("--tenant", default="", metavar="T", help="Tenant.")
@click.option(
    "--max-attempts",
    type=click.IntRange(1, MAX_PRIORITY),
    metavar="N",
    help="Attempts before dead [default: the kind's].",
)
@click.option(
    "--debounce-key", metavar="K", help="Fold into the queued, unclaimed task of this key."
)
@click.option("--debounce", metavar="S", help="With --debounce-key: wait S for another enqueue.")
@click.option("--debounce-max", metavar="S", help="The longest the task is put off [no bound].")
@click.option("--unique-for", metavar="S", help="The --key is unique for S after the task's birth.")
@click.option(
    "--unique-while",
    metavar="active",
    help="'active': the --key is unique until the task has ended.",
)
@click.option("--expires-in", metavar="S", help="Still queued after S: cancelled (expired).")
@click.option("--expires-at", metavar="ISO", help="Still queued then: cancelled (with an offset).")
@click.option(
    "--concurrency-key",
    metavar="K",
    help="At most the kind's concurrency_per_key tasks of key K run at once, in due order.",
)
def enqueue(
    rt: Runtime,
    kind: str,
    payload_json: str | None,
    key: str | None,
    delay: str | None,
    run_at: str | None,
    priority: int,
    queue: str | None,
    tenant: str,
    max_attempts: int | None,
    debounce_key: str | None,
    debounce: str | None,
    debounce_max: str | None,
    unique_for: str | None,
    unique_while: str | None,
    expires_in: str | None,
    expires_at: str | None,
    concurrency_key: str | None,
) -> None:
    """Enqueue a task of KIND with PAYLOAD_JSON (a JSON document; `-` reads stdin)."""
    for name, value in (("KIND", kind), ("--key", key), ("--queue", queue), ("--tenant", tenant)):
        validate.text(value, name)  # an undecodable byte of argv arrives as a lone surrogate
    if concurrency_key is not None:
        try:
            validate.concurrency_key(concurrency_key)
        except (TypeError, ValueError) as exc:
            raise Fail(f"--concurrency-key: {exc}") from None
    payload: Any = None
    if payload_json is not None:
        text = sys.stdin.read() if payload_json == "-" else payload_json
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            raise Fail(f"PAYLOAD_JSON is not valid JSON: {exc}") from None
    delay_s = parse_duration(delay, "--delay") if delay is not None else None
    spans = {
        name: parse_duration(value, "--" + name.replace("_", "-"))
        for name, value in (
            ("debounce", debounce),
            ("debounce_max", debounce_max),
            ("unique_for", unique_for),
            ("expires_in", expires_in),
        )
        if value is not None
    }
    for name, value in (("--debounce-key", debounce_key), ("--expires-at", expires_at)):
        validate.text(value, name)
    if run_at is not None:
        if delay is not None:
            raise Fail("give --delay or --run-at, not both")
        parse_time(run_at, "--run-at")
    if not rt.app_ref:
        raise Fail(
            f"unknown task kind {kind!r}: without an app the CLI does not know the task "
            "kinds; pass --app module:attr or set JOBTRAIL_APP"
        )
    app = rt.app()  # a missing SQLite file is an error: only `jobtrail migrate` creates one
    if kind not in app.kinds:
        raise UnknownKind(kind, app.kinds)
    app.migrate()  # an existing store's schema is brought forward
    task = app.enqueue(
        kind,
        payload,
        idempotency_key=key,
        tenant=tenant,
        queue=queue,
        priority=priority,
        run_at=run_at,
        delay=delay_s,
        max_attempts=max_attempts,
        debounce_key=debounce_key,
        unique_while=unique_while,
        expires_at=expires_at,
        debounce=spans.get("debounce"),
        debounce_max=spans.get("debounce_max"),
        unique_for=spans.get("unique_for"),
        expires_in=spans.get("expires_in"),
        concurrency_key=concurrency_key,
    )
    rt.emit(task.to_dict(), fmt.enqueued(task, fmt.describe_url(app.url)))


@verb("status")
@click.argument("task_id", metavar="ID")
@lang_option
def status(rt: Runtime, task_id: str, lang: str) -> None:
    """Show one task: state, reason, attempts, schedule, lease, last error."""
    task = rt.app().get(task_id)
    rt.emit(task.to_dict(), fmt.status(task, lang))


@verb("explain")
@click.argument("task_id", metavar="ID")
@click.option(
    "--traceback",
    "with_tracebacks",
    is_flag=True,
    help="Also print each failure's whole traceback (the timeline shows its raising frame).",
)
@lang_option
def explain(rt: Runtime, task_id: str, with_tracebacks: bool, lang: str) -> None:
    """How the task got to its state, and why it is not running now."""
    app = rt.app()
    text = app.explain(task_id, lang=lang)
    if with_tracebacks:
        text += "\n\n" + tracebacks(_transitions(app, task_id), lang)
    if rt.as_json:
        rt.emit(
            {
                "task": app.get(task_id).to_dict(),
                "transitions": [t.to_dict() for t in _transitions(app, task_id)],
                "explanation": text,
            },
            text,
        )
    else:
        rt.emit(None, text)


@verb("list")
@click.option("--state", metavar="S", help="Only tasks in this state.")
@click.option("--kind", metavar="K", help="Only tasks of this kind.")
@click.option("--queue", metavar="Q", help="Only tasks on this queue.")
@click.option("--tenant", metavar="T", help="Only tasks of this tenant.")
@click.option("--limit", type=click.IntRange(1, validate.MAX_LIMIT), default=100, show_default=True)
@lang_option
def list_(
    rt: Runtime,
    state: str | None,
    kind: str | None,
    queue: str | None,
    tenant: str | None,
    limit: int,
    lang: str,
) -> None:
    """List tasks, newest first."""
    tasks = rt.app().list(state=state, kind=kind, queue=queue, tenant=tenant, limit=limit)
    rt.emit([t.to_dict() for t in tasks], fmt.task_table(tasks, lang))


@verb("cancel")
@click.argument("task_id", metavar="ID")
@_required("by")
@click.option("--note", metavar="TEXT", help="Why (recorded).")
def cancel(rt: Runtime, task_id: str, by: str, note: str | None) -> None:
    """Cancel a task: queued → cancelled; running → cancel requested (idempotent)."""
    result = rt.app().cancel(task_id, by=by, note=note)
    rt.emit(result.to_dict(), fmt.cancelled(result))


@verb("replay")
@click.argument("task_id", metavar="ID")
@_required("by")
@_required("note")
@click.option(
    "--from-step",
    metavar="NAME",
    help="Resume at this step: forget its recorded outcome and everything recorded after it "
    "(kept as superseded), so they run again; see replay-preview.",
)
def replay(rt: Runtime, task_id: str, by: str, note: str, from_step: str | None) -> None:
    """Put a dead task back in the queue (attempts start again)."""
    app = rt.app()
    forgot: list[str] = []
    if from_step is not None:  # the names it forgets, read as the replay reads them
        forgot = app.replay_preview(task_id, from_step=from_step)["forgotten"]
    task = app.replay(task_id, by=by, note=note, from_step=from_step)
    line = fmt.task_line(task)
    text = (
        i18n.t("cli.replay_done", "en", line=line, count=task.replay_count)
        if from_step is None
        else i18n.t(
            "cli.replay_done_from",
            "en",
            line=line,
            count=task.replay_count,
            step=from_step,
            names=", ".join(forgot),
        )
    )
    rt.emit(task.to_dict(), text)


@verb("replay-dead")
@click.option("--reason", metavar="CODE", help="Only tasks dead with this reason code.")
@click.option("--kind", metavar="K", help="Only tasks of this kind.")
@click.option("--since", metavar="T", help="Dead at or after T (ISO 8601, or 30m/2h/7d ago).")
@click.option("--until", metavar="T", help="Dead before T (ISO 8601, or 30m/2h/7d ago).")
@_required("by")
@_required("note")
@click.option(
    "--limit", type=click.IntRange(1, validate.MAX_BATCH), metavar="N", help="At most N tasks."
)
@click.option(
    "--per-second",
    type=click.FloatRange(validate.MIN_RATE, validate.MAX_RATE),
    metavar="R",
    help="At most R replays a second.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, validate.MAX_BATCH),
    metavar="N",
    help="Replay N at a time, waiting for each batch to settle before the next.",
)
@click.option(
    "--stop-after-failures",
    type=click.IntRange(1, validate.MAX_BATCH),
    metavar="N",
    help="Stop the run once N of its replayed tasks are dead again (needs --batch-size).",
)
@click.option(
    "--batch-timeout",
    type=click.FloatRange(0, validate.MAX_DURATION, min_open=True),
    default=300.0,
    show_default=True,
    metavar="S",
    help="Stop the run when a batch has not settled within S seconds.",
)
def replay_dead(
    rt: Runtime,
    reason: str | None,
    kind: str | None,
    since: str | None,
    until: str | None,
    by: str,
    note: str,
    limit: int | None,
    per_second: float | None,
    batch_size: int | None,
    stop_after_failures: int | None,
    batch_timeout: float,
) -> None:
    """Batch replay of dead tasks by reason code, kind and the time they died, as a recorded
    replay run (see replay-runs)."""
    if reason is None and kind is None and since is None and until is None:
        raise Fail(
            "replay-dead needs at least one filter (--reason, --kind, --since or "
            "--until), so that a batch replay is never accidental"
        )
    start = _time_arg(rt, since, "--since")
    end = _time_arg(rt, until, "--until")
    app = rt.app()
    results: Any = app.replay_dead(
        reason=reason,
        kind=kind,
        since=start,
        until=end,
        by=by,
        note=note,
        limit=limit,
        per_second=per_second,
        batch_size=batch_size,
        stop_after_failures=stop_after_failures,
        batch_timeout=batch_timeout,
    )
    # the run just recorded (the newest of this operator with this note): how far it got and
    # why it ended, which the replayed tasks alone do not say
    run = next((r for r in app.replay_runs(limit=5) if r["by"] == by and r["note"] == note), None)
    rt.emit(
        [{"task_id": task_id, "state": state} for task_id, state in results],
        fmt.replayed(results) + "\n" + fmt.replay_run_line(run),
    )


@verb("force")
@click.argument("task_id", metavar="ID")
@click.argument("state", metavar="STATE")
@_required("by")
@_required("note")
@click.option(
    "--effects-checked",
    is_flag=True,
    help="You checked the outside world (needed to leave leased/awaiting_receipt).",
)
def force(rt: Runtime, task_id: str, state: str, by: str, note: str, effects_checked: bool) -> None:
    """Force a task into STATE (manual_fix, audited)."""
    task = rt.app().force(task_id, state, by=by, note=note, effects_checked=effects_checked)
    rt.emit(task.to_dict(), f"{fmt.task_line(task)} — forced by {by}")


@verb("annotate")
@click.argument("task_id", metavar="ID")
@_required("by")
@_required("note")
@click.option(
    "--corrects",
    type=click.IntRange(1, MAX_PRIORITY),
    metavar="SEQ",
    help="The transition (seq) this note corrects.",
)
def annotate(rt: Runtime, task_id: str, by: str, note: str, corrects: int | None) -> None:
    """Append a correction note to the task's timeline (the log is never edited)."""
    app = rt.app()
    app.annotate(task_id, by=by, note=note, corrects=corrects)
    last = _transitions(app, task_id)[-1]
    rt.emit(
        last.to_dict(),
        f"task {task_id}: added {last.reason} #{last.seq}"
        + (f" (corrects #{corrects})" if corrects else ""),
    )


@verb("dismiss")
@click.argument("task_id", metavar="ID")
@_required("by")
@_required("note")
def dismiss(rt: Runtime, task_id: str, by: str, note: str) -> None:
    """Close a dead task that will not be replayed (it stays dead, needs no action)."""
    app = rt.app()
    app.dismiss(task_id, by=by, note=note)
    task = app.get(task_id)
    rt.emit(
        task.to_dict(),
        f"task {task.id} dismissed: it stays dead and leaves the needs-attention views",
    )


@verb("sweep")
def sweep(rt: Runtime) -> None:
    """Move expired leases and receipts now (workers also do this)."""
    counts = rt.app().sweep()
    rt.emit(counts, fmt.swept(counts))


@verb("check")
def check(rt: Runtime) -> int:
    """Check the store's invariants, read-only (exit 1 and list the violations if any)."""
    rows = rt.app().check()
    rt.emit(rows, fmt.violations(rows))
    return EXIT_REFUSED if rows else EXIT_OK


@verb("demo")
@lang_option
@click.option("--keep", metavar="PATH", help="Keep the demo database at PATH.")
def demo(rt: Runtime, lang: str, keep: str | None) -> int:
    """Run the publish-note demo on a fresh SQLite file and explain every task."""
    from . import demo as demo_module

    return demo_module.run(lang=lang, keep=keep)


# -- cron (scheduler.py, app/cron.py) -----------------------------------------------------------
@cli.group("cron")
def cron() -> None:
    """Cron schedules: their windows, and which windows were skipped and why."""


@verb("list", group=cron)
@click.option(
    "--skipped",
    type=click.IntRange(0, 1000),
    default=5,
    show_default=True,
    metavar="N",
    help="Recent skipped windows shown per schedule.",
)
@lang_option
def cron_list(rt: Runtime, skipped: int, lang: str) -> None:
    """Each schedule (of --app, and any the store knows) with its last and next window and its
    recent skipped windows with their reasons."""
    app = rt.app()
    items = []
    for schedule in app.schedules():
        recent = app.cron_windows(schedule["kind"], skipped, state="skipped") if skipped else []
        items.append({**schedule, "recent_skipped": recent})
    rt.emit(items, _cron_text(items, lang))


def _cron_text(items: list[dict[str, Any]], lang: str = "en") -> str:
    from ..core.explain import sentence

    def tr(key: str, **args: object) -> str:
        return i18n.t(key, lang, **args)

    if not items:
        return tr("cli.cron_none")
    lines = []
    for s in items:
        flags = "" if s["registered"] else tr("cli.cron_not_registered")
        lines.append(
            tr(
                "cli.cron_line",
                kind=s["kind"],
                cron=repr(s["cron"]),
                tz=s["tz"],
                queue=s["queue"],
                flags=flags,
            )
        )
        lines.append(
            tr(
                "cli.cron_detail",
                catch_up=s["catch_up"],
                on_paused=s["on_paused"],
                last=fmt.when(s["last_window"]),
                next=fmt.when(s["next_window"]),
            )
        )
        for w in s["recent_skipped"]:
            n = w["earlier_skipped"]
            earlier = tr("cli.cron_earlier", n=n) if n else ""
            lines.append(
                tr(
                    "cli.cron_skipped",
                    window=fmt.when(w["window"]),
                    reason=w["reason"],
                    earlier=earlier,
                    sentence=sentence(w["reason"], lang),
                )
            )
    return "\n".join(lines)
