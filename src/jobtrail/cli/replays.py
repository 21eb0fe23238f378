"""Dead-letter verbs of the CLI: ``dead`` with its evidence, ``dead-preview``
(what a batch replay would touch, with the effects it would perform again or skip) and
``replay-runs`` (the recorded batch replays and how each ended).

Registered on the ``jobtrail`` group by importing this module (``cli/__init__.py`` does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from ..core import replays
from ..model import i18n, validate
from . import format as fmt
from .base import Runtime, _time_arg, lang_option, verb
from .ops import _age

DEAD_HEADERS = (
    "cli.h_reason",
    "cli.h_kind",
    "cli.h_count",
    "cli.h_oldest",
    "cli.h_versions",
    "cli.h_categories",
    "cli.h_attempts",
    "cli.h_first_failure",
    "cli.h_last_failure",
    "cli.h_last_error",
)
RUN_HEADERS = (
    "cli.h_run_id",
    "cli.h_state",
    "cli.h_by",
    "cli.h_filter",
    "cli.h_progress",
    "cli.h_batches",
    "cli.h_died_again",
    "cli.h_started",
    "cli.h_driver",
    "cli.h_outcome",
)


def _span(low: Any, high: Any) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _error(category: str | None, error: str | None) -> str:
    """A category with its error text beside it: ``unclassified: KeyError: 'sku'``."""
    if category and error:
        return f"{category}: {error}"
    return category or error or "-"


def dead_text(groups: Sequence[Mapping[str, Any]], lang: str = "en") -> str:
    if not groups:
        return i18n.t("cli.no_dead", lang)
    lines = [
        fmt.table(
            [i18n.t(key, lang) for key in DEAD_HEADERS],
            [
                [
                    g["reason"],
                    g["kind"],
                    str(g["count"]),
                    _age(g["oldest_age"]),
                    ",".join(g["versions"]),
                    ",".join(g["categories"]),
                    _span(g["attempts"]["min"], g["attempts"]["max"]),
                    fmt.when(g["first_failure"]),
                    fmt.when(g["last_failure"]),
                    _error(g["last_error_category"], g["last_error"]),
                ]
                for g in groups
            ],
        )
    ]
    for g in groups:
        if g["tasks"]:
            lines.append(f"{g['reason']} / {g['kind']}:")
        for t in g["tasks"]:
            lines.append(
                i18n.t(
                    "cli.dead_task",
                    lang,
                    id=t["id"],
                    category=t["category"] or "-",
                    error=t["error"] or "-",
                    attempts=t["attempts"],
                    max=t["max_attempts"],
                    version=t["version"] or "?",
                    input=t["input_ref"],
                    providers=",".join(t["provider_ids"]) or "-",
                    first=fmt.when(t["first_failure"]),
                    last=fmt.when(t["last_failure"]),
                )
            )
    return "\n".join(lines)


@verb("dead")
@click.option(
    "--tasks",
    type=click.IntRange(0, validate.MAX_LIMIT),
    default=3,
    show_default=True,
    metavar="N",
    help="Also show the newest N dead tasks of each group with their evidence (0: none).",
)
@lang_option
def dead(rt: Runtime, tasks: int, lang: str) -> None:
    """Dead tasks that need a person, grouped by reason code and kind, with their evidence."""
    groups = rt.app().dead(tasks=tasks)
    rt.emit(groups, dead_text(groups, lang))


def preview_text(result: Mapping[str, Any], lang: str = "en") -> str:
    tasks = result["tasks"]
    if not tasks:
        return i18n.t("cli.preview_none", lang)
    lines = [i18n.t("cli.preview_head", lang, n=len(tasks), until=fmt.when(result["until"]))]
    for task in tasks:
        lines.append(
            i18n.t("cli.preview_task", lang, id=task.id, kind=task.kind, reason=task.last_reason)
        )
        effects = result["effects"][task.id]
        if effects["again"]:
            names = ", ".join(e["name"] for e in effects["again"])
            lines.append(i18n.t("cli.preview_again", lang, names=names))
        if effects["skip"]:
            names = ", ".join(
                e["name"] + (f" ({','.join(e['provider_ids'])})" if e["provider_ids"] else "")
                for e in effects["skip"]
            )
            lines.append(i18n.t("cli.preview_skip", lang, names=names))
    return "\n".join(lines)


@verb("dead-preview")
@click.option("--reason", metavar="CODE", help="Only tasks dead with this reason code.")
@click.option("--kind", metavar="K", help="Only tasks of this kind.")
@click.option("--since", metavar="T", help="Dead at or after T (ISO 8601, or 30m/2h/7d ago).")
@click.option("--until", metavar="T", help="Dead before T (ISO 8601, or 30m/2h/7d ago).")
@click.option(
    "--limit", type=click.IntRange(1, validate.MAX_BATCH), metavar="N", help="At most N tasks."
)
@lang_option
def dead_preview(
    rt: Runtime,
    reason: str | None,
    kind: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    lang: str,
) -> None:
    """The dead tasks replay-dead would touch with these filters, and for each the effects it
    would perform again (no confirmed receipt) and skip (confirmed). Changes nothing."""
    start = _time_arg(rt, since, "--since")
    end = _time_arg(rt, until, "--until")
    result = rt.app().dead_preview(reason=reason, kind=kind, since=start, until=end, limit=limit)
    data = {
        "until": result["until"],
        "tasks": [
            {
                "id": t.id,
                "kind": t.kind,
                "reason": t.last_reason,
                "effects": result["effects"][t.id],
            }
            for t in result["tasks"]
        ],
    }
    rt.emit(data, preview_text(result, lang))


def _batches(run: Mapping[str, Any]) -> str:
    """Batches done, and their size when the run has one (``3x50``)."""
    size = run["batch_size"]
    return f"{run['batches']}x{size}" if size else str(run["batches"])


def runs_text(runs: Sequence[Mapping[str, Any]], lang: str = "en") -> str:
    if not runs:
        return i18n.t("cli.no_replay_runs", lang)
    rows = []
    for r in runs:
        rows.append(
            [
                str(r["id"]),
                i18n.t(replays.STATE_KEYS[r["state"]], lang),
                r["by"],
                replays.filter_text(r["filter"]),
                f"{r['replayed']}/{r['total']}",
                _batches(r),
                str(r["died_now"]),
                fmt.when(r["started_at"]),
                r["driver"] or "-",
                replays.outcome(r, lang),
            ]
        )
    return fmt.table([i18n.t(key, lang) for key in RUN_HEADERS], rows)


@verb("replay-runs")
@click.option(
    "--limit",
    type=click.IntRange(1, validate.MAX_LIMIT),
    default=20,
    show_default=True,
    metavar="N",
    help="The newest N runs.",
)
@click.option("--run", "run_id", type=click.IntRange(1), metavar="ID", help="Only this run.")
@lang_option
def replay_runs(rt: Runtime, limit: int, run_id: int | None, lang: str) -> None:
    """Recorded batch replays (replay-dead): who, why, filter, progress and how each ended."""
    runs = rt.app().replay_runs(limit=limit, run_id=run_id)
    rt.emit(runs, runs_text(runs, lang))


def replay_preview_text(result: Mapping[str, Any], lang: str = "en") -> str:
    task = result["task"]
    step = result["from_step"]
    start = i18n.t("cli.replay_from", lang, step=step) if step is not None else ""
    lines = [
        i18n.t(
            "cli.replay_preview_head",
            lang,
            id=task.id,
            kind=task.kind,
            state=task.state,
            start=start,
        )
    ]
    if not result["replayable"]:
        lines.append(i18n.t("cli.replay_not_dead", lang))
    if result["forgotten"]:
        lines.append(i18n.t("cli.replay_forgets", lang, names=", ".join(result["forgotten"])))
    else:
        lines.append(i18n.t("cli.replay_forgets_none", lang))
    effects = result["effects"]
    if effects["again"]:
        names = ", ".join(e["name"] for e in effects["again"])
        lines.append(i18n.t("cli.preview_again", lang, names=names))
    if effects["skip"]:
        names = ", ".join(
            e["name"] + (f" ({','.join(e['provider_ids'])})" if e["provider_ids"] else "")
            for e in effects["skip"]
        )
        lines.append(i18n.t("cli.preview_skip", lang, names=names))
    return "\n".join(lines)


@verb("replay-preview")
@click.argument("task_id", metavar="ID")
@click.option("--from-step", metavar="NAME", help="Preview a replay that resumes at this step.")
@lang_option
def replay_preview(rt: Runtime, task_id: str, from_step: str | None, lang: str) -> None:
    """What replay would do to one task (with --from-step: the steps it forgets and runs
    again), and the effects it would perform again or skip. Changes nothing."""
    result = rt.app().replay_preview(task_id, from_step=from_step)
    data = {
        "id": result["task"].id,
        "state": result["task"].state,
        "replayable": result["replayable"],
        "from_step": result["from_step"],
        "forgotten": result["forgotten"],
        "effects": result["effects"],
    }
    rt.emit(data, replay_preview_text(result, lang))
