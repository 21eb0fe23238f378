"""Operator verbs of the CLI: stats, pause, resume, limit, queues, prune (``dead`` is in
``replays.py``).

Registered on the ``jobtrail`` group by importing this module (``cli/__init__.py`` does).
"""

from __future__ import annotations

import json
from typing import Any

import click

from ..model import i18n, validate
from ..model.timeparse import parse_duration
from . import format as fmt
from .base import EXIT_OK, Fail, Runtime, _required, lang_option, verb


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}ms" if value < 10 else _age(value)


STATS_HEADERS = (
    "cli.h_queue",
    "cli.h_kind",
    "cli.h_queued",
    "cli.h_leased",
    "cli.h_waiting",
    "cli.h_suspended",
    "cli.h_dead",
    "cli.h_oldest_due",
    "cli.h_in",
    "cli.h_out",
    "cli.h_retries",
    "cli.h_expired",
    "cli.h_wait",
    "cli.h_run",
    "cli.h_oldest_dead",
    "cli.h_drain",
)
HISTORY_HEADERS = ("cli.h_at", "cli.h_action", "cli.h_by", "cli.h_note", "cli.h_data")


def _suspended(counts: dict[str, int] | None) -> str:
    """The suspended durable handlers of a group: sleeping/waiting for an event/for children,
    ``-`` when there are none (a ``stats --json`` report from before it had none)."""
    if not counts or not any(counts.values()):
        return "-"
    return "/".join(
        str(counts.get(k, 0)) for k in ("sleeping", "waiting_for_event", "waiting_for_children")
    )


def stats_text(report: dict[str, Any], lang: str = "en") -> str:
    rows = []
    capped = False
    for q in report["queues"]:
        c = q["counts"]
        drain = q["drain_time"]
        plus = "+" if q.get("at_least") else ""  # a lower bound (bounded stats)
        capped = capped or bool(plus)
        rows.append(
            [
                q["queue"],
                q["kind"],
                f"{c['queued']}{plus}",
                str(c["leased"] + c["cancel_requested"]),
                str(c["awaiting_receipt"] + c["waiting"]),
                _suspended(q.get("suspended")),
                str(q["dead"]),
                _age(q["oldest_due_age"]),
                f"{q['arrivals_per_min']:g}",
                f"{q['completions_per_min']:g}",
                str(q["retries"]),
                str(q["lease_expiries"]),
                f"{_ms(q['wait_p50'])}/{_ms(q['wait_p95'])}",
                f"{_ms(q['run_p50'])}/{_ms(q['run_p95'])}",
                _age(q["oldest_dead_age"]),
                drain if isinstance(drain, str) else _age(drain) + plus,
            ]
        )
    window = f"{report['window_seconds']:g}"
    head = i18n.t("cli.stats_head", lang, at=report["at"], window=window) + "\n"
    pruned = {state: n["tasks"] for state, n in report.get("pruned", {}).items()}
    tail = "\n" + i18n.t("cli.stats_pruned", lang, **pruned) if any(pruned.values()) else ""
    if report.get("window_capped"):
        n, seconds = report["window_limit"], f"{report['window_seconds']:.0f}"
        tail += "\n" + i18n.t("stats.window_capped", lang, n=n, seconds=seconds)
    if capped:
        tail += "\n" + i18n.t("stats.at_least", lang)
    if not rows:
        return head + i18n.t("cli.no_tasks", lang) + tail
    return head + fmt.table([i18n.t(key, lang) for key in STATS_HEADERS], rows) + tail


def queue_text(q: dict[str, Any], lang: str = "en") -> str:
    state = (
        i18n.t(
            "cli.q_paused",
            lang,
            by=q["paused_by"],
            since=fmt.when(q["paused_since"]),
            note=q["paused_note"],
        )
        if q["paused"]
        else i18n.t("cli.q_running", lang)
    )
    limits = []
    if q["limit_total"] is not None:
        limits.append(i18n.t("cli.q_limit_total", lang, n=q["limit_total"]))
    if q["limit_per_tenant"] is not None:
        limits.append(i18n.t("cli.q_limit_tenant", lang, n=q["limit_per_tenant"]))
    limits += rate_parts(q, lang)
    joined = i18n.t("cli.q_sep", lang).join(limits) if limits else i18n.t("cli.q_no_limits", lang)
    return i18n.t("cli.q_line", lang, queue=q["queue"], state=state, limits=joined)


@verb("stats")
@click.option(
    "--window",
    default="5m",
    show_default=True,
    metavar="D",
    help="Window for rates and percentiles (90s, 5m, 1h).",
)
@lang_option
def stats(rt: Runtime, window: str, lang: str) -> None:
    """Queue health per queue and kind."""
    report = rt.app().stats(window=parse_duration(window, "--window"))
    rt.emit(report, stats_text(report, lang))


@verb("pause")
@click.argument("queue", metavar="Q")
@_required("by")
@_required("note")
def pause(rt: Runtime, queue: str, by: str, note: str) -> None:
    """Stop workers claiming from queue Q (running tasks finish). Audited."""
    result = rt.app().pause(queue, by=by, note=note)
    rt.emit(result, queue_text(result))


@verb("resume")
@click.argument("queue", metavar="Q")
@click.option(
    "--ramp",
    metavar="D",
    help="Grow claims from a tenth of the queue's rate to all of it over D (30s, 5m).",
)
@_required("by")
@_required("note")
def resume(rt: Runtime, queue: str, ramp: str | None, by: str, note: str) -> None:
    """Let workers claim from queue Q again. Audited."""
    seconds = parse_duration(ramp, "--ramp") if ramp is not None else None
    result = rt.app().resume(queue, by=by, note=note, ramp=seconds)
    rt.emit(result, queue_text(result))


def _limit(value: str | None, name: str) -> int | None:
    if value is None or value.lower() in ("none", "off", "-"):
        return None
    try:
        number = int(value)
    except ValueError:
        raise Fail(f"{name} takes a non-negative integer or 'none', not {value!r}") from None
    if number < 0:
        raise Fail(f"{name} must not be negative")
    if number > validate.MAX_CONCURRENCY_LIMIT:
        raise Fail(f"{name} must be at most {validate.MAX_CONCURRENCY_LIMIT}")
    return number


@verb("limit")
@click.argument("queue", metavar="Q")
@click.option("--total", metavar="N", help="At most N leased in the queue ('none' lifts it).")
@click.option("--per-tenant", metavar="M", help="At most M leased per tenant ('none' lifts it).")
@_required("by")
@_required("note")
def limit(
    rt: Runtime, queue: str, total: str | None, per_tenant: str | None, by: str, note: str
) -> None:
    """Set queue Q's concurrency limits, honoured by every worker. Audited."""
    app = rt.app()
    current = next((q for q in app.queues() if q["queue"] == queue), None) or {}
    new_total = _limit(total, "--total") if total is not None else current.get("limit_total")
    new_tenant = (
        _limit(per_tenant, "--per-tenant")
        if per_tenant is not None
        else current.get("limit_per_tenant")
    )
    result = app.set_limit(queue, total=new_total, per_tenant=new_tenant, by=by, note=note)
    rt.emit(result, queue_text(result))


@verb("queues")
@click.option("--history", metavar="Q", help="Show the audited changes of queue Q.")
@lang_option
def queues(rt: Runtime, history: str | None, lang: str) -> None:
    """Queues with their pause state and limits (or one queue's change history)."""
    app = rt.app()
    if history:
        rows = app.queue_history(history)
        text = (
            fmt.table(
                [i18n.t(key, lang) for key in HISTORY_HEADERS],
                [
                    [
                        fmt.when(r["at"]),
                        r["action"],
                        r["by"],
                        r["note"],
                        json.dumps(r["data"], separators=(",", ":")),
                    ]
                    for r in rows
                ],
            )
            if rows
            else i18n.t("cli.q_no_history", lang, queue=history)
        )
        rt.emit(rows, text)
        return
    listed = app.queues()
    rt.emit(listed, "\n".join(queue_text(q, lang) for q in listed))


@verb("prune")
@click.option("--older-than", required=True, metavar="D", help="e.g. 30d, 12h.")
def prune(rt: Runtime, older_than: str) -> int:
    """Delete succeeded and cancelled tasks finished more than D ago (dead ones are kept)."""
    result = rt.app().prune(parse_duration(older_than, "--older-than"))
    rt.emit(
        result, f"pruned {result['tasks']} finished tasks and {result['transitions']} transitions"
    )
    return EXIT_OK


# -- rates -----------------------------------------------------------------------------------
def rate_parts(q: dict[str, Any], lang: str) -> list[str]:
    """The rate of a queue as ``queues`` prints it (nothing without a rate)."""
    out = []
    if q.get("rate_per_second") is not None:
        out.append(i18n.t("cli.q_rate", lang, rate=f"{q['rate_per_second']:g}"))
    if q.get("rate_per_tenant") is not None:
        out.append(i18n.t("cli.q_rate_tenant", lang, rate=f"{q['rate_per_tenant']:g}"))
    if out and q.get("rate_burst") is not None:
        out.append(i18n.t("cli.q_burst", lang, n=q["rate_burst"]))
    if out and q.get("ramp_seconds") is not None:
        since = fmt.when(q["ramp_started_at"])
        out.append(i18n.t("cli.q_ramp", lang, seconds=f"{q['ramp_seconds']:g}", since=since))
    if out and q.get("rate_until") is not None:
        out.append(i18n.t("cli.q_rate_until", lang, at=fmt.when(q["rate_until"])))
    for k in q.get("kind_rates") or []:
        text = i18n.t("cli.q_rate_kind", lang, kind=k["kind"], rate=f"{k['per_second']:g}")
        if k.get("burst") is not None:
            text += ", " + i18n.t("cli.q_burst", lang, n=k["burst"])
        out.append(text)
    return out


def _rate(value: str | None, name: str) -> float | None:
    if value is None or value.lower() in ("none", "off", "-"):
        return None
    try:
        return float(value)  # range and NaN: App.set_rate says what is wrong (exit 2)
    except ValueError:
        raise Fail(f"{name} takes a number of claims a second or 'none', not {value!r}") from None


@verb("rate")
@click.argument("queue", metavar="Q")
@click.option(
    "--per-second", metavar="R", help="At most R claims a second from Q ('none' lifts it)."
)
@click.option("--burst", metavar="B", help="At most B claims at once (default: R).")
@click.option(
    "--per-tenant", metavar="R", help="At most R claims a second per tenant ('none' lifts it)."
)
@click.option("--ramp", metavar="D", help="Grow from a tenth of the rate to all of it over D.")
@click.option(
    "--kind",
    metavar="K",
    help="The rate of kind K within Q, beside Q's own (--per-second and --burst only).",
)
@_required("by")
@_required("note")
def rate(
    rt: Runtime,
    queue: str,
    per_second: str | None,
    burst: str | None,
    per_tenant: str | None,
    ramp: str | None,
    kind: str | None,
    by: str,
    note: str,
) -> None:
    """Set queue Q's rate limits (token buckets in the store, by the database clock), honoured
    by every worker. Without --per-second and --per-tenant the rate is lifted. Audited."""
    result = rt.app().set_rate(
        queue,
        per_second=_rate(per_second, "--per-second"),
        burst=_limit(burst, "--burst"),
        per_tenant=_rate(per_tenant, "--per-tenant"),
        ramp=parse_duration(ramp, "--ramp") if ramp is not None else None,
        kind=kind,
        by=by,
        note=note,
    )
    rt.emit(result, queue_text(result))
