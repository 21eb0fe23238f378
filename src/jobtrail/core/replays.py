"""Pure pieces of replay runs, replay previews and dead-letter evidence.

Nothing here touches the store or a clock. ``stop_code`` is the one decision a replay run makes
between batches; ``split_effects`` says which effects a replay would perform again and which it
would skip; ``provider_ids`` reads the provider ids an effect's recorded result carries;
``stop_reason`` says in words why a run stopped; ``step_budget`` is how many tasks a detached
run's step may replay now.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..model import i18n
from ..model.models import iso

#: The longest error text a dead-letter view shows (its first line).
ERROR_LINE = 160


def first_line(text: str | None, limit: int = ERROR_LINE) -> str | None:
    """An error's first non-empty line, cut to ``limit`` characters (with "…"): what the
    dead-letter views show beside its category. ``None`` for no text."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return None
    line = lines[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


#: How a run ends: ``completed`` (every selected task was replayed or found moved), or
#: ``stopped`` with a ``stop_code``.
COMPLETED, STOPPED, RUNNING = "completed", "stopped", "running"
#: ``died_again``: ``stop_after_failures`` of its replayed tasks went dead again.
#: ``not_settled``: the previous batch had not settled within the run's ``batch_timeout``
#: (no worker running, or a provider slower than the timeout): nothing more is replayed.
#: ``interrupted``: the operator's process failed or was stopped mid-run (Ctrl-C, a store
#: outage): the tasks it replayed stay replayed, the rest stay dead.
DIED_AGAIN, NOT_SETTLED, INTERRUPTED = "died_again", "not_settled", "interrupted"

#: How often a run's driver shows it is alive while it waits (a batch to settle, its pace):
#: at most this many seconds between two beats.
HEARTBEAT = 1.0
#: A run whose driver has not beaten for this long is taken for gone: an attached run (the CLI,
#: an ``App.replay_dead`` call) is stopped as ``interrupted``, a detached one's step is taken
#: over by another sweeper. Thirty beats: well past a GC pause, a SQLite lock wait (5 s busy
#: timeout) or a slow round trip on a loaded machine, and still within half a minute for the
#: operator looking at the list.
STALE_AFTER = 30.0
#: A running detached run that no sweep has taken a step of for this long is shown as waiting
#: for a worker (``unattended_for``): workers sweep every second by default.
UNATTENDED_AFTER = 10.0
#: The most tasks one step of a detached run replays: a step runs in a worker's sweep, between
#: its claims, so it stays short (a few hundred small transactions at most).
STEP_MAX = 100

#: The catalog key of each run state's word.
STATE_KEYS = {
    RUNNING: "replay_run.state.running",
    COMPLETED: "replay_run.state.completed",
    STOPPED: "replay_run.state.stopped",
}
#: The parts of a run's recorded filter shown to people, in this order.
FILTER_KEYS = ("reason", "kind", "since", "until", "limit")

#: The keys of a recorded effect result that name the provider's object, in the order looked.
PROVIDER_ID_KEYS = ("provider_id", "id", "receipt_id", "message_id", "external_id")


def batches(ids: Sequence[Any], batch_size: int | None) -> Iterator[Sequence[Any]]:
    """``ids`` in runs of ``batch_size`` (all of them at once without one)."""
    size = batch_size or max(len(ids), 1)
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def stop_code(
    *, died: int, still_open: int, stop_after_failures: int | None, timed_out: bool
) -> str | None:
    """Whether a run stops before its next batch, and why: ``died`` of its replayed tasks are
    dead again, ``still_open`` of them are still queued, leased or waiting. Reaching
    ``stop_after_failures`` stops it even while others are still open; otherwise it waits
    until nothing is open, and stops if that did not happen in time."""
    if stop_after_failures is not None and died >= stop_after_failures:
        return DIED_AGAIN
    if still_open and timed_out:
        return NOT_SETTLED
    return None


def settled(*, died: int, still_open: int, stop_after_failures: int | None) -> bool:
    """Whether the run may stop waiting for its previous batch: all of it settled, or enough
    of its tasks died again to stop now."""
    return still_open == 0 or (stop_after_failures is not None and died >= stop_after_failures)


def stop_reason(run: Mapping[str, Any], lang: str = "en") -> str | None:
    """Why a recorded run stopped, in words (``None`` when it did not stop)."""
    code = run.get("stop_code")
    if code == DIED_AGAIN:
        return i18n.t(
            "replay_run.died_again", lang, died=run["died_again"], replayed=run["replayed"]
        )
    if code == NOT_SETTLED:
        timeout = (run.get("filter") or {}).get("batch_timeout")
        return i18n.t(
            "replay_run.not_settled",
            lang,
            batch=run["batches"],
            timeout=f"{timeout:g}" if isinstance(timeout, int | float) else "?",
        )
    if code == INTERRUPTED:
        driver, stopped_by = run.get("driver"), run.get("stopped_by")
        if driver and stopped_by and stopped_by != driver:  # found gone, not stopped by itself
            beat = run.get("heartbeat_at")
            at = iso(beat) if isinstance(beat, datetime) else "?"
            return i18n.t("replay_run.abandoned", lang, driver=driver, at=at)
        return i18n.t("replay_run.interrupted", lang)
    return None


def step_budget(per_second: float | None, since_progress: float | None) -> int:
    """How many tasks a detached run's step replays now: ``STEP_MAX`` without a rate; with one,
    what the rate allows since the run's last progress (``since_progress`` seconds, by the
    database clock; ``None`` for the run's first step), at most one second's worth so that a
    batch that waited long to settle does not go out at once. 0: not yet."""
    if per_second is None:
        return STEP_MAX
    second = max(1, math.ceil(per_second))
    if since_progress is None:
        return min(STEP_MAX, second)
    allowed = int(per_second * max(since_progress, 0.0))
    return min(STEP_MAX, second, allowed)


def filter_text(recorded: Mapping[str, Any]) -> str:
    """A run's filter in one line: ``kind=publish until=2026-…`` (``-`` for none)."""
    shown = [f"{k}={recorded[k]}" for k in FILTER_KEYS if recorded.get(k)]
    return " ".join(shown) or "-"


def unattended_for(detached: bool, state: str, beat_age: float | None) -> float | None:
    """Seconds since a sweep last took a step of a running detached run, once that is at
    least ``UNATTENDED_AFTER`` (no worker is running, or none reaches this store); else
    ``None``. ``beat_age`` is the seconds since its last beat, by the database clock."""
    if not detached or state != "running" or beat_age is None or beat_age < UNATTENDED_AFTER:
        return None
    return round(float(beat_age), 1)


def outcome(run: Mapping[str, Any], lang: str = "en") -> str:
    """How a run ended (or that it runs), in words: the stop reason, else its state's word
    (a detached run that no worker carries on says so)."""
    waited = run.get("unattended_for")
    if waited is not None:
        return i18n.t("replay_run.unattended", lang, seconds=f"{waited:.0f}")
    return stop_reason(run, lang) or i18n.t(STATE_KEYS[run["state"]], lang)


def provider_ids(result: Any) -> list[str]:
    """The provider ids an effect's recorded result names: the first of ``PROVIDER_ID_KEYS``
    holding a string or a number, else the values of its ``*_id`` keys (``post_id``), in key
    order. A result that is not an object names none."""
    if not isinstance(result, Mapping):
        return []
    for key in PROVIDER_ID_KEYS:
        if (value := _scalar(result.get(key))) is not None:
            return [value]
    found = [_scalar(result[k]) for k in sorted(result) if isinstance(k, str) and k.endswith("_id")]
    return [v for v in found if v is not None]


def _scalar(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def split_effects(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per task id, the effects a replay would perform again (``again``: an intent without a
    confirmed receipt) and the ones it would skip (``skip``: confirmed, its result kept). An
    effect the handler has not reached yet has no row and is not listed."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        entry = out.setdefault(str(r["task_id"]), {"again": [], "skip": []})
        confirmed = r["status"] == "confirmed"
        item: dict[str, Any] = {
            "name": r["name"],
            "effect_key": r["effect_key"],
            "status": r["status"],
            "attempt": r["attempt"],
        }
        if confirmed:
            item["confirmed_at"] = r["confirmed_at"]
            item["provider_ids"] = provider_ids(r["result"])
        entry["skip" if confirmed else "again"].append(item)
    return out


# -- replay from a step ------------------------------------------------------------------------
#: The longest step name ``from_step`` takes (as the handler's ``ctx`` does).
MAX_STEP_NAME = 200


def check_from_step(from_step: Any) -> str | None:
    """``from_step`` as given to a replay: ``None``, or a step name (non-empty text of at most
    ``MAX_STEP_NAME`` characters); a ``ValueError`` naming it otherwise."""
    if from_step is None:
        return None
    if not isinstance(from_step, str) or not from_step or len(from_step) > MAX_STEP_NAME:
        raise ValueError(
            f"from_step must be a step name: non-empty text of at most {MAX_STEP_NAME} characters"
        )
    if any(ord(c) < 32 for c in from_step):
        raise ValueError("from_step must not contain control characters")
    return from_step


def forget_from(
    recorded: Sequence[Mapping[str, Any]], from_step: str, task_id: str
) -> list[tuple[int, Mapping[str, Any]]]:
    """The recorded rows (in recorded order) a replay from ``from_step`` forgets — that step
    and everything recorded after it — each with its position (from 1). A name the task has not
    recorded is a ``ValueError`` that lists the names it has."""
    names = [str(r["name"]) for r in recorded]
    if from_step not in names:
        known = ", ".join(repr(n) for n in names) or "none"
        raise ValueError(
            f"from_step {from_step!r}: task {task_id} has recorded no step or effect of that "
            f"name (it has: {known})"
        )
    start = names.index(from_step)
    return [(i + 1, recorded[i]) for i in range(start, len(recorded))]


def replay_effects(
    recorded: Iterable[Mapping[str, Any]], forgotten: Iterable[str]
) -> dict[str, list[dict[str, Any]]]:
    """What a replay of one task does with its effects, ``split_effects``'s shape: ``again``
    — every effect it forgets (a confirmed one runs again: ``forgotten`` true) and every
    intent without a confirmed receipt; ``skip`` — the confirmed effects it keeps."""
    gone = set(forgotten)
    out: dict[str, list[dict[str, Any]]] = {"again": [], "skip": []}
    for r in recorded:
        if not r["is_effect"]:
            continue
        item: dict[str, Any] = {
            "name": r["name"],
            "effect_key": r["effect_key"],
            "status": r["status"],
            "attempt": r["attempt"],
            "forgotten": r["name"] in gone,
        }
        if r["status"] == "confirmed":
            item["confirmed_at"] = r["confirmed_at"]
            item["provider_ids"] = provider_ids(r["result"])
        keep = r["status"] == "confirmed" and r["name"] not in gone
        out["skip" if keep else "again"].append(item)
    return out
